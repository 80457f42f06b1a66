"""What a user sees of priorities: a task Slurm requeued for urgent work is "paused", never failed,
and the target its worker was stopped on waits again; a waiting job shows Slurm's own start
estimate and a finish at the template's pace, on its page and in the API.

The queue is REAL captured Slurm 22.05 output (tests/cluster/samples/22.05/squeue_tasks_preempted.txt:
array 4791's task 0 preempted by an urgent job, PreemptMode=REQUEUE)."""
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from django.urls import reverse
from django.utils import timezone as dj_timezone
from django.utils import translation

from cluster.slurm import parse_squeue_tasks
from jobs.models import Job, JobStatus
from jobs.moments import moment_words
from jobs.watcher.decide import ExpectedStart, JobRow, SlurmAnswer, TargetChange, TargetRow, TaskRow, decide
from worker.progress import TargetRecord, TaskProgress

from .api_helpers import make_job, token_client

SAMPLES = Path(__file__).resolve().parents[1] / "cluster" / "samples" / "22.05"
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


def test_a_target_failed_with_its_task_waits_again_when_slurm_shows_the_task_requeued_a_cycle_later():
    # The worker's record was read (and applied) the cycle before squeue showed the task requeued;
    # records are read only when they change, so this cycle has none: the row alone decides.
    targets = [TargetRow(index=0, task_index=0, status="done", has_output=True),
               TargetRow(index=1, task_index=0, status="failed", failed_with_task=True, message="stopped")]
    decision = decide(row(targets=targets), SlurmAnswer(queued=queued("4791"), asked_accounting=False), [], {}, NOW)
    fields = {c.index: c.fields for c in decision.of(TargetChange)}
    assert list(fields) == [1]
    assert fields[1]["status"] == "waiting" and fields[1]["message"] == PAUSED and fields[1]["failed_with_task"] is False


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


def at(zone: str, *moment: int) -> datetime:
    return datetime(*moment, tzinfo=ZoneInfo(zone))


@pytest.mark.parametrize("zone, now, english, chinese", [
    # midday: Slurm's start an hour later is today, said as the clock alone
    ("Europe/Berlin", at("Europe/Berlin", 2026, 12, 1, 11, 0),
     "Expected to start around 12:00; finish around 12:00.", "预计约 12:00 开始，约 12:00 完成。"),
    # 23:14: the start an hour later is past midnight, tomorrow (the CI failure between 23:00 and midnight)
    ("UTC", at("UTC", 2026, 12, 1, 23, 14),
     "Expected to start around tomorrow 00:14; finish around tomorrow 00:14.", "预计约 明天 00:14 开始，约 明天 00:14 完成。"),
    # a year's last minutes in Shanghai (15:50 UTC): tomorrow there, in the new year
    ("Asia/Shanghai", at("Asia/Shanghai", 2026, 12, 31, 23, 50),
     "Expected to start around tomorrow 00:50; finish around tomorrow 00:50.", "预计约 明天 00:50 开始，约 明天 00:50 完成。"),
])
def test_the_api_and_the_page_say_when_a_waiting_job_should_start_and_finish(
        owner, template, client, settings, monkeypatch, zone, now, english, chinese):
    settings.TIME_ZONE = zone
    monkeypatch.setattr(dj_timezone, "now", lambda: now)  # what every rule reads as now
    # 10 photos of 2 per task at 3 s each (the template's figure: nothing measured yet): 5 tasks of
    # 6 s + 30 s model load, side by side: about 36 s after Slurm's estimated start.
    job = make_job(owner, template, status=JobStatus.PENDING, targets=10, tasks=5)
    start = now + timedelta(hours=1)
    Job.objects.filter(pk=job.pk).update(expected_start=start)
    api, _token = token_client(owner)
    body = api.get(f"/api/v1/jobs/{job.id}").json()
    # The API says moments in ISO 8601, whatever the page says
    assert datetime.fromisoformat(body["expected_start"]) == start
    assert datetime.fromisoformat(body["expected_finish"]) == start + timedelta(seconds=36)
    client.force_login(owner)
    assert english in client.get(reverse("job-detail", args=[job.id])).content.decode()
    assert chinese in client.get(reverse("job-detail", args=[job.id]), HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()


@pytest.mark.parametrize("zone, now, when, english, chinese", [
    ("UTC", at("UTC", 2026, 12, 1, 4, 30), at("UTC", 2026, 12, 1, 14, 5), "14:05", "14:05"),
    # a month's end: the next minutes are tomorrow, the 1st
    ("UTC", at("UTC", 2026, 11, 30, 23, 30), at("UTC", 2026, 11, 30, 23, 59), "23:59", "23:59"),
    ("UTC", at("UTC", 2026, 11, 30, 23, 30), at("UTC", 2026, 12, 1, 0, 30), "tomorrow 00:30", "明天 00:30"),
    ("UTC", at("UTC", 2026, 11, 30, 23, 30), at("UTC", 2026, 12, 4, 9, 0), "Fri 4 Dec, 09:00", "12月4日 周五 09:00"),
    ("Europe/Berlin", at("Europe/Berlin", 2027, 2, 28, 23, 55), at("Europe/Berlin", 2027, 3, 1, 0, 10),
     "tomorrow 00:10", "明天 00:10"),
    ("Europe/Berlin", at("Europe/Berlin", 2027, 2, 28, 23, 55), at("Europe/Berlin", 2027, 3, 2, 8, 0),
     "Tue 2 Mar, 08:00", "3月2日 周二 08:00"),
    # a year's end, in the site's zone: the same moments are today in UTC, tomorrow in Shanghai
    ("UTC", at("Asia/Shanghai", 2026, 12, 31, 23, 50), at("Asia/Shanghai", 2027, 1, 1, 0, 50), "16:50", "16:50"),
    ("Asia/Shanghai", at("Asia/Shanghai", 2026, 12, 31, 23, 50), at("Asia/Shanghai", 2027, 1, 1, 0, 50),
     "tomorrow 00:50", "明天 00:50"),
    ("Asia/Shanghai", at("Asia/Shanghai", 2026, 12, 31, 23, 50), at("Asia/Shanghai", 2027, 1, 2, 9, 0),
     "Sat 2 Jan 2027, 09:00", "2027年1月2日 周六 09:00"),
    # Berlin's clocks jump from 02:00 to 03:00: an hour after 01:50 is 03:50, still today
    ("Europe/Berlin", at("Europe/Berlin", 2027, 3, 28, 1, 50), at("UTC", 2027, 3, 28, 1, 50), "03:50", "03:50"),
    # a start Slurm estimated for a moment now past still says its day
    ("UTC", at("UTC", 2026, 12, 1, 0, 5), at("UTC", 2026, 11, 30, 23, 55), "Mon 30 Nov, 23:55", "11月30日 周一 23:55"),
])
def test_a_moment_is_said_as_today_tomorrow_or_its_day_in_the_sites_zone(settings, zone, now, when, english, chinese):
    settings.TIME_ZONE = zone
    assert moment_words(when, now) == english
    with translation.override("zh-hans"):
        assert moment_words(when, now) == chinese


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
