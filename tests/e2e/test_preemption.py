"""Preemption on the REAL local cluster (PreemptType=preempt/qos, PreemptMode=REQUEUE, QOS urgent
preempting normal and high: scripts/cluster/up.sh): a normal-priority job fills both GPUs with
several photos per task; an urgent job arrives; Slurm requeues one of the normal job's tasks; its
owner sees "paused to make room for urgent work; continues automatically" (never "failed"); the
urgent job runs; the normal job finishes later with every photo done exactly once (the rerun skips
what the first run finished, and leaves those outputs untouched)."""
import os
import re
import shutil
import time
from collections import Counter
from pathlib import Path

from jobs.models import Job, JobStatus, QosLevel, TargetStatus, Template
from tests.e2e.conftest import JOB_WAIT_S, SAMPLES, fill, run_rq, watch_until
from tests.e2e.test_end_to_end import start

PAUSED = "paused to make room for urgent work; continues automatically"
FINAL = {JobStatus.COMPLETED, JobStatus.PARTIALLY_FAILED, JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.LOST}
#: photos per task of the normal job: enough that a task is still busy when the urgent job comes
PER_TASK = 30


def gpu_template(base: str, slug: str, qos: str, chunk_size: int) -> Template:
    t = Template.objects.get(slug=base)
    t.pk, t.slug, t.name, t.qos, t.chunk_size, t.array_limit = None, slug, slug, qos, chunk_size, None
    t.gpu_type = "h200"  # every cluster here has two, on one node: two tasks fill them
    t.engine = "classic"  # the same pace on every machine
    t.save()
    return t


def test_urgent_work_pauses_a_normal_task_which_then_finishes_every_photo_exactly_once(
        api, site, folder, redis_queue):
    qos = site.slurm("sacctmgr", "-n", "-P", "show", "qos", "format=name,preempt")
    assert re.search(r"^urgent\|.*normal", qos, re.M), f"the cluster has no urgent QOS preempting normal:\n{qos}"
    for name, rank in (("normal", 10), ("high", 20), ("urgent", 30)):
        QosLevel.objects.create(name=name, label=name, rank=rank)
    gpu_template(site.gpu, "low", "normal", PER_TASK)
    gpu_template(site.gpu, "rush", "urgent", 1)

    photos = {f"p{i:02d}.jpg": SAMPLES / ("t1.jpg" if i % 2 else "astronaut.png") for i in range(2 * PER_TASK)}
    fill(folder, photos)
    low = start(api, folder, template="low", name="normal work")
    run_rq(redis_queue)
    low.refresh_from_db()
    assert low.snapshot.qos == "normal" and low.slurm_job_id, low.error

    # Both GPUs busy with the normal job, and some photos already written. Watched on the cluster
    # itself (squeue, the outputs on the shared storage), not through the portal: a busy test machine
    # once saw it through the portal only when the tasks were nearly done.
    # EVERY task must have written a photo: Slurm picks which task to pause, and a CI run once
    # paused the one that had finished nothing yet (the other had), leaving nothing to skip.
    outputs: dict[int, list[Path]] = {}
    for t in low.targets.all():
        outputs.setdefault(t.task_index, []).append(Path(low.folder.output(t.output_name)))

    def busy() -> bool:
        running = site.slurm("squeue", "-h", "-j", low.slurm_job_id, "-t", "R", "-o", "%i").split()
        return len(running) == 2 and all(any(p.exists() for p in paths) for paths in outputs.values())
    deadline = time.monotonic() + JOB_WAIT_S
    while not busy():
        assert time.monotonic() < deadline, site.slurm("squeue", "-h", "-j", low.slurm_job_id, "-o", "%i %T %r")
        time.sleep(0.2)

    urgent_folder = Path(folder.parent / (folder.name + "-urgent"))  # in the allowed storage too
    urgent_folder.mkdir()
    os.chmod(urgent_folder, 0o755)
    fill(urgent_folder, {"rush.jpg": SAMPLES / "t1.jpg"})
    urgent = start(api, urgent_folder, template="rush", name="urgent work")
    run_rq(redis_queue)
    urgent.refresh_from_db()
    assert urgent.snapshot.qos == "urgent" and urgent.slurm_job_id, urgent.error

    # Slurm requeues one normal task: the owner sees it paused, in plain words, in the API.
    seen = {}

    def look(job: Job) -> None:
        paused = job.tasks.filter(reason=PAUSED).first()
        if paused and "task" not in seen:
            body = api.get(f"/api/v1/jobs/{job.id}").json()
            seen["task"] = paused.index
            seen["api"] = [t["reason"] for t in body["tasks"] if t["index"] == paused.index]
            seen["status"] = body["status"]
            targets = job.targets.filter(task_index=paused.index)
            # What the owner saw done before the pause; the portal learns of a finished photo a poll
            # later than the worker wrote it (seen in CI), so the files on disk are the full account.
            seen["done_seen"] = {t.output_name for t in targets if t.status == TargetStatus.DONE}
            seen["on_disk"] = {t.output_name: out.stat().st_mtime_ns for t in targets
                               if (out := Path(job.folder.output(t.output_name))).exists()}
            seen["failed_then"] = job.targets.filter(status=TargetStatus.FAILED).count()
    try:
        low = watch_until(low, FINAL, timeout=600, on_cycle=look)
        urgent = watch_until(urgent, FINAL)
    finally:
        shutil.rmtree(urgent_folder, ignore_errors=True)

    assert "task" in seen, "no task of the normal job was seen paused"
    assert seen["api"] == [PAUSED] and seen["status"] == "running" and seen["failed_then"] == 0
    assert urgent.status == JobStatus.COMPLETED, urgent.error
    assert low.status == JobStatus.COMPLETED, (low.error, [(t.name, t.status, t.message) for t in low.targets.all()])
    assert low.done == 2 * PER_TASK and low.failed == 0

    # Slurm's accounting: the task's first run was PREEMPTED, and it ran again.
    sacct = site.slurm("sacct", "-n", "-X", "-D", "-P", "-j", low.slurm_job_id, "-o", "JobID,State")
    runs = [line.split("|") for line in sacct.splitlines() if line.startswith(f"{low.slurm_job_id}_{seen['task']}|")]
    assert [state for _id, state in runs][:1] == ["PREEMPTED"] and runs[-1][1] == "COMPLETED", sacct

    # Every photo exactly once: the rerun skipped what the first run finished, outputs untouched.
    paused_targets = low.targets.filter(task_index=seen["task"])
    skipped = {t.output_name for t in paused_targets if t.status == TargetStatus.SKIPPED}
    assert seen["done_seen"], "the paused task had finished no photo before it was paused"
    assert seen["done_seen"] <= skipped <= set(seen["on_disk"]), (seen, skipped)
    for name, mtime in seen["on_disk"].items():
        assert Path(low.folder.output(name)).stat().st_mtime_ns == mtime, f"{name} was written twice"
    assert all(Path(low.folder.output(t.output_name)).stat().st_size > 0 for t in low.targets.all())
    # Slurm starts the task's log anew for the rerun (seen on 22.05): it lists what the rerun
    # processed, which is exactly the photos the first run had not finished, each once.
    log = Path(low.folder.log(low.slurm_job_id, seen["task"])).read_text()
    rerun = Counter(re.findall(r"target \d+ (\S+): (?:done|no_face|failed)", log))
    assert rerun == Counter({t.output_name for t in paused_targets} - skipped), log[-3000:]
