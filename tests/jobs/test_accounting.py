"""Usage accounting from REAL captured Slurm 22.05 `sacct --json` output of GPU array jobs.

The expected GPU-seconds are computed here straight from the raw JSON (one record per array
task: `time.elapsed` x the `gres/gpu` count in `tres.allocated`), independently of the parser,
and compared with what the watcher path (CannedSlurm -> parse_sacct -> Task rows -> finish_job ->
charge_job) stored.
"""
import json
from datetime import date, datetime, timedelta
from datetime import timezone as dt_timezone

import pytest
from django.utils import timezone

from cluster import slurm
from jobs.models import Job, JobStatus, Task, UsageRecord
from jobs.usage.accounting import charge_job, gpu_hours_this_month, last_months, month_of, usage_by
from jobs.watcher import apply as watcher

from .test_watcher import SAMPLES, CannedSlurm, done, fake, make_job, record, settle  # noqa: F401 - fixture


def allocated(record: dict, kind: str) -> int:
    for t in record["tres"]["allocated"]:
        if t["type"] == kind or (t["type"] == "gres" and t["name"] == kind):
            return t["count"] or 0
    return 0


def raw_usage(sample: str) -> tuple[int, int]:
    """(GPU-seconds, elapsed seconds) summed over the array's tasks, read from the JSON by hand."""
    gpu = elapsed = 0
    for rec in json.loads((SAMPLES / sample).read_text())["jobs"]:
        if rec["time"]["start"]:  # a task that never started has nothing allocated
            gpu += rec["time"]["elapsed"] * allocated(rec, "gpu")
            elapsed += rec["time"]["elapsed"]
    return gpu, elapsed


def test_the_samples_hold_what_the_tests_rely_on():
    gpu, elapsed = raw_usage("sacct_array_mixed.json")
    assert (gpu, elapsed) == (4, 4)  # 4 tasks x 1 s x 1 GPU
    assert raw_usage("sacct_cancelled.json") == (4, 4)  # 2 of 4 tasks ran 2 s each on 1 GPU


def test_gpus_are_the_allocated_count_not_the_requested_one():
    data = json.loads((SAMPLES / "sacct_cancelled.json").read_text())
    never_ran = next(r for r in data["jobs"] if r["array"]["task"])  # the collapsed pending record "0xC"
    requested = {t["name"]: t["count"] for t in never_ran["tres"]["requested"] if t["type"] == "gres"}
    assert requested == {"gpu": 1} and never_ran["tres"]["allocated"] == []
    tasks = {t.task_index: t for t in slurm.parse_sacct((SAMPLES / "sacct_cancelled.json").read_text())}
    assert (tasks[2].gpus, tasks[2].elapsed_seconds) == (0, None)  # asked for a GPU, got none: costs nothing
    assert (tasks[0].gpus, tasks[0].elapsed_seconds) == (1, 2)  # per array task, not the array's total


def test_it_charges_a_finished_array_job_through_the_watcher(fake, owner, template):
    template.cpus_per_task = 4
    template.save()
    job = make_job(owner, template, "33", tasks=4)
    progress = "".join(record(job, n, [done(n)]) for n in range(4))
    fake(CannedSlurm(sacct=(SAMPLES / "sacct_array_mixed.json").read_text(),
                     codes=(SAMPLES / "sacct_array_mixed.txt").read_text(), progress=progress))
    settle(template.cluster)
    job.refresh_from_db()
    assert job.is_final
    usage = UsageRecord.objects.get(job=job)
    gpu, elapsed = raw_usage("sacct_array_mixed.json")
    assert usage.gpu_seconds == gpu == 4
    assert usage.cpu_seconds == elapsed * 4  # the template snapshot's CPUs per task
    assert usage.user == owner and usage.period == month_of(job.finished_at)


def test_a_cancelled_job_is_charged_for_the_tasks_that_ran(fake, owner, template):
    job = make_job(owner, template, "29", tasks=4, cancel_requested=True)
    fake(CannedSlurm(sacct=(SAMPLES / "sacct_cancelled.json").read_text()))
    settle(template.cluster)
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED
    assert UsageRecord.objects.get(job=job).gpu_seconds == raw_usage("sacct_cancelled.json")[0] == 4


def test_a_cpu_only_job_costs_no_gpu_time(fake, owner, template):
    job = make_job(owner, template, "32", tasks=1)
    fake(CannedSlurm(sacct=(SAMPLES / "sacct_timeout.json").read_text()))
    settle(template.cluster)
    usage = UsageRecord.objects.get(job=job)
    assert (usage.gpu_seconds, usage.cpu_seconds) == (0, 81)  # TIMEOUT after 81 s, 1 CPU, no gres


def test_it_multiplies_elapsed_by_gpus_per_task(owner, template):
    job = make_job(owner, template, "50", tasks=0, finished_at=timezone.now())
    for i, (elapsed, gpus) in enumerate([(1800, 2), (3600, 2), (900, 0), (None, 2)]):
        Task.objects.create(job=job, index=i, state="COMPLETED", elapsed_seconds=elapsed, gpus=gpus)
    usage = charge_job(job)
    assert usage.gpu_seconds == 1800 * 2 + 3600 * 2 == 10800 and usage.gpu_hours == 3.0
    assert usage.cpu_seconds == 1800 + 3600 + 900


