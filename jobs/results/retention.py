"""Face data is personal data: a job's files are deleted after the admin's number of days, or when
its owner asks ("Delete job and files"); the owner is emailed before an automatic deletion.

What goes: everything under the job's media folder on the portal (face photos, uploaded targets,
fetched outputs, thumbnails, posters), the job's Source and Target rows (their names are the
photos' names), and the job's folder on the cluster (`Job.folder`, a team's job's under its team's
account: staged inputs, manifest, outputs, logs). Photos in a folder the user picked on shared
storage are the user's own and are not touched. What stays: the job row as a tombstone (name,
dates, counts, usage, attempts) with `files_deleted_at` set, so usage and the audit log keep their
history.

Order: the portal's files go at once, in the request or RQ task that claims the deletion (a
conditional update of `files_deleted_at`: only one caller deletes); the cluster's folder goes in an
RQ task (`delete_on_cluster`) after the commit, checked inside the work root on both sides
(cluster.cleanup). A cluster that cannot be reached leaves `cluster_files_deleted_at` empty and
the watcher's slow beat (`beat`) asks again.

A job still queued or on the cluster is never deleted: cancel it first (the page shows the button
only once the job ended; the API answers 409).
"""
from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Coalesce
from django.http import HttpResponse
from django.urls import reverse
from django.utils import formats, timezone
from django.utils.translation import gettext as _

import cluster
from cluster.cleanup import delete_job_folder
from jobs import audit
from jobs.background import enqueue
from jobs.models import Job, NoticeKind, NotificationPreference, RetentionPolicy, Source, Target
from jobs.models.job import FINAL_STATUSES
from jobs.usage import notices, notifications
from jobs.words import in_language_of

log = logging.getLogger(__name__)

__all__ = ["FilesDeleted", "delete_job_files", "delete_on_cluster", "due_for_notice", "due_for_deletion",
           "beat", "send_notice", "expire_job", "files_gone", "files_gone_message", "deletion_date"]

#: EmailNotice.kind of the notice (its key, "retention:<job uuid>", makes it go once per job)
NOTICE_KIND = NoticeKind.RETENTION
#: jobs handled per beat: a backlog (retention just turned on) is worked off over several beats
BEAT_BATCH = 200
#: a cluster folder still there this long after the portal's files went is asked for again
CLUSTER_RETRY_AFTER = timedelta(minutes=10)


@dataclass(frozen=True)
class FilesDeleted:
    """What one deletion removed on the portal: counts only, never names."""

    files: int
    bytes: int


# ---- deleting --------------------------------------------------------------------------------

def delete_job_files(job: Job, actor=None, request=None, reason: str = "owner") -> FilesDeleted | None:
    """Delete the job's files (module docstring); None when the job is still active or its files
    are already deleted (another caller won). `reason`: "owner" (the button / API) or "retention"."""
    now = timezone.now()
    with transaction.atomic():
        claimed = Job.objects.filter(pk=job.pk, files_deleted_at__isnull=True,
                                     status__in=FINAL_STATUSES).update(files_deleted_at=now)
        if not claimed:
            return None
        job.files_deleted_at = now
        folder = _media_folder(job)
        gone = _count(folder) if folder is not None else FilesDeleted(0, 0)
        # The rows name the photos (file names often are people's names): they go with the files.
        Target.objects.filter(job=job).delete()
        Source.objects.filter(job=job).delete()
        Job.objects.filter(pk=job.pk).update(reference_face="")
        audit.record(actor, "job.files_deleted", target=job, request=request,
                     details={"reason": reason, "files": gone.files, "bytes": gone.bytes,
                              "targets": job.total, "cluster": "queued"})
        # Last: a failure here (a file that cannot be removed) rolls the rows back, to try again.
        if folder is not None:
            shutil.rmtree(folder)
        transaction.on_commit(lambda: enqueue.enqueue_cluster_cleanup(job.id))
    log.info("job %s: %d file(s), %d bytes deleted on the portal (%s)", job.id, gone.files, gone.bytes, reason)
    return gone


def _media_folder(job: Job) -> Path | None:
    """The job's media folder if it resolves strictly inside MEDIA_ROOT; a symbolic link in its
    place is removed as a link (never followed) and None returned, as for a missing folder."""
    root = Path(settings.MEDIA_ROOT).resolve()
    folder = job.media_dir
    if folder.is_symlink():
        folder.unlink()
        return None
    real = folder.resolve()
    if real == root or not real.is_relative_to(root) or not real.is_dir():
        return None
    return real


def _count(folder: Path) -> FilesDeleted:
    files = size = 0
    for here, _dirs, names in os.walk(folder):
        for name in names:
            try:
                size += os.lstat(os.path.join(here, name)).st_size
                files += 1
            except OSError:
                continue
    return FilesDeleted(files, size)


def delete_on_cluster(job_id: str) -> bool:
    """RQ task: delete the job's folder on its cluster (after the portal's files went). True when
    done (or nothing was there); errors raise, so RQ records them and the beat asks again later."""
    job = Job.objects.select_related("cluster").filter(pk=job_id, files_deleted_at__isnull=False,
                                                       cluster_files_deleted_at__isnull=True).first()
    if job is None:
        return False
    profile = job.cluster
    result = delete_job_folder(cluster.runner_for(profile), job.folder.root, profile.work_root)
    if Job.objects.filter(pk=job.pk, cluster_files_deleted_at__isnull=True).update(
            cluster_files_deleted_at=timezone.now()):
        audit.record(None, "job.cluster_files_deleted", target=job, details={"existed": result.existed})
    return True


