"""Quotas: how much a user may use, checked at Start (issue 5).

A quota (`jobs.models.Quota`) belongs to ONE user or ONE group. Its limits are all optional
(empty = no limit):

    gpu_hours_per_month   GPU-hours per calendar month      pooled: a group's members together
    max_concurrent_jobs   jobs waiting or running at once   pooled: a group's members together
    max_targets_per_job   images and videos in one job      per job
    max_upload_mb         size of one uploaded file (MB)    per file

Which limits bind a user: their own quota AND the quota of every group they are in. For the
per-job and per-file limits the smallest value wins (`effective_limits`). For the pooled limits
every quota is checked on its own usage (the user's for their own quota, all members' for a
group's), and the one with the least left is the one shown and named. Staff are not exempt: a
quota on a staff user or on their group binds them; with no quota at all nobody is limited.

Usage this month (`gpu_budgets`) = GPU-hours CHARGED this calendar month (settings.TIME_ZONE;
`jobs.accounting` charges a job from sacct in the month it ends) + the ESTIMATE of every job
still active (queued, submitting, pending, running) and not charged yet. Counting active jobs at
their estimate is what keeps two big Starts from both slipping in before either is charged.

Estimate (`estimate_gpu_hours`), from the template (or a job's snapshot of it):

    tasks     = ceil(targets / chunk_size)
    per task  = min(time limit, images in the task x seconds_per_image + 30 s model load)
    GPU-hours = sum over tasks of per task x GPUs per task / 3600

Folder targets are counted on the cluster, by `jobs.submit` after Start: at Start a folder job is
estimated as ONE task (`chunk_size` images). Once listed, its real target count is checked
against the targets-per-job limit there (the job fails with a plain message), and its estimate
(which `gpu_budgets` recomputes from `Job.total`) grows to the real size, so it weighs on the
NEXT Start; the GPU-hour limit itself refuses only at Start, never a job already accepted.

Serialisation (`check_quota`): it runs inside the transaction that creates the job, before the
job row exists, and first locks what the quota counts: the user's row and the rows of their
groups that have a quota, `SELECT ... FOR UPDATE` in one order (user, then groups by id) so two
Starts never deadlock. On PostgreSQL a second Start of the same user (or of a member of the same
group) waits there until the first commits, then sees its job. On SQLite `select_for_update` is
a no-op but not needed: `transaction_mode = IMMEDIATE` takes the database's write lock at BEGIN,
so Starts are serialised from their first statement.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from datetime import date, datetime

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.db.models import Q
from django.utils import formats
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from cluster import time_limit_seconds

from .accounting import gpu_hours_this_month, month_of
from .models import Job, JobStatus, Quota, Template
from .start import StartError

__all__ = [
    "QuotaExceeded", "Limit", "Limits", "Budget", "QuotaStatus", "LIMIT_FIELDS", "ACTIVE_JOB_STATUSES",
    "applicable_quotas", "effective_limits", "members_of", "estimate_gpu_hours", "gpu_hours_used", "active_jobs_count",
    "gpu_budgets", "job_budgets", "quota_status", "check_quota", "check_folder_targets", "lock_quota_subjects",
    "resets_on", "format_hours",
]

#: a job in these states holds a slot of "jobs at once" and counts at its estimate until charged
ACTIVE_JOB_STATUSES = (JobStatus.QUEUED, JobStatus.SUBMITTING, JobStatus.PENDING, JobStatus.RUNNING)
#: seconds each task spends loading models before its first image (part of every estimate)
MODEL_LOAD_SECONDS = 30
#: a template snapshot taken before seconds_per_image existed
DEFAULT_SECONDS_PER_IMAGE = 3.0
LIMIT_FIELDS = ("gpu_hours_per_month", "max_concurrent_jobs", "max_targets_per_job", "max_upload_mb")
MB = 1024 * 1024


class QuotaExceeded(StartError):
    """A Start refused by a quota. `message` says which limit, how much is used and left, and when
    it resets; `field` names the form field to show it next to (None: the whole form)."""


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
    for snapshot, total in rows:
        pending += estimate_gpu_hours(snapshot, total or _chunk_size(snapshot))
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


# --- estimate --------------------------------------------------------------------------------

def _get(template_or_snapshot, key: str, default=None):
    if isinstance(template_or_snapshot, dict):
        value = template_or_snapshot.get(key, default)
    else:
        value = getattr(template_or_snapshot, key, default)
    return default if value is None else value


def _chunk_size(template_or_snapshot) -> int:
    return max(1, int(_get(template_or_snapshot, "chunk_size", 1)))


def estimate_gpu_hours(template_or_snapshot: Template | dict, n_targets: int) -> float:
    """GPU-hours a job of `n_targets` is expected to use (see the module docstring for the rule).

    Works on a Template or on a job's `template_snapshot`: the estimate of a job already started
    follows what it runs with, not later edits of its template.
    """
    n = max(0, int(n_targets))
    gpus = int(_get(template_or_snapshot, "gpu_count", 0))
    if not n or not gpus:
        return 0.0
    chunk = _chunk_size(template_or_snapshot)
    per_image = float(_get(template_or_snapshot, "seconds_per_image", DEFAULT_SECONDS_PER_IMAGE))
    try:
        cap = time_limit_seconds(_get(template_or_snapshot, "time_limit", "")) or math.inf
    except ValueError:
        cap = math.inf  # a broken limit fails at sbatch; the estimate just goes uncapped
    full, rest = divmod(n, chunk)
    seconds = full * min(cap, chunk * per_image + MODEL_LOAD_SECONDS)
    if rest:
        seconds += min(cap, rest * per_image + MODEL_LOAD_SECONDS)
    return seconds * gpus / 3600.0


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


# --- the check at Start ----------------------------------------------------------------------

def lock_quota_subjects(user) -> None:
    """Lock the rows a Start's quota check counts on (PostgreSQL: SELECT ... FOR UPDATE; SQLite:
    a no-op, the IMMEDIATE transaction already holds the write lock). Must run in a transaction."""
    if not connection.in_atomic_block:
        raise RuntimeError("lock_quota_subjects() must run inside transaction.atomic()")
    group_ids = list(user.groups.filter(quota__isnull=False).order_by("pk").values_list("pk", flat=True))
    list(get_user_model().objects.select_for_update().filter(pk=user.pk).values_list("pk", flat=True))
    if group_ids:
        list(Group.objects.select_for_update().filter(pk__in=group_ids).order_by("pk").values_list("pk", flat=True))


def check_quota(user, template: Template, n_targets: int | None,
                upload_sizes: Iterable[tuple] = (), now: datetime | None = None) -> None:
    """Raise QuotaExceeded when this Start would go past a quota of `user`.

    n_targets: targets of the job; None for a folder (counted later: see check_folder_targets).
    upload_sizes: (file name, size in bytes[, form field]) of every uploaded file.

    Call it INSIDE the transaction that then creates the job, BEFORE the job row: it locks the
    user's (and their groups') rows first, so a concurrent Start waits and then counts this job.
    """
    lock_quota_subjects(user)
    quotas = applicable_quotas(user)
    if not quotas:
        return
    limits = effective_limits(user, quotas)

    upload = limits.max_upload_mb
    if upload.is_set:
        for name, size, *field in upload_sizes:
            if size > upload.value * MB:
                raise QuotaExceeded(
                    _("%(name)s is %(size)s MB; your limit is %(limit)s MB per file (%(source)s). "
                      "Make it smaller or ask an admin.")
                    % {"name": name, "size": format_mb(size), "limit": _count(upload.value), "source": upload.source},
                    field[0] if field else "targets")

    targets = limits.max_targets_per_job
    if n_targets is not None and targets.is_set and n_targets > targets.value:
        raise QuotaExceeded(
            ngettext("This job has %(count)s image or video; your limit is %(limit)s per job (%(source)s). "
                     "Split them into several jobs or ask an admin.",
                     "This job has %(count)s images and videos; your limit is %(limit)s per job (%(source)s). "
                     "Split them into several jobs or ask an admin.", n_targets)
            % {"count": _count(n_targets), "limit": _count(targets.value), "source": targets.source}, "targets")

    for b in job_budgets(user, quotas):
        if b.used + 1 > b.limit:
            raise QuotaExceeded(_jobs_message(b), None)

    need = estimate_gpu_hours(template, n_targets if n_targets is not None else _chunk_size(template))
    if need > 0:
        for b in gpu_budgets(user, now, quotas):
            if b.used + need > b.limit:
                raise QuotaExceeded(_gpu_message(b, need, resets_on(now)), None)


def check_folder_targets(user, n_targets: int) -> None:
    """After a folder was listed (jobs.submit): raise QuotaExceeded when it holds more targets
    than the user's targets-per-job limit allows. No lock needed: this limit counts one job only."""
    targets = effective_limits(user).max_targets_per_job
    if targets.is_set and n_targets > targets.value:
        raise QuotaExceeded(
            ngettext("The folder has %(count)s image or video; your limit is %(limit)s per job (%(source)s). "
                     "Split the folder or ask an admin.",
                     "The folder has %(count)s images and videos; your limit is %(limit)s per job (%(source)s). "
                     "Split the folder or ask an admin.", n_targets)
            % {"count": _count(n_targets), "limit": _count(targets.value), "source": targets.source},
            "target_folder")