def test_a_job_seen_ending_twice_is_charged_once(fake, owner, template):
    job = make_job(owner, template, "33", tasks=4)
    fake(CannedSlurm(sacct=(SAMPLES / "sacct_array_mixed.json").read_text(),
                     codes=(SAMPLES / "sacct_array_mixed.txt").read_text()))
    settle(template.cluster)
    first = UsageRecord.objects.get(job=job)
    # The same end seen again (a second watcher, a replayed cycle): the move is conditional...
    assert watcher.finish_job(job, list(job.tasks.all())) is False
    # ...and charging is idempotent even when called directly, whatever the tasks say now.
    Task.objects.filter(job=job).update(elapsed_seconds=9999)
    again = charge_job(job)
    assert again.pk == first.pk and again.gpu_seconds == 4
    assert UsageRecord.objects.filter(job=job).count() == 1


def test_an_accounting_error_never_blocks_the_end_of_a_job(fake, owner, template, monkeypatch, caplog):
    def broken(job):
        raise RuntimeError("disk full")

    monkeypatch.setattr(watcher, "charge_job", broken)
    job = make_job(owner, template, "32", tasks=1)
    fake(CannedSlurm(sacct=(SAMPLES / "sacct_timeout.json").read_text()))
    settle(template.cluster)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and not UsageRecord.objects.filter(job=job).exists()
    assert "usage not charged" in caplog.text


def finished(owner, template, when: datetime, gpu_seconds: float, slurm_id="60") -> UsageRecord:
    job = make_job(owner, template, slurm_id, tasks=0, finished_at=when)
    Job.objects.filter(pk=job.pk).update(status=JobStatus.COMPLETED)
    Task.objects.create(job=job, index=0, state="COMPLETED", elapsed_seconds=int(gpu_seconds), gpus=1)
    return charge_job(job)


def test_the_month_is_the_one_the_job_ended_in_in_the_portal_time_zone(settings, owner, template):
    late_on_jan_31_utc = datetime(2026, 1, 31, 17, 30, tzinfo=dt_timezone.utc)
    settings.TIME_ZONE = "UTC"
    assert finished(owner, template, late_on_jan_31_utc, 3600).period == date(2026, 1, 1)
    settings.TIME_ZONE = "Asia/Shanghai"  # 01:30 on 1 February there
    assert finished(owner, template, late_on_jan_31_utc, 3600, slurm_id="61").period == date(2026, 2, 1)


def test_gpu_hours_this_month_counts_only_this_month(settings, owner, colleague, stranger, team, template):
    settings.TIME_ZONE = "Europe/Berlin"
    feb = datetime(2026, 2, 10, 12, tzinfo=dt_timezone.utc)
    finished(owner, template, datetime(2026, 1, 31, 22, 59, tzinfo=dt_timezone.utc), 3600)  # 23:59 in Berlin
    finished(owner, template, datetime(2026, 1, 31, 23, 1, tzinfo=dt_timezone.utc), 1800)  # 00:01 on 1 Feb
    finished(colleague, template, feb, 7200)
    finished(stranger, template, feb, 36000)
    assert gpu_hours_this_month([owner], now=feb) == 0.5
    assert gpu_hours_this_month([owner.pk, colleague.pk], now=feb) == 2.5
    assert gpu_hours_this_month(team.user_set.all(), now=feb) == 2.5  # a group's members, as a QuerySet
    assert gpu_hours_this_month([owner], now=feb - timedelta(days=15)) == 1.0  # January


def test_usage_by_gives_every_month_oldest_first(owner, colleague, stranger, team, template):
    now = datetime(2026, 3, 15, tzinfo=dt_timezone.utc)
    finished(owner, template, datetime(2026, 3, 1, 9, tzinfo=dt_timezone.utc), 3600)
    finished(owner, template, datetime(2026, 1, 20, tzinfo=dt_timezone.utc), 7200)
    finished(colleague, template, datetime(2026, 3, 2, tzinfo=dt_timezone.utc), 1800)
    finished(stranger, template, datetime(2025, 12, 2, tzinfo=dt_timezone.utc), 900)
    finished(owner, template, datetime(2025, 1, 2, tzinfo=dt_timezone.utc), 900)  # 14 months back: outside
    months = usage_by(user=owner, months=12, now=now)
    assert [m.period for m in months] == last_months(12, now)
    assert months[0].period == date(2025, 4, 1) and months[-1].period == date(2026, 3, 1)
    assert {m.period: m.gpu_hours for m in months if m.jobs} == {date(2026, 1, 1): 2.0, date(2026, 3, 1): 1.0}
    group = {m.period: m.gpu_hours for m in usage_by(group=team, months=3, now=now) if m.jobs}
    assert group == {date(2026, 1, 1): 2.0, date(2026, 3, 1): 1.5}
    everyone = usage_by(months=4, now=now)
    assert [round(m.gpu_hours, 2) for m in everyone] == [0.25, 2.0, 0.0, 1.5]


def test_last_months_crosses_the_year():
    assert last_months(3, datetime(2026, 2, 1, 12, tzinfo=dt_timezone.utc)) == [
        date(2025, 12, 1), date(2026, 1, 1), date(2026, 2, 1)]


@pytest.fixture(autouse=True)
def _utc(settings):
    settings.TIME_ZONE = "UTC"
