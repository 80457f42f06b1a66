"""Usage accounting: what a finished job cost, and sums of it per user, group and month.

A job is charged ONCE, when it ends (`jobs.watcher.poll.finish_job`), from what Slurm's accounting
said about each of its tasks (array indexes), as the watcher stored it on the Task rows:

    GPU-seconds = sum over tasks of  elapsed_seconds x gpus
    CPU-seconds = sum over tasks of  elapsed_seconds x cpus_per_task (the job's template snapshot)

`Task.gpus` is the count of GPUs Slurm ALLOCATED to that task (`gres/gpu` in sacct's
`tres.allocated`), not the count requested: a task cancelled before it started asked for a GPU
but got none, and costs nothing. `Task.elapsed_seconds` is per array task (sacct has one record
per index), so an array of 40 tasks on one GPU each costs the sum of 40 elapsed times.

A job's usage counts in the calendar month it ENDED in, in the portal's time zone
(settings.TIME_ZONE): `UsageRecord.period` is that month's first day. Quotas count per month.
"""
from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from datetime import date, datetime
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db.models import Count, F, QuerySet, Sum
from django.utils import timezone

from jobs.models import Job, Task, UsageRecord

log = logging.getLogger(__name__)

__all__ = ["MonthUsage", "charge_job", "gpu_hours_this_month", "last_months", "month_of", "usage_by", "usage_rows"]


def month_of(moment: datetime | None = None) -> date:
    """The first day of the month `moment` (default: now) falls in, in settings.TIME_ZONE."""
    moment = moment or timezone.now()
    return moment.astimezone(ZoneInfo(settings.TIME_ZONE)).date().replace(day=1)


def last_months(count: int, now: datetime | None = None) -> list[date]:
    """The first days of the last `count` months, oldest first, this month last."""
    this = month_of(now)
    index = this.year * 12 + this.month - 1
    return [date(i // 12, i % 12 + 1, 1) for i in range(index - count + 1, index + 1)]


def charge_job(job: Job) -> UsageRecord:
    """The job's UsageRecord, created on the first call from its tasks; later calls return it as is.

    Call it once the job's final state is decided (its tasks' elapsed times are final then).
    """
    existing = UsageRecord.objects.filter(job=job).first()
    if existing is not None:
        return existing
    sums = Task.objects.filter(job=job, elapsed_seconds__isnull=False).aggregate(
        gpu=Sum(F("elapsed_seconds") * F("gpus")), elapsed=Sum("elapsed_seconds"))
    cpus = job.snapshot.cpus_per_task
    gpu_seconds = float(sums["gpu"] or 0)
    cpu_seconds = float((sums["elapsed"] or 0) * cpus)
    # get_or_create: two watchers seeing the same end race on the unique job column; one row wins.
    record, created = UsageRecord.objects.get_or_create(
        job=job, defaults={"user_id": job.owner_id, "period": month_of(job.finished_at),
                           "gpu_seconds": gpu_seconds, "cpu_seconds": cpu_seconds})
    if created:
        log.info("job %s charged: %.0f GPU-seconds, %.0f CPU-seconds to %s for %s", job.id, gpu_seconds,
                 cpu_seconds, job.owner_id, record.period.strftime("%Y-%m"))
    return record


@dataclasses.dataclass(frozen=True)
class MonthUsage:
    period: date  # first day of the month
    gpu_seconds: float = 0.0
    cpu_seconds: float = 0.0
    jobs: int = 0

    @property
    def gpu_hours(self) -> float:
        return self.gpu_seconds / 3600.0

    @property
    def cpu_hours(self) -> float:
        return self.cpu_seconds / 3600.0


def _records(user=None, group=None):
    qs = UsageRecord.objects.all()
    if user is not None:
        qs = qs.filter(user=user)
    if group is not None:
        qs = qs.filter(user__groups=group)
    return qs


def usage_by(user=None, group=None, months: int = 12, now: datetime | None = None) -> list[MonthUsage]:
    """One MonthUsage per month of the last `months` (oldest first; months without jobs are zero).

    user: only that user's jobs; group: jobs of the group's current members; neither: everyone's.
    """
    periods = last_months(months, now)
    rows = (_records(user, group).filter(period__gte=periods[0], period__lte=periods[-1]).values("period")
            .annotate(gpu=Sum("gpu_seconds"), cpu=Sum("cpu_seconds"), n=Count("id")))
    found = {r["period"]: MonthUsage(r["period"], r["gpu"] or 0.0, r["cpu"] or 0.0, r["n"]) for r in rows}
    return [found.get(p, MonthUsage(p)) for p in periods]


def usage_rows(months: int = 12, now: datetime | None = None, group=None) -> list[dict]:
    """Per user and month, for the admin report: [{"period", "user_id", "gpu_seconds", "cpu_seconds", "jobs"}]."""
    periods = last_months(months, now)
    return list(_records(group=group).filter(period__gte=periods[0], period__lte=periods[-1])
                .values("period", "user_id").annotate(gpu_seconds=Sum("gpu_seconds"), cpu_seconds=Sum("cpu_seconds"),
                                                      jobs=Count("id")).order_by("period", "user_id"))


def gpu_hours_this_month(users: Iterable, now: datetime | None = None) -> float:
    """GPU-hours charged this month to any of `users` (users or their ids; a QuerySet works too).

    For a user's quota pass [user]; for a group's, the group's members (`group.user_set.all()`).
    Only ENDED jobs are charged: a running job's GPU time counts once it ends.
    """
    ids = users.values("pk") if isinstance(users, QuerySet) else [getattr(u, "pk", u) for u in users]
    total = UsageRecord.objects.filter(user__in=ids, period=month_of(now)).aggregate(s=Sum("gpu_seconds"))["s"]
    return (total or 0.0) / 3600.0
