"""The watcher's decisions, from REAL captured Slurm 22.05 output, through a fake SSH runner.

The fake replaces only the one seam (`cluster.runner_for`); parsing, state mapping and the
job's final state are the real code. End-to-end runs on the real cluster live in tests/e2e.
"""
import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

import cluster
from cluster import ClusterUnreachable, CommandResult
from jobs.watcher import poll as watcher
from jobs.models import ClusterProfile, Job, JobStatus, Target, TargetStatus, Task

SAMPLES = Path(__file__).resolve().parents[1] / "cluster" / "samples"
EMPTY_SQUEUE = (SAMPLES / "squeue_empty.json").read_text()


class FakeRunner:
    """Answers run_batch([squeue, sacct, sacct exit codes, find progress]) with canned texts."""

    def __init__(self, sacct="", codes="", progress="", squeue=EMPTY_SQUEUE, log_tail=""):
        self.answers = {"squeue": squeue, "sacct": sacct, "codes": codes, "find": progress}
        self.log_tail = log_tail
        self.batches = []
        self.fetched = []

    def run_batch(self, argvs, timeout=60):
        self.batches.append(argvs)
        out = []
        for argv in argvs:
            key = "codes" if argv[0] == "sacct" and "--parsable2" in argv else argv[0]
            text = self.log_tail if key == "tail" else self.answers[key]
            out.append(CommandResult(argv=argv, rc=0, stdout=text, stderr=""))
        return out

    def run(self, argv, stdin=None, timeout=60, check=False):
        raise AssertionError(f"the watcher makes ONE exec per cycle (run_batch), not run({argv})")

    def get_file(self, remote, local):
        self.fetched.append(remote)
        Path(local).write_bytes(b"\xff\xd8 swapped")


def make_job(owner, template, slurm_id, tasks, targets_per_task=1, **fields):
    job = Job.objects.create(owner=owner, template=template, template_snapshot=template.snapshot().to_json(),
                             cluster=template.cluster, status=JobStatus.RUNNING, slurm_job_id=slurm_id,
                             submitted_at=timezone.now() - timedelta(minutes=1), total=tasks * targets_per_task,
                             **fields)
    for n in range(tasks):
        Task.objects.create(job=job, index=n, state="RUNNING")
        for k in range(targets_per_task):
            i = n * targets_per_task + k
            Target.objects.create(job=job, index=i, name=f"{i}.jpg", output_name=f"{i}.jpg", task_index=n)
    return job


def record(job, task_index, targets):
    doc = {"version": 1, "job": str(job.id), "task_index": task_index, "state": "finished", "targets": targets}
    path = job.folder.progress_record(task_index)
    return f"{path}\t{json.dumps(doc)}\n"


def done(i):
    return {"index": i, "target": f"/in/{i}.jpg", "output": f"{i}.jpg", "status": "done", "faces_found": 1, "faces_swapped": 1,
            "seconds": 0.2, "message": ""}


def settle(profile, cycles: int = 3) -> None:
    """Poll as the watcher's loop would: a task seen FAILED has its log read on the next cycle (in
    that cycle's one round trip), and a job ends once its outputs are fetched, so an ended array
    settles within three cycles."""
    for _ in range(cycles):
        watcher.poll_profile(profile)


@pytest.fixture
def fake(monkeypatch, inline_rq):
    """Install a FakeRunner as the one SSH seam; RQ tasks (output fetches) run inline."""

    def install(runner):
        monkeypatch.setattr(cluster, "runner_for", lambda profile: runner)
        return runner

    return install


def test_it_polls_every_active_job_in_one_round_trip(fake, owner, template):
    runner = fake(FakeRunner())
    for sid in ("101", "102", "103"):
        make_job(owner, template, sid, tasks=1)
    watcher.poll_profile(template.cluster)
    assert len(runner.batches) == 1
    squeue, sacct, codes, find = runner.batches[0]
    assert squeue[0] == "squeue" and sacct[0] == "sacct" and find[0] == "find"
    assert "--jobs=101,102,103" in sacct


