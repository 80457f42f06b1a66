"""A compute node dies in the middle of a job, on the multi-node clusters (Slurm 24.11 and 26.05:
scripts/cluster/newer.sh, two nodes each, SlurmdTimeout 30 s): every process of the node is killed at
once (`newer.sh VERSION kill-node N`: slurmd, slurmstepd, the worker; what a power loss does). Slurm
marks the node down after SlurmdTimeout and requeues its tasks; the owner reads "a cluster computer
failed; the work continues on another" (never "failed"); the tasks run again on the other node,
skipping the photos the first run finished; the job completes with every photo done exactly once."""
import re
import time
from collections import Counter
from pathlib import Path

import pytest

from jobs.models import Job, JobStatus, TargetStatus
from tests.e2e import sites
from tests.e2e.conftest import JOB_WAIT_S, SAMPLES, fill, run_rq, watch_until
from tests.e2e.test_end_to_end import start
from tests.e2e.test_retry import FINAL, small_template

NODE_FAILED = "a cluster computer failed; the work continues on another"
#: photos per task: enough that the task is still busy when its node dies
PER_TASK = 12


@pytest.mark.parametrize("version", ["24.11", "26.05"], ids=sites.site_id)
def test_a_node_that_dies_mid_job_loses_no_photo_and_does_none_twice(api, local, version, folder, redis_queue):
    site = sites.site(version)
    # One GPU of any type: either node can run a task.
    small_template("any-gpu", base=site.gpu, chunk_size=PER_TASK, engine="classic")
    fill(folder, {f"p{i:02d}.jpg": SAMPLES / ("t1.jpg" if i % 2 else "astronaut.png") for i in range(2 * PER_TASK)})
    job = start(api, folder, template="any-gpu", name="through a node failure")
    run_rq(redis_queue)
    job.refresh_from_db()
    assert job.slurm_job_id, job.error

    # Task 0 runs and has written a photo: its node is the one that dies. Watched on the cluster
    # itself (its outputs on the shared storage, squeue), not through the portal: a busy test machine
    # once saw the task through the portal only when its last photo was done.
    outputs = {t.output_name: Path(job.folder.output(t.output_name)) for t in job.targets.filter(task_index=0)}
    deadline = time.monotonic() + JOB_WAIT_S
    while not any(p.exists() for p in outputs.values()):
        assert time.monotonic() < deadline, f"task 0 wrote no photo in {JOB_WAIT_S}s"
        time.sleep(0.1)
    dead = site.slurm("squeue", "-h", "-j", f"{job.slurm_job_id}_0", "-o", "%N").strip()
    assert dead in site.nodes, dead
    killed_at = time.monotonic()
    site.newer_sh("kill-node", str(site.nodes.index(dead) + 1))
    # What the first run had finished when its node died (nothing of it runs any more).
    before = {name: p.stat().st_mtime_ns for name, p in outputs.items() if p.exists()}
    assert len(before) < PER_TASK, "task 0 had finished before its node died"

    seen: dict = {}

    def look(j: Job) -> None:
        task = j.tasks.get(index=0)
        if task.reason == NODE_FAILED and "reason" not in seen:
            seen["reason"] = time.monotonic() - killed_at
            seen["api"] = [t["reason"] for t in api.get(f"/api/v1/jobs/{j.id}").json()["tasks"] if t["index"] == 0]
            seen["status"] = j.status
            seen["failed"] = j.targets.filter(status=TargetStatus.FAILED).count()
        if "reason" in seen and "rerun" not in seen and task.state == "RUNNING":
            seen["rerun"] = (time.monotonic() - killed_at, task.node)
    try:
        job = watch_until(job, FINAL, timeout=600, on_cycle=look)
    finally:
        site.newer_sh("up")  # the node's slurmd again (it rejoins: ReturnToService=2)
    done_at = time.monotonic() - killed_at
    timeline = (f"Slurm {version}: node {dead} killed; the owner read it after {seen.get('reason', -1):.0f} s; "
                f"task 0 ran again on {seen.get('rerun', (0, '?'))[1]} after {seen.get('rerun', (-1,))[0]:.0f} s; "
                f"job {job.status} after {done_at:.0f} s\n")
    print(timeline)
    artifacts = sites.REPO / "artifacts"
    artifacts.mkdir(exist_ok=True)
    with open(artifacts / "node-failure-timeline.txt", "a") as f:  # for the people who read the run
        f.write(timeline)

    assert seen.get("api") == [NODE_FAILED] and seen["status"] == "running" and seen["failed"] == 0, seen
    assert seen["rerun"][1] != dead, seen  # the work continued on another computer
    assert job.status == JobStatus.COMPLETED, (job.error, [(t.name, t.status, t.message) for t in job.targets.all()])
    assert job.done == 2 * PER_TASK and job.failed == 0

    # Slurm's accounting: task 0's first run ended NODE_FAIL on the dead node, its last COMPLETED elsewhere.
    runs = [line.split("|") for line in site.slurm("sacct", "-n", "-X", "-D", "-P", "-j", job.slurm_job_id,
                                                   "-o", "JobID,State,NodeList").splitlines()
            if line.startswith(f"{job.slurm_job_id}_0|")]
    assert runs[0][1:] == ["NODE_FAIL", dead] and runs[-1][1] == "COMPLETED" and runs[-1][2] != dead, runs

    # No photo twice: what the first run finished is skipped and its file untouched; the rerun's log
    # names exactly the photos the first run had not finished.
    for name, mtime in before.items():
        assert Path(job.folder.output(name)).stat().st_mtime_ns == mtime, f"{name} was written twice"
    skipped = {t.output_name for t in job.targets.filter(task_index=0) if t.status == TargetStatus.SKIPPED}
    assert skipped and skipped <= set(before)
    log = Path(job.folder.log(job.slurm_job_id, 0)).read_text()
    rerun = Counter(re.findall(r"target \d+ (\S+): (?:done|no_face|failed)", log))
    assert rerun == Counter({t.output_name for t in job.targets.filter(task_index=0)} - skipped), log[-3000:]
    assert all(Path(job.folder.output(t.output_name)).stat().st_size > 0 for t in job.targets.all())
