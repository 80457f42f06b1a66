"""A retried job's tasks follow only their own attempt, and a job stuck by any disagreement with
Slurm is reconciled against Slurm's accounting of all its attempts (jobs.watcher.reconcile).

The case behind it, seen on a fresh `make up`: a 2-task job, task 1 failed, Retry twice (each a
single-task array, `--array=1`). sacct prints such an array WITHOUT its index while it runs
(tests/cluster/samples/22.05/sacct_single_task_array_running.json, captured on the local cluster); read
as index 0, it turned task 0, COMPLETED in attempt 1, back to PENDING, and the job stayed
"running" for good, Cancel too.
"""
import json
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

import pytest
from django.utils import timezone

from cluster import SlurmTask
from jobs.models import JobAttempt, JobStatus, Target, TargetStatus
from jobs.watcher import poll as watcher
from jobs.watcher.decide import JobRow, TaskChange, TaskRow
from jobs.watcher.reconcile import CANCEL_SETTLE, STALE_MARGIN, AttemptRow, reconcile, stale
from tests.jobs.test_watcher import SAMPLES, CannedSlurm, done, fake, make_job, record, settle  # noqa: F401 (fake: a fixture)

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=dt_timezone.utc)


def squeue_json(job_id: int, index: int, state: str) -> str:
    """A `squeue --json` holding one task (what CannedSlurm turns into squeue's text)."""
    return json.dumps({"jobs": [{"job_id": job_id, "array_job_id": job_id, "array_task_id": index,
                                 "job_state": state, "state_reason": "None", "nodes": "vm" if state == "RUNNING" else "",
                                 "name": "ffp", "start_time": 0, "end_time": 0}]})


def retried(owner, template, slurm_id="6"):
    """A 2-task job whose task 0 COMPLETED in attempt 1 (Slurm 33) and whose task 1 runs again as
    attempt 2 (Slurm `slurm_id`, `--array=1`), as jobs.job.retry leaves it."""
    job = make_job(owner, template, slurm_id, tasks=2, attempt=2)
    job.tasks.filter(index=0).update(state="COMPLETED", node="vm", elapsed_seconds=3, attempt=1)
    job.tasks.filter(index=1).update(state="PENDING", attempt=2)
    Target.objects.filter(job=job, index=0).update(status=TargetStatus.DONE, output_file="/media/0.jpg")
    JobAttempt.objects.create(job=job, number=1, slurm_job_id="33", indexes=[0, 1],
                              ended={"0": "COMPLETED", "1": "FAILED"})
    JobAttempt.objects.create(job=job, number=2, slurm_job_id=slurm_id, indexes=[1])
    return job


def test_a_retry_of_one_chunk_never_turns_a_task_of_an_earlier_attempt_back(fake, owner, template):
    job = retried(owner, template)
    fake(CannedSlurm(sacct=(SAMPLES / "sacct_single_task_array_running.json").read_text(),
                     squeue=squeue_json(6, 1, "RUNNING")))
    watcher.poll_profile(template.cluster)  # a new watcher: the every-job accounting runs at once
    task0, task1 = job.tasks.order_by("index")
    assert (task0.state, task0.attempt, task0.node) == ("COMPLETED", 1, "vm")
    assert (task1.state, task1.attempt) == ("RUNNING", 2)  # squeue's word for the task that runs


def test_the_retried_job_ends_once_its_one_task_ends(fake, owner, template):
    job = retried(owner, template)
    fake(CannedSlurm(sacct=(SAMPLES / "sacct_single_task_array_ended.json").read_text(),
                     progress=record(job, 1, [done(1)])))
    settle(template.cluster)
    job.refresh_from_db()
    assert job.status == JobStatus.COMPLETED, (job.error, list(job.tasks.values_list("index", "state", "attempt")))
    assert list(job.tasks.values_list("state", "attempt")) == [("COMPLETED", 1), ("COMPLETED", 2)]


def stuck(owner, template, **fields):
    """The state the old watcher left: task 0 back to PENDING (attempt 1, its node and time kept),
    task 1 COMPLETED in attempt 2, no change since long before the time limit (10 minutes)."""
    job = retried(owner, template)
    job.tasks.filter(index=0).update(state="PENDING", reason="waiting to be scheduled")
    job.tasks.filter(index=1).update(state="COMPLETED", node="vm")
    Target.objects.filter(job=job, index=1).update(status=TargetStatus.DONE, output_file="/media/1.jpg")
    type(job).objects.filter(pk=job.pk).update(changed_at=timezone.now() - timedelta(hours=1), **fields)
    return job


def both_attempts() -> str:
    """sacct's JSON of attempt 1 (Slurm 33, every index ended) and attempt 2 (Slurm 6, index 1)."""
    first = json.loads((SAMPLES / "sacct_array_mixed.json").read_text())
    second = json.loads((SAMPLES / "sacct_single_task_array_ended.json").read_text())
    first["jobs"] += second["jobs"]
    return json.dumps(first)


