"""The quota check at Start (and after a folder was listed), under a lock: see jobs.quotas."""
from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.utils.translation import gettext as _

from jobs.errors import QuotaExceeded, StartError
from jobs.models import Template
from jobs.quotas.estimate import chunk_size_of, estimate_gpu_hours
from jobs.quotas.limits import Limits, applicable_quotas, effective_limits, gpu_budgets, job_budgets, resets_on
from jobs.quotas.messages import (
    MB,
    format_count,
    format_mb,
    gpu_message,
    jobs_message,
    too_big_for_cluster,
    too_many_targets,
)

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
                upload_sizes: Iterable[tuple] = (), now: datetime | None = None, frames: int = 0) -> None:
    """Raise QuotaExceeded when this Start would go past a quota of `user`.

    n_targets: targets of the job; None for a folder (counted later: see check_folder_targets).
    frames: the frames of the videos among them (duration x frame rate, summed): see estimate_gpu_hours.
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
                    % {"name": name, "size": format_mb(size), "limit": format_count(upload.value), "source": upload.source},
                    field[0] if field else "targets")

    if n_targets is not None:
        check_targets_per_job(limits, n_targets)

    for b in job_budgets(user, quotas):
        if b.used + 1 > b.limit:
            raise QuotaExceeded(jobs_message(b), None)

    need = estimate_gpu_hours(template, n_targets if n_targets is not None else chunk_size_of(template), frames)
    if need > 0:
        for b in gpu_budgets(user, now, quotas):
            if b.used + need > b.limit:
                raise QuotaExceeded(gpu_message(b, need, resets_on(now)), None)


def check_job_size(profile, n_targets: int, field: str = "targets") -> None:
    """Raise StartError when a job of `n_targets` is bigger than its cluster takes in one job
    (`ClusterProfile.max_targets_per_job`, whoever starts it). Pages, live updates and Slurm's
    arrays are sized for jobs up to it; bigger sets are split into several jobs."""
    limit = profile.max_targets_per_job
    if limit and n_targets > limit:
        raise StartError(too_big_for_cluster(n_targets, format_count(n_targets), format_count(limit), profile.shown_name), field)


def check_targets_per_job(limits: Limits, n_targets: int, field: str = "targets") -> None:
    """Raise QuotaExceeded when a job of `n_targets` is over the user's limit of targets per job
    (`limits`: their effective_limits). One job only is counted: no lock needed, so Start asks it
    with its other checks, before the transaction, and the form shows it with every other problem."""
    targets = limits.max_targets_per_job
    if targets.is_set and n_targets > targets.value:
        raise QuotaExceeded(too_many_targets(n_targets, format_count(n_targets), format_count(targets.value),
                                             targets.source, in_folder=field == "target_folder"), field)


def check_folder_targets(user, n_targets: int, profile=None) -> None:
    """After a folder was listed (jobs.job.submit): raise StartError when it holds more targets than its
    cluster takes in one job, or QuotaExceeded when more than the user's targets-per-job limit
    allows. No lock needed: these limits count one job only."""
    if profile is not None:
        check_job_size(profile, n_targets, "target_folder")
    check_targets_per_job(effective_limits(user), n_targets, "target_folder")


# --- what the New job page checks before Start ------------------------------------------------

#: the number the page's script puts in place of `{count}` in the texts of targets_limits
COUNT_PLACE = "{count}"


def targets_limits(user, profiles) -> dict:
    """The limits of targets per job that the New job page checks as files are chosen or a folder is
    counted, with the very texts Start would refuse with, `{count}` standing for the number:
    `{"quota": {"limit", "files", "folder"} or None, "clusters": {slug: {"limit", "text"}}}`
    (`profiles`: the clusters of the templates offered). A refusal has a count over its limit, so
    over one: the texts are the plural ones."""
    targets = effective_limits(user).max_targets_per_job
    quota = None
    if targets.is_set:
        limit = format_count(targets.value)
        quota = {"limit": targets.value,
                 "files": too_many_targets(2, COUNT_PLACE, limit, targets.source),
                 "folder": too_many_targets(2, COUNT_PLACE, limit, targets.source, in_folder=True)}
    clusters = {p.slug: {"limit": p.max_targets_per_job,
                         "text": too_big_for_cluster(2, COUNT_PLACE, format_count(p.max_targets_per_job), p.name)}
                for p in profiles if p.max_targets_per_job}
    return {"quota": quota, "clusters": clusters}
