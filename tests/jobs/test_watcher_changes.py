"""The watcher reads only the progress records that changed since its last cycle: `find -newermt`
on the cluster's own clock (cluster/progress.py), run for real here with this machine's find, awk
and date over record files laid out as the worker writes them; squeue's answer is canned (REAL
captured Slurm 22.05 output, tests/jobs/test_watcher.py's CannedSlurm)."""
import json
import os
import time

import pytest

from jobs.live.protocol import Publisher
from jobs.models import Job, Target, TargetStatus
from jobs.watcher import poll as watcher
from tests.fake_ssh import program, run_here

from .test_watcher import SAMPLES, CannedSlurm, make_job

RUNNING = (SAMPLES / "squeue_array_running.json").read_text()  # array 29: tasks 0, 1 run, 2, 3 wait


class ClusterHere(CannedSlurm):
    """Slurm canned; date, find and awk run on this machine. `read` lists, per cycle, the record
    files the watcher's finds printed (a new job's whole read, and the changed ones)."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.read: list[list[str]] = []

    def __call__(self, argv):
        name = program(argv)
        if name == "date":  # each cycle asks the clock first
            self.read.append([])
            return run_here(argv)
        if name in ("find", "true"):
            result = run_here(argv)
            self.read[-1] = sorted(self.read[-1] + [os.path.basename(line.split("\t", 1)[0])
                                                    for line in result.stdout.splitlines()])
            return result
        return super().__call__(argv)


def write_record(job, task_index, targets, age_s=0.0):
    path = job.folder.progress_record(task_index)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    doc = {"version": 1, "job": str(job.id), "task_index": task_index, "state": "running", "targets": targets}
    with open(path, "w") as fh:
        fh.write(json.dumps(doc) + "\n")
    if age_s:
        when = time.time() - age_s
        os.utime(path, (when, when))


def target(i, status="done"):
    return {"index": i, "target": f"/in/{i}.jpg", "output": f"{i}.jpg", "status": status,
            "faces_found": 1, "faces_swapped": 1 if status == "done" else 0, "seconds": 0.2, "message": ""}


@pytest.fixture
def cluster_here(fake_ssh, monkeypatch, inline_rq, template, tmp_path):
    monkeypatch.setattr(watcher, "_last_full_accounting", {})
    monkeypatch.setattr(watcher, "_last_progress_read", {})
    monkeypatch.setattr(watcher, "_last_applied", {})
    profile = template.cluster
    profile.work_root = str(tmp_path / "work")
    profile.save()
    slurm = ClusterHere(squeue=RUNNING, sacct=(SAMPLES / "sacct_array_running.json").read_text())
    fake_ssh(on_batch=slurm, serve=slurm.output)
    return slurm


def test_a_cycle_reads_the_records_that_changed_and_the_counts_follow(cluster_here, owner, template):
    job = make_job(owner, template, "29", tasks=4, targets_per_task=2)
    # Written a minute ago: a watcher new to the job still reads them all once.
    write_record(job, 0, [target(0), target(1)], age_s=60)
    write_record(job, 1, [target(2), target(3, "running")], age_s=60)
    watcher.poll_profile(template.cluster)
    assert cluster_here.read[-1] == ["task-0.json", "task-1.json"]
    job.refresh_from_db()
    assert (job.done, job.failed) == (3, 0)
    assert Target.objects.filter(job=job, status=TargetStatus.DONE).exclude(output_file="").count() == 3

    watcher.poll_profile(template.cluster)  # nothing changed on the cluster: nothing is read
    assert cluster_here.read[-1] == []

    write_record(job, 1, [target(2), {**target(3, "failed"), "message": "3.jpg is damaged"}])
    watcher.poll_profile(template.cluster)
    assert cluster_here.read[-1] == ["task-1.json"]  # task 0's record is not read again
    job.refresh_from_db()
    assert (job.done, job.failed) == (3, 1)
    assert Job.objects.get(pk=job.pk).targets.get(index=3).status == TargetStatus.FAILED
    # The counts kept from the changes are the ones counted over every target.
    assert job.recount() is False


def test_a_cycle_that_failed_reads_its_records_again(cluster_here, owner, template, monkeypatch):
    job = make_job(owner, template, "29", tasks=4, targets_per_task=2)
    write_record(job, 0, [target(0), target(1)], age_s=60)
    monkeypatch.setattr(watcher, "PROGRESS_OVERLAP_S", 0.0)  # exact times: a record is read again only if it must be
    watcher.poll_profile(template.cluster)
    time.sleep(0.05)
    write_record(job, 1, [target(2), target(3)])
    time.sleep(0.05)
    real_apply, calls = watcher.apply_all, []

    def fails_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("the database went away")
        return real_apply(*args, **kwargs)

    monkeypatch.setattr(watcher, "apply_all", fails_once)
    with pytest.raises(RuntimeError):
        watcher.poll_profile(template.cluster)
    assert cluster_here.read[-1] == ["task-1.json"]
    watcher.poll_profile(template.cluster)
    assert cluster_here.read[-1] == ["task-1.json"]  # read again: the failed cycle applied nothing
    job.refresh_from_db()
    assert job.done == 4


def test_a_big_cycles_outputs_are_asked_for_in_batches_several_workers_can_share(cluster_here, owner, template,
                                                                                  inline_rq):
    job = make_job(owner, template, "29", tasks=3, targets_per_task=20)
    for task in range(3):
        write_record(job, task, [target(i) for i in range(task * 20, task * 20 + 20)])
    watcher.poll_profile(template.cluster)
    fetches = [args for func, args in inline_rq.enqueued if func == "jobs.watcher.outputs.fetch_outputs"]
    assert [len(indexes) for _job, indexes in fetches] == [25, 25, 10]  # FETCH_BATCH each, one RQ job per batch
    assert sorted(i for _job, indexes in fetches for i in indexes) == list(range(60))
    assert not Target.objects.filter(job=job, output_file="").exists()


def test_records_read_while_slurm_knew_nothing_of_the_job_are_read_again(cluster_here, owner, template):
    # Between leaving squeue and reaching sacct's answer a job is unknown to both for a moment: the
    # rules stop there (is it lost?) and apply none of its records, so they must be read again.
    job = make_job(owner, template, "29", tasks=4, targets_per_task=2)
    write_record(job, 0, [target(0), target(1)], age_s=60)
    cluster_here.answers["squeue"] = (SAMPLES / "squeue_empty.json").read_text()
    cluster_here.answers["sacct"] = ""
    watcher.poll_profile(template.cluster)
    assert cluster_here.read[-1] == ["task-0.json"]
    assert Job.objects.get(pk=job.pk).done == 0
    cluster_here.answers["squeue"] = RUNNING
    watcher.poll_profile(template.cluster)
    assert cluster_here.read[-1] == ["task-0.json"]  # unchanged for a minute, read all the same
    assert Job.objects.get(pk=job.pk).done == 2


def test_a_cycle_that_fails_part_way_through_a_job_leaves_it_as_it_was_and_the_next_applies_it(
        cluster_here, owner, template, monkeypatch):
    """A cycle's changes are written in one transaction (and, if that fails, each job's in its
    own): the database gone after the targets were written done, before their counts, leaves no
    target done without its count, and asks the RQ workers for no output; the next cycle reads the
    same records again and applies them whole."""
    from jobs.watcher import apply as one_job
    from jobs.watcher import batch

    job = make_job(owner, template, "29", tasks=4, targets_per_task=2)
    write_record(job, 0, [target(0), target(1)], age_s=60)

    def gone(*args, **kwargs):
        raise RuntimeError("the database went away")

    with monkeypatch.context() as m:
        m.setattr(batch, "_write_jobs", gone)  # the batch: after its target rows
        m.setattr(one_job.Counts, "add_to", gone)  # each job on its own: after its target rows too
        with pytest.raises(RuntimeError):
            watcher.poll_profile(template.cluster)
    job.refresh_from_db()
    assert (job.done, job.failed) == (0, 0)
    assert not Target.objects.filter(job=job, status=TargetStatus.DONE).exists()  # the targets' changes undone too
    assert not Target.objects.filter(job=job).exclude(output_file="").exists()  # nothing fetched

    watcher.poll_profile(template.cluster)
    job.refresh_from_db()
    assert (job.done, job.failed) == (2, 0)
    assert Target.objects.filter(job=job, status=TargetStatus.DONE).exclude(output_file="").count() == 2


def test_a_batch_that_fails_applies_each_job_on_its_own(cluster_here, owner, template, monkeypatch, caplog):
    """One job's change that the batch cannot write must not hold up the other jobs: the cycle
    writes each job on its own instead, and says so in the log."""
    from jobs.watcher import batch

    jobs = [make_job(owner, template, "29", tasks=4, targets_per_task=2) for _ in range(2)]
    for job in jobs:
        write_record(job, 0, [target(0), target(1, "running")], age_s=60)
    real_write = batch._write

    def refuses_the_second_job(items, pub):
        result = real_write(items, pub)  # written, and the jobs' counts moved in memory...
        if any(item.job.pk == jobs[1].pk for item in items):
            raise RuntimeError("value too long for type character varying(2000)")  # ...then rolled back
        return result

    sent = []
    monkeypatch.setattr(batch, "_write", refuses_the_second_job)
    monkeypatch.setattr(Publisher, "flush", lambda pub: sent.extend(pub.messages))
    with caplog.at_level("ERROR", logger="jobs.watcher.batch"):
        result = watcher.poll_profile(template.cluster)
    assert sorted(result.changed) == sorted(str(j.id) for j in jobs)
    for job in jobs:
        job.refresh_from_db()
        assert job.done == 1
        assert Target.objects.get(job=job, index=1).status == TargetStatus.RUNNING
    assert "each is applied on its own" in caplog.text
    # the pages are told what the database holds: one photo done each, not the failed batch's count too
    shown = {m["job"]["id"]: m["job"]["progress"]["done"] for _group, m in sent if m["type"] == "job"}
    assert shown == {str(j.id): 1 for j in jobs}


def test_a_cycle_writes_many_jobs_changes_in_a_few_statements(cluster_here, owner, template, monkeypatch):
    """The cost of a cycle's writes does not grow with the jobs that changed: 3 jobs and 12 jobs,
    each with a photo done and one running, take the same number of statements (the outputs it
    asks for are fetched by the RQ workers, not counted here)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from .conftest import InlineQueue

    asked = InlineQueue()
    asked.enqueue = lambda func, *args, **options: asked.enqueued.append((func, args))
    monkeypatch.setattr("jobs.background.enqueue.queue", lambda: asked)

    def statements_for(n: int) -> int:
        jobs = [make_job(owner, template, "29", tasks=4, targets_per_task=2) for _ in range(n)]
        for job in jobs:
            write_record(job, 0, [target(0), target(1, "running")], age_s=60)
        with CaptureQueriesContext(connection) as queries:
            watcher.poll_profile(template.cluster)
        for job in jobs:
            job.refresh_from_db()
            assert job.done == 1, "every job's photo done is counted"
        assert sorted(args[0] for _func, args in asked.enqueued[-n:]) == sorted(str(j.id) for j in jobs)
        Job.objects.filter(pk__in=[j.pk for j in jobs]).update(status="completed")
        return len(queries)

    statements_for(1)  # the first cycle also reads what a process keeps a while (a template's pace)
    assert statements_for(3) == statements_for(12)