def test_a_job_stuck_longer_than_its_time_limit_is_reconciled_with_every_attempt_and_ends(fake, owner, template):
    job = stuck(owner, template)
    slurm = CannedSlurm(sacct=both_attempts())
    fake(slurm)
    settle(template.cluster)
    job.refresh_from_db()
    assert "33" in slurm.accounted[0].split(",")  # the earlier attempt's Slurm job was asked about
    assert job.status == JobStatus.COMPLETED, (job.error, list(job.tasks.values_list("index", "state", "attempt")))
    assert list(job.tasks.values_list("state", "attempt")) == [("COMPLETED", 1), ("COMPLETED", 2)]


def test_a_job_that_changed_recently_is_not_reconciled(fake, owner, template):
    job = stuck(owner, template)
    type(job).objects.filter(pk=job.pk).update(changed_at=timezone.now())
    slurm = CannedSlurm(sacct=both_attempts())
    fake(slurm)
    watcher.poll_profile(template.cluster)
    job.refresh_from_db()
    assert "33" not in slurm.accounted[0].split(",")
    assert job.tasks.get(index=0).state == "PENDING" and job.status == JobStatus.RUNNING


def test_cancel_of_a_stuck_job_ends_it_even_when_slurm_forgot_the_earlier_attempt(fake, owner, template):
    # sacct no longer has attempt 1 (purged): the end the portal recorded when attempt 2 started
    # answers for task 0; the job ends cancelled, its photos kept.
    job = stuck(owner, template, cancel_requested=True)
    fake(CannedSlurm(sacct=(SAMPLES / "sacct_single_task_array_ended.json").read_text()))
    settle(template.cluster)
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED, (job.error, list(job.tasks.values_list("index", "state")))
    assert "2 of 2 photos and videos were finished and are kept" in job.error
    assert job.tasks.get(index=0).state == "COMPLETED"


# ---- the rules, pure ----------------------------------------------------------------------------

def row(tasks, **fields) -> JobRow:
    return JobRow(id="j", status="running", slurm_job_id="6", submitted_at=NOW - timedelta(hours=2), attempt=2,
                  tasks=tuple(tasks), **fields)


ATTEMPTS = [AttemptRow(1, "33", (0, 1), {"0": "COMPLETED", "1": "FAILED"}), AttemptRow(2, "6", (1,))]


@pytest.mark.parametrize("age, cancel, expected", [
    (timedelta(minutes=10) + STALE_MARGIN - timedelta(seconds=1), False, False),
    (timedelta(minutes=10) + STALE_MARGIN + timedelta(seconds=1), False, True),
    (CANCEL_SETTLE - timedelta(seconds=1), True, False),
    (CANCEL_SETTLE + timedelta(seconds=1), True, True),
])
def test_a_job_is_stale_after_its_time_limit_or_soon_after_a_cancel_slurm_did_not_confirm(age, cancel, expected):
    job = row([], changed_at=NOW - age, cancel_requested=cancel, time_limit_seconds=600)
    assert stale(job, NOW) is expected


def test_a_task_slurm_still_holds_is_never_reconciled():
    task = TaskRow(1, "RUNNING", attempt=2)
    queued = {1: SlurmTask("6", 1, "RUNNING")}
    assert reconcile(row([task], cancel_requested=True), ATTEMPTS, {}, queued, NOW) == []


def test_a_row_that_disagrees_takes_the_end_of_the_latest_attempt_that_ran_its_index():
    tasks = [TaskRow(0, "PENDING", node="vm", attempt=1), TaskRow(1, "RUNNING", attempt=2)]
    accounted = {"33": {0: SlurmTask("33", 0, "COMPLETED", node="vm", exit_code=0, elapsed_seconds=3),
                        1: SlurmTask("33", 1, "FAILED", exit_code=1)},
                 "6": {1: SlurmTask("6", 1, "TIMEOUT", node="vm", elapsed_seconds=600)}}
    changes = {c.index: c.fields for c in reconcile(row(tasks), ATTEMPTS, accounted, {}, NOW)}
    assert changes[0]["state"] == "COMPLETED" and "attempt" not in changes[0]
    assert changes[1]["state"] == "TIMEOUT" and "time limit" in changes[1]["reason"]


def test_an_end_already_recorded_from_a_log_is_kept():
    task = TaskRow(1, "OUT_OF_MEMORY", reason="ran out of memory", attempt=2)
    accounted = {"6": {1: SlurmTask("6", 1, "FAILED", signal=9)}}
    assert reconcile(row([task]), ATTEMPTS, accounted, {}, NOW) == []


def test_nothing_is_invented_for_a_task_nobody_knows_unless_it_was_cancelled():
    task = TaskRow(1, "PENDING", attempt=2)
    assert reconcile(row([task]), ATTEMPTS, {}, {}, NOW) == []
    cancelled = reconcile(row([task], cancel_requested=True), ATTEMPTS, {}, {}, NOW)
    assert cancelled == [TaskChange(1, {"state": "CANCELLED", "reason": "cancelled"})]