def _jobs_message(b: Budget) -> str:
    used, limit = int(b.used), int(b.limit)
    args = {"count": _count(used), "limit": _count(limit), "source": b.source}
    if b.is_group:
        return ngettext("Your group already has %(count)s job waiting or running; its limit is %(limit)s at a time "
                        "(%(source)s). Wait for one to finish, or cancel one.",
                        "Your group already has %(count)s jobs waiting or running; its limit is %(limit)s at a time "
                        "(%(source)s). Wait for one to finish, or cancel one.", used) % args
    return ngettext("You already have %(count)s job waiting or running; your limit is %(limit)s at a time "
                    "(%(source)s). Wait for one to finish, or cancel one.",
                    "You already have %(count)s jobs waiting or running; your limit is %(limit)s at a time "
                    "(%(source)s). Wait for one to finish, or cancel one.", used) % args


def _gpu_message(b: Budget, need: float, reset: date) -> str:
    args = {"used": format_hours(b.used), "limit": format_hours(b.limit), "left": format_hours(b.left),
            "need": format_hours(need), "source": b.source, "reset": formats.date_format(reset, "j F")}
    if b.is_group:
        return _("Your group has used %(used)s of its %(limit)s GPU-hours this month (%(source)s), %(left)s left; "
                 "this job needs about %(need)s. The limit resets on %(reset)s.") % args
    return _("You have used %(used)s of your %(limit)s GPU-hours this month (%(source)s), %(left)s left; "
             "this job needs about %(need)s. The limit resets on %(reset)s.") % args


# --- numbers in words ------------------------------------------------------------------------

def format_hours(hours: float) -> str:
    """GPU-hours for people: 10, 9.5, 0.25 (two decimals only below 0.1), localised."""
    hours = float(hours)
    digits = 1 if hours >= 0.095 or hours == 0 else 2
    text = formats.number_format(round(hours, digits), digits, force_grouping=True)
    sep = formats.get_format("DECIMAL_SEPARATOR")
    if sep in text:
        text = text.rstrip("0").rstrip(sep)
    return text


def format_mb(size: int) -> str:
    return format_hours(size / MB)  # same rounding: 120, 1.5, 0.05


def _count(n) -> str:
    return formats.number_format(int(n), 0, force_grouping=True)