def expire_job(job_id: str) -> bool:
    """RQ task: delete a job's files because its retention ran out (checked again: an owner may have
    deleted them meanwhile, or the admin changed the days)."""
    job = due_for_deletion().filter(pk=job_id).first()
    return job is not None and delete_job_files(job, reason="retention") is not None


def files_gone_message(job: Job) -> str | None:
    """What a download of a job whose files were deleted is told (in the active language); None
    while the files are there. The API answers it as its JSON error, 410 (jobs.api)."""
    if job.files_deleted_at is None:
        return None
    return _("The files of this job were deleted on %(date)s; they cannot be downloaded any more.") % {
        "date": formats.date_format(timezone.localtime(job.files_deleted_at), "Y-m-d")}


def files_gone(job: Job) -> HttpResponse | None:
    """410 Gone, in plain words, for a download of a job whose files were deleted; None otherwise."""
    message = files_gone_message(job)
    if message is None:
        return None
    return HttpResponse(message, status=410, content_type="text/plain; charset=utf-8")


# ---- what is due -----------------------------------------------------------------------------

def _kept_jobs():
    """Ended jobs that still have their files, with `ended` (the end, or the creation when none)."""
    return Job.objects.filter(status__in=FINAL_STATUSES, files_deleted_at__isnull=True).annotate(
        ended=Coalesce(F("finished_at"), F("created_at")))


def due_for_notice(now: datetime | None = None, policy: RetentionPolicy | None = None):
    """Jobs whose owner should now hear that the files go in `notice_days` (not told yet)."""
    now, policy = now or timezone.now(), policy or RetentionPolicy.current()
    if policy.notice_days <= 0:
        return Job.objects.none()
    return _kept_jobs().filter(retention_notice_at__isnull=True, ended__lte=now - (policy.keep - policy.notice))


def due_for_deletion(now: datetime | None = None, policy: RetentionPolicy | None = None):
    """Jobs whose files are past the retention days, and whose owner was told at least
    `notice_days` ago (a notice sent late moves the deletion, never shortens the warning)."""
    now, policy = now or timezone.now(), policy or RetentionPolicy.current()
    due = _kept_jobs().filter(ended__lte=now - policy.keep)
    if policy.notice_days > 0:
        due = due.filter(retention_notice_at__lte=now - policy.notice)
    return due


def deletion_date(job: Job, policy: RetentionPolicy | None = None) -> datetime:
    """When the job's files go: `days` after its end, and never sooner than `notice_days` after the notice."""
    policy = policy or RetentionPolicy.current()
    when = (job.finished_at or job.created_at) + policy.keep
    if job.retention_notice_at and policy.notice_days > 0:
        when = max(when, job.retention_notice_at + policy.notice)
    return when


def beat(now: datetime | None = None) -> dict:
    """The watcher's slow beat: claim and queue due notices, queue due deletions, ask again for
    cluster folders still there. Returns how many of each were queued."""
    now = now or timezone.now()
    policy = RetentionPolicy.current()
    counts = {"notices": 0, "deletions": 0, "cluster": 0}
    for job_id in list(due_for_notice(now, policy).values_list("pk", flat=True)[:BEAT_BATCH]):
        # Claimed before queued: two watchers never email twice; a lost queue is unclaimed for the next beat.
        if Job.objects.filter(pk=job_id, retention_notice_at__isnull=True).update(retention_notice_at=now):
            if enqueue.enqueue_retention_notice(job_id):
                counts["notices"] += 1
            else:
                Job.objects.filter(pk=job_id, retention_notice_at=now).update(retention_notice_at=None)
    for job_id in due_for_deletion(now, policy).values_list("pk", flat=True)[:BEAT_BATCH]:
        counts["deletions"] += enqueue.enqueue_expiry(job_id)
    stale = Job.objects.filter(files_deleted_at__lte=now - CLUSTER_RETRY_AFTER, cluster_files_deleted_at__isnull=True)
    for job_id in stale.values_list("pk", flat=True)[:BEAT_BATCH]:
        counts["cluster"] += enqueue.enqueue_cluster_cleanup(job_id)
    if any(counts.values()):
        log.info("retention: queued %(notices)d notice(s), %(deletions)d deletion(s), %(cluster)d cluster "
                 "folder(s)", counts)
    return counts


# ---- the notice ------------------------------------------------------------------------------

def send_notice(job_id: str) -> str:
    """RQ task: email the owner that the job's files will be deleted (once per job; respects the
    owner's job-email preference). Returns the notice's status ("" when none)."""
    job = Job.objects.select_related("owner").filter(pk=job_id, files_deleted_at__isnull=True).first()
    if job is None:
        return ""
    user = job.owner
    with in_language_of(job):
        when = deletion_date(job)
        date = formats.date_format(timezone.localtime(when), "Y-m-d")
        subject = _("The files of job “%(name)s” will be deleted on %(date)s") % {
            "name": notifications.display_name(job), "date": date}
        notice = notices.claim(f"retention:{job.id}", kind=NOTICE_KIND, user=user, job=job, to=user.email,
                               subject=f"{notifications.SUBJECT_TAG} {subject}"[:300])
        if notice is None:
            return ""
        if not NotificationPreference.for_user(user).job_emails:
            return notices.skip(notice, "opted out of job emails")
        context = {"job": job, "name": notifications.display_name(job), "date": date,
                   "user_name": user.get_full_name() or user.get_username(),
                   "url": notifications.absolute_url(reverse("job-detail", args=[job.id])),
                   "settings_url": notifications.absolute_url(reverse("account") + "#notifications")}
        return notices.send(notice, "email/retention_notice", context)

