"""Quotas: how much a user may use, checked at Start.

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
`jobs.usage.accounting` charges a job from sacct in the month it ends) + the ESTIMATE of every job
still active (queued, submitting, pending, running) and not charged yet. Counting active jobs at
their estimate is what keeps two big Starts from both slipping in before either is charged.

Estimate (`estimate_gpu_hours`), from the template (or a job's snapshot of it):

    tasks     = ceil(targets / chunk_size)
    per task  = min(time limit, images in the task x seconds_per_image + 30 s model load)
    GPU-hours = sum over tasks of per task x GPUs per task / 3600

A video counts as one image plus its frames (duration x frame rate), each frame as one image; the
work is spread evenly over the tasks (`estimate_gpu_hours(template, targets, frames)`).

Folder targets are counted on the cluster, by `jobs.job.submit` after Start: at Start a folder job is
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
from jobs.errors import QuotaExceeded
from jobs.quotas.check import (
    check_folder_targets,
    check_job_size,
    check_quota,
    check_targets_per_job,
    lock_quota_subjects,
    targets_limits,
)
from jobs.quotas.estimate import DEFAULT_SECONDS_PER_IMAGE, MODEL_LOAD_SECONDS, estimate_gpu_hours
from jobs.quotas.limits import (
    ACTIVE_JOB_STATUSES,
    LIMIT_FIELDS,
    Budget,
    Limit,
    Limits,
    QuotaStatus,
    active_jobs_count,
    applicable_quotas,
    effective_limits,
    gpu_budgets,
    gpu_hours_used,
    job_budgets,
    members_of,
    quota_status,
    resets_on,
    source_of,
)
from jobs.quotas.messages import MB, format_hours, format_mb

__all__ = [
    "QuotaExceeded", "Limit", "Limits", "Budget", "QuotaStatus", "LIMIT_FIELDS", "ACTIVE_JOB_STATUSES",
    "applicable_quotas", "effective_limits", "members_of", "estimate_gpu_hours", "gpu_hours_used", "active_jobs_count",
    "gpu_budgets", "job_budgets", "quota_status", "check_quota", "check_folder_targets", "check_job_size", "lock_quota_subjects",
    "check_targets_per_job", "targets_limits",
    "resets_on", "format_hours", "format_mb", "source_of", "MB", "MODEL_LOAD_SECONDS", "DEFAULT_SECONDS_PER_IMAGE",
]