def test_it_ends_partially_failed_when_one_task_failed(fake, owner, template):
    job = make_job(owner, template, "33", tasks=4)
    progress = "".join(record(job, n, [done(n)]) for n in (0, 1, 3))
    progress += record(job, 2, [{**done(2), "status": "failed", "faces_swapped": 0,
                                 "message": "2.jpg is truncated or corrupt"}])
    runner = fake(FakeRunner(sacct=(SAMPLES / "sacct_array_mixed.json").read_text(),
                             codes=(SAMPLES / "sacct_array_mixed.txt").read_text(), progress=progress))
    watcher.poll_profile(template.cluster)
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING and job.tasks.get(index=2).state == "RUNNING"  # its log is read next
    assert [argv[0] for argv in runner.batches[-1]] == ["squeue", "sacct", "sacct", "find"]
    watcher.poll_profile(template.cluster)
    assert [argv[0] for argv in runner.batches[-1]] == ["squeue", "sacct", "sacct", "find", "tail"]
    assert runner.batches[-1][-1][-1] == job.folder.log("33", 2)
    job.refresh_from_db()
    assert job.status == JobStatus.PARTIALLY_FAILED
    assert (job.done, job.failed) == (3, 1) and "1 of 4 images failed" in job.error
    task2 = job.tasks.get(index=2)
    assert task2.state == "FAILED" and task2.exit_code == 3  # from the text sacct: the JSON loses it
    assert "exit code 3" in task2.reason
    assert job.targets.get(index=2).message == "2.jpg is truncated or corrupt"
    assert sorted(runner.fetched) == sorted(job.folder.output(f"{i}.jpg") for i in (0, 1, 3))
    assert all(t.output_file for t in job.targets.filter(status=TargetStatus.DONE))


def test_it_reads_a_memory_kill_as_out_of_memory_not_failed(fake, owner, template):
    template.max_mem = template.mem  # at its ceiling: not retried automatically (tests/portal/test_retry.py)
    template.save()
    job = make_job(owner, template, "37", tasks=1)
    fake(FakeRunner(sacct=(SAMPLES / "sacct_memkill.json").read_text(),
                    log_tail=(SAMPLES / "memkill_output.txt").read_text()))
    settle(template.cluster)
    job.refresh_from_db()
    task = job.tasks.get()
    assert task.state == "OUT_OF_MEMORY" and "ran out of memory" in task.reason
    assert job.status == JobStatus.FAILED
    target = job.targets.get()
    assert target.status == TargetStatus.FAILED and "ran out of memory" in target.message


def test_it_explains_a_timeout_in_plain_words(fake, owner, template):
    job = make_job(owner, template, "32", tasks=1)
    fake(FakeRunner(sacct=(SAMPLES / "sacct_timeout.json").read_text()))
    settle(template.cluster)
    job.refresh_from_db()
    assert job.tasks.get().state == "TIMEOUT"
    assert "time limit" in job.tasks.get().reason and job.status == JobStatus.FAILED


def test_it_ends_cancelled_and_keeps_what_was_done(fake, owner, template):
    job = make_job(owner, template, "29", tasks=4, cancel_requested=True)
    fake(FakeRunner(sacct=(SAMPLES / "sacct_cancelled.json").read_text(), progress=record(job, 0, [done(0)])))
    settle(template.cluster)
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED and job.done == 1
    assert job.targets.get(index=0).output_file


def test_a_job_gone_from_squeue_is_not_assumed_done(fake, owner, template):
    job = make_job(owner, template, "4242", tasks=1)
    fake(FakeRunner(sacct=json.dumps({"meta": {}, "errors": [], "jobs": []})))
    watcher.poll_profile(template.cluster)
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING  # recently submitted: accounting may lag, wait
    Job.objects.filter(pk=job.pk).update(submitted_at=timezone.now() - timedelta(minutes=30))
    watcher.poll_profile(template.cluster)
    job.refresh_from_db()
    assert job.status == JobStatus.LOST and "no longer knows this job" in job.error


def test_it_records_an_unreachable_cluster_and_changes_no_job(monkeypatch, owner, template):
    job = make_job(owner, template, "33", tasks=1)

    def refuse(profile):
        raise ClusterUnreachable("cannot reach the cluster at 127.0.0.1:2222: connection refused")

    monkeypatch.setattr(cluster, "runner_for", refuse)
    result = watcher.poll_profile(template.cluster)
    assert "connection refused" in result.error
    profile = ClusterProfile.objects.get(pk=template.cluster.pk)
    assert profile.unreachable_since is not None and "connection refused" in profile.last_error
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING
