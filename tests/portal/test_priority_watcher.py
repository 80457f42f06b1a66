"""What a user sees of priorities: a task Slurm requeued for urgent work is "paused", never failed,
and the target its worker was stopped on waits again; a waiting job shows Slurm's own start
estimate and a finish at the template's pace, on its page and in the API.

The queue is REAL captured Slurm 22.05 output (tests/cluster/samples/squeue_tasks_preempted.txt:
array 4791's task 0 preempted by an urgent job, PreemptMode=REQUEUE)."""
from datetime import datetime, timedelta, timezone
from pathlib import Path

from django.urls import reverse
from django.utils import timezone as dj_timezone

from cluster.slurm import parse_squeue_tasks
from jobs.models import Job, JobStatus
from jobs.watcher.decide import ExpectedStart, JobRow, SlurmAnswer, TargetChange, TargetRow, TaskRow, decide
from worker.progress import TargetRecord, TaskProgress

from .api_helpers import make_job, token_client

SAMPLES = Path(__file__).resolve().parents[1] / "cluster" / "samples"
QUEUE = parse_squeue_tasks((SAMPLES / "squeue_tasks_preempted.txt").read_text())
NOW = datetime(2026, 12, 1, 4, 30, 12, tzinfo=timezone.utc)
PAUSED = "paused to make room for urgent work; continues automatically"


def queued(job_id: str) -> dict:
    return {t.task_index: t for t in QUEUE if t.job_id == job_id}


def row(status="running", tasks=("RUNNING", "RUNNING"), targets=(), expected_start=None) -> JobRow:
    return JobRow(id="j", status=status, slurm_job_id="4791", submitted_at=NOW - timedelta(minutes=1),
                  tasks=tuple(TaskRow(index=i, state=s) for i, s in enumerate(tasks)), targets=tuple(targets),
                  expected_start=expected_start)


def test_a_preempted_task_is_paused_not_failed():
    decision = decide(row(), SlurmAnswer(queued=queued("4791"), asked_accounting=False), [], {}, NOW)
    changes = {c.index: c.fields for c in decision.changes if hasattr(c, "fields") and hasattr(c, "index")}
    assert changes[0]["state"] == "PENDING" and changes[0]["reason"] == PAUSED
    assert 1 not in changes or "state" not in changes[1]  # the other task runs on
    assert not any(type(c).__name__ in ("EndAttempt", "JobMove") for c in decision.changes)


def test_the_target_the_worker_was_stopped_on_waits_again_and_finished_ones_stay_done():
    # Task 0 had photos 0 and 1: 0 was done, the worker was stopped (SIGTERM) on 1.
    record = TaskProgress(job="j", task_index=0, targets=[
        TargetRecord(index=0, target="/in/0.jpg", output="0.jpg", status="done", seconds=1.0),
        TargetRecord(index=1, target="/in/1.jpg", output="1.jpg", status="failed", stopped_by_task_end=True,
                     message="stopped: the task hit its time limit or was cancelled", code="stopped_with_task")])
    targets = [TargetRow(index=0, task_index=0, status="running"), TargetRow(index=1, task_index=0, status="running")]
    decision = decide(row(targets=targets), SlurmAnswer(queued=queued("4791"), asked_accounting=False),
                      [record], {}, NOW)
    fields = {c.index: c.fields for c in decision.of(TargetChange)}
    assert fields[0]["status"] == "done"
    assert fields[1]["status"] == "waiting" and fields[1]["message"] == PAUSED and not fields[1].get("failed_with_task")


def test_a_task_stopped_for_another_reason_still_fails():
    record = TaskProgress(job="j", task_index=1, targets=[
        TargetRecord(index=2, target="/in/2.jpg", output="2.jpg", status="failed", stopped_by_task_end=True)])
    decision = decide(row(targets=[TargetRow(index=2, task_index=1, status="running")]),
                      SlurmAnswer(queued=queued("4791"), asked_accounting=False), [record], {}, NOW)
    assert decision.of(TargetChange)[0].fields["status"] == "failed"  # task 1 was not requeued


def test_a_waiting_job_carries_slurms_start_estimate_until_a_task_runs():
    waiting = row(status="pending", tasks=("PENDING", "PENDING"))
    decision = decide(waiting, SlurmAnswer(queued=queued("4795"), asked_accounting=False), [], {}, NOW)
    assert decision.of(ExpectedStart) == [ExpectedStart(datetime(2026, 12, 1, 4, 46, tzinfo=timezone.utc))]
    # Known already: nothing to write.
    same = row(status="pending", tasks=("PENDING", "PENDING"), expected_start=datetime(2026, 12, 1, 4, 46, tzinfo=timezone.utc))
    assert decide(same, SlurmAnswer(queued=queued("4795"), asked_accounting=False), [], {}, NOW).of(ExpectedStart) == []
    # A task runs: the estimate is cleared.
    running = row(expected_start=datetime(2026, 12, 1, 4, 46, tzinfo=timezone.utc))
    assert decide(running, SlurmAnswer(queued=queued("4791"), asked_accounting=False), [], {}, NOW).of(
        ExpectedStart) == [ExpectedStart(None)]


def test_the_api_and_the_page_say_when_a_waiting_job_should_start_and_finish(owner, template, client):
    # 10 photos of 2 per task at 3 s each (the template's figure: nothing measured yet): 5 tasks of
    # 6 s + 30 s model load, side by side: about 36 s after Slurm's estimated start.
    job = make_job(owner, template, status=JobStatus.PENDING, targets=10, tasks=5)
    start = dj_timezone.now().replace(microsecond=0) + timedelta(hours=1)
    Job.objects.filter(pk=job.pk).update(expected_start=start)
    api, _token = token_client(owner)
    body = api.get(f"/api/v1/jobs/{job.id}").json()
    assert datetime.fromisoformat(body["expected_start"]) == start
    assert datetime.fromisoformat(body["expected_finish"]) == start + timedelta(seconds=36)
    client.force_login(owner)
    page = client.get(reverse("job-detail", args=[job.id])).content.decode()
    local = dj_timezone.localtime(start).strftime("%H:%M")
    assert f"Expected to start around {local}; finish around" in page


def test_a_job_without_an_estimate_says_nothing_about_it(owner, template):
    job = make_job(owner, template, status=JobStatus.PENDING, targets=4, tasks=2)
    api, _token = token_client(owner)
    body = api.get(f"/api/v1/jobs/{job.id}").json()
    assert body["expected_start"] is None and body["expected_finish"] is None


def test_a_task_reported_preempted_is_paused_while_slurm_requeues_it_and_ended_only_if_it_never_returns():
    # sacct shows the preempted run (state PREEMPTED) for a moment before the requeued one: seen in
    # a real run, where the job was otherwise ended before its task ran again.
    from dataclasses import replace

    from cluster import SlurmTask
    from jobs.watcher.decide import REQUEUE_WAIT, EndAttempt, TaskChange

    preempted = SlurmTask("4888", 0, "PREEMPTED", node="vm", exit_code=0, gpus=1)
    answer = SlurmAnswer(accounted={0: preempted}, queued={1: queued("4791")[1]})
    first = decide(row(), answer, [], {}, NOW)
    fields = {c.index: c.fields for c in first.of(TaskChange)}[0]
    assert fields["state"] == "PENDING" and fields["reason"] == PAUSED and fields["log_wait_since"] == NOW
    assert not first.of(EndAttempt)
    # Still PREEMPTED a moment later: still paused, the first sighting kept.
    paused = row(tasks=("PENDING", "RUNNING"))
    paused = replace(paused, tasks=(replace(paused.tasks[0], reason=PAUSED, log_wait_since=NOW), paused.tasks[1]))
    again = decide(paused, answer, [], {}, NOW + timedelta(seconds=30))
    assert not any({"state", "reason", "log_wait_since"} & set(c.fields) for c in again.of(TaskChange))
    assert not again.of(EndAttempt)
    # Requeued: PENDING again in the queue (restart 1): paused, and no longer waiting on anything.
    requeued = decide(paused, SlurmAnswer(queued=queued("4791"), asked_accounting=False), [], {},
                      NOW + timedelta(seconds=5))
    assert {c.index: c.fields for c in requeued.of(TaskChange)}[0] == {"log_wait_since": None}
    # Never requeued (a cluster that cancels preempted work): it has ended.
    late = decide(paused, answer, [], {}, NOW + REQUEUE_WAIT)
    assert {c.index: c.fields for c in late.of(TaskChange)}[0]["state"] == "PREEMPTED"
