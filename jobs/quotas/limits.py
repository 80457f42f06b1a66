"""Which quota limits bind a user, and how much of the pooled ones (GPU-hours, jobs at once) is used.

See the package docstring (jobs.quotas) for the rules.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import date, datetime

from django.contrib.auth import get_user_model
from django.db.models import Q
from django.utils.translation import gettext as _

from jobs.models import Job, JobStatus, Quota, TemplateSnapshot
from jobs.quotas.estimate import chunk_size_of, estimate_gpu_hours
from jobs.usage.accounting import gpu_hours_this_month, month_of

#: a job in these states holds a slot of "jobs at once" and counts at its estimate until charged
ACTIVE_JOB_STATUSES = (JobStatus.QUEUED, JobStatus.SUBMITTING, JobStatus.PENDING, JobStatus.RUNNING)
LIMIT_FIELDS = ("gpu_hours_per_month", "max_concurrent_jobs", "max_targets_per_job", "max_upload_mb")


# --- which limits apply ----------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Limit:
    """One limit as it applies to a user: its value (None: no limit) and where it comes from."""

    value: float | int | None = None
    quota: Quota | None = None

    @property
    def source(self) -> str:
        """"your own quota" / "group vfx"; "" when no quota sets this limit."""
        return source_of(self.quota) if self.quota is not None else ""

    @property
    def is_set(self) -> bool:
        return self.value is not None


@dataclasses.dataclass(frozen=True)
class Limits:
    """The effective limits of one user: for each, the smallest value among the quotas that apply."""

    gpu_hours_per_month: Limit
    max_concurrent_jobs: Limit
    max_targets_per_job: Limit
    max_upload_mb: Limit

    @property
    def any(self) -> bool:
        return any(getattr(self, f).is_set for f in LIMIT_FIELDS)


def source_of(quota: Quota) -> str:
    if quota.user_id:
        return _("your own quota")
    return _("group %(name)s") % {"name": quota.group.name}


def applicable_quotas(user) -> list[Quota]:
    """The user's own quota (first) and the quotas of their groups (by group name)."""
    if user is None or not user.is_authenticated:
        return []
    found = (Quota.objects.filter(Q(user=user) | Q(group__in=user.groups.all()))
             .select_related("user", "group"))
    return sorted(found, key=lambda q: (q.user_id is None, q.group.name if q.group_id else ""))


def effective_limits(user, quotas: Sequence[Quota] | None = None) -> Limits:
    """For each limit, the smallest value set by any quota that applies, and which quota set it
    (on a tie, the user's own quota, then groups by name)."""
    quotas = applicable_quotas(user) if quotas is None else quotas
    found = {}
    for field in LIMIT_FIELDS:
        best = Limit()
        for q in quotas:
            value = getattr(q, field)
            if value is not None and (best.value is None or value < best.value):
                best = Limit(float(value) if field == "gpu_hours_per_month" else int(value), q)
        found[field] = best
    return Limits(**found)


# --- usage -----------------------------------------------------------------------------------

def members_of(quota: Quota):
    """The users whose usage counts against `quota`: its user, or every member of its group."""
    if quota.user_id:
        return get_user_model().objects.filter(pk=quota.user_id)
    return get_user_model().objects.filter(groups=quota.group_id)


def _active_jobs(users):
    return Job.objects.filter(owner__in=users.values("pk"), status__in=ACTIVE_JOB_STATUSES)


def gpu_hours_used(users, now: datetime | None = None) -> float:
    """GPU-hours of `users` (a User queryset) this calendar month: charged + estimate of active jobs.

    An active job's estimate is made from its template snapshot and its target count; a folder job
    whose folder is not listed yet counts as one task. A job already charged is not counted twice.
    """
    charged = gpu_hours_this_month(users, now)
    pending = 0.0
    rows = _active_jobs(users).filter(usage__isnull=True).values_list("template_snapshot", "total")
    for data, total in rows:
        snapshot = TemplateSnapshot.from_json(data)
        pending += estimate_gpu_hours(snapshot, total or chunk_size_of(snapshot))
    return charged + pending


def active_jobs_count(users) -> int:
    """Jobs of `users` waiting or running (queued, submitting, pending, running)."""
    return _active_jobs(users).count()


@dataclasses.dataclass(frozen=True)
class Budget:
    """A pooled limit of one quota (GPU-hours this month, or jobs at once) and what is used of it."""

    quota: Quota
    limit: float
    used: float

    @property
    def left(self) -> float:
        return max(self.limit - self.used, 0.0)

    @property
    def source(self) -> str:
        return source_of(self.quota)

    @property
    def is_group(self) -> bool:
        return self.quota.group_id is not None

    @property
    def used_pct(self) -> int:
        return min(100, round(100 * self.used / self.limit)) if self.limit else 100


def gpu_budgets(user, now: datetime | None = None, quotas: Sequence[Quota] | None = None) -> list[Budget]:
    """Every GPU-hour limit that binds `user`, each with its own usage, tightest (least left) first."""
    quotas = applicable_quotas(user) if quotas is None else quotas
    budgets = [Budget(q, float(q.gpu_hours_per_month), gpu_hours_used(members_of(q), now))
               for q in quotas if q.gpu_hours_per_month is not None]
    return sorted(budgets, key=lambda b: (b.left, b.limit))


def job_budgets(user, quotas: Sequence[Quota] | None = None) -> list[Budget]:
    """Every jobs-at-once limit that binds `user`, each with its own count, tightest first."""
    quotas = applicable_quotas(user) if quotas is None else quotas
    budgets = [Budget(q, q.max_concurrent_jobs, active_jobs_count(members_of(q)))
               for q in quotas if q.max_concurrent_jobs is not None]
    return sorted(budgets, key=lambda b: (b.left, b.limit))


def resets_on(now: datetime | None = None) -> date:
    """The first day of next month: when the GPU-hours of this month stop counting."""
    this = month_of(now)
    return date(this.year + this.month // 12, this.month % 12 + 1, 1)


# --- what the New job page shows -------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class QuotaStatus:
    limits: Limits
    gpu: Budget | None  # the tightest GPU-hour budget
    jobs: Budget | None  # the tightest jobs-at-once budget
    resets_on: date

    @property
    def any(self) -> bool:
        return self.limits.any

    @property
    def blocked(self) -> bool:
        """Nothing more can start now (no GPU-hour left, or every job slot taken)."""
        return bool((self.gpu and self.gpu.left <= 0) or (self.jobs and self.jobs.left <= 0))


def quota_status(user, now: datetime | None = None) -> QuotaStatus:
    """What binds `user` now, for display (no lock taken: the Start checks again)."""
    quotas = applicable_quotas(user)
    gpu = gpu_budgets(user, now, quotas)
    jobs = job_budgets(user, quotas)
    return QuotaStatus(effective_limits(user, quotas), gpu[0] if gpu else None, jobs[0] if jobs else None,
                       resets_on(now))
