"""Start: turn a user's choices into a queued job, in one transaction, and enqueue its submission.

Called by the "New job" page and by `POST /api/v1/jobs` alike. Nothing here talks to the cluster:
an SSH outage during Start must never lose the job, so staging, folder listing and sbatch all
happen in the RQ task (`jobs.submit.submit_job`), which is retried.

The quota is checked in the same transaction that creates the job, before its row exists, after
locking what the quota counts (`jobs.quotas.check_quota`): two simultaneous Starts can never both
slip under a limit.
"""
from __future__ import annotations

import logging
import posixpath
import shutil

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from cluster import PathNotAllowed, check_in_roots
from worker.manifest import IMAGE_EXTENSIONS, VIDEO_EXTENSIONS, default_output_name

from jobs import audit, tasks
from jobs.models import Job, Source, Target, Template
from jobs.errors import StartError, UploadRejected
from jobs.quotas import check_job_size, check_quota
from jobs.uploads import check_upload, safe_name, unique_name

log = logging.getLogger(__name__)

MEDIA_EXTENSIONS = IMAGE_EXTENSIONS + VIDEO_EXTENSIONS


def start_job(*, user, template: Template | None, sources: list[UploadedFile], target_folder: str = "",
              target_files: list[UploadedFile] | None = None, consent: bool = False, name: str = "",
              callback_url: str = "", request=None) -> Job:
    """Create a queued job (and enqueue its submission on commit), or raise StartError (a
    QuotaExceeded when a quota refuses it). `request`, when given, only feeds the audit log."""
    target_files = target_files or []
    if template is None or not Template.objects.usable_by(user).filter(pk=template.pk).exists():
        raise StartError(_("Choose one of the templates offered to you."), "template")
    if not consent:
        raise StartError(_("Confirm that you have the right to process the faces in these photos."), "consent")
    if not sources:
        raise StartError(_("Upload at least one photo of the face to put in."), "source")
    if bool(target_folder) == bool(target_files):
        raise StartError(_("Pick a target folder on the cluster or upload target files (one of the two)."), "target_folder")
    profile = template.cluster
    check_job_size(profile, len(target_files))  # before any upload is read: a folder is counted after listing
    if target_folder:
        try:
            target_folder = check_in_roots(target_folder, list(profile.target_roots))
        except PathNotAllowed:
            raise StartError(_("That folder is outside the folders you may use. Pick one with the folder browser."),
                             "target_folder") from None
    for f in sources:
        try:
            check_upload(f, kind="image")
        except UploadRejected as exc:
            raise StartError(_("Source %(name)s: %(reason)s") % {"name": f.name, "reason": exc}, "source") from None
    for f in target_files:
        try:
            check_upload(f, kind="media")
        except UploadRejected as exc:
            raise StartError(_("Target %(name)s: %(reason)s") % {"name": f.name, "reason": exc}, "targets") from None

    job = Job(owner=user, name=name.strip()[:200], template=template, template_snapshot=template.snapshot().to_json(),
              cluster=profile, target_folder=target_folder, consent_at=timezone.now(), callback_url=callback_url)
    # Folder targets are counted on the cluster after Start (jobs.submit re-checks the count).
    n_targets = len(target_files) if target_files else None
    upload_sizes = [(f.name, f.size, "source") for f in sources] + [(f.name, f.size, "targets") for f in target_files]
    try:
        with transaction.atomic():
            # Locks the user's (and their groups') quota rows first: a second Start waits here.
            check_quota(user, template, n_targets, upload_sizes)
            job.save()
            audit.record(user, "job.start", target=job, request=request, details={
                "template": template.slug, "target_folder": target_folder, "uploaded_targets": len(target_files),
                "sources": len(sources), "consent_at": job.consent_at.isoformat()})
            for f in sources:
                Source.objects.create(job=job, file=_named(f), original_name=f.name[:255])
            used: set[str] = set()
            chunk_size = max(1, template.chunk_size)
            for i, f in enumerate(target_files):
                out = unique_name(default_output_name(safe_name(f.name)), used)
                Target.objects.create(job=job, index=i, name=f.name[:500], upload=_named(f, out), output_name=out,
                                      task_index=i // chunk_size,
                                      cluster_path=profile.job_folder(job.id).target(out))
            job.total = len(target_files)
            job.save(update_fields=["total"])
            if settings.SUBMIT_ON_START:
                transaction.on_commit(lambda: tasks.enqueue_submission(job))
    except Exception:
        # Files are written before the rows commit: remove them so a failed Start leaves nothing.
        shutil.rmtree(job.media_dir, ignore_errors=True)
        raise
    log.info("job %s started by %s: template %s, %s", job.id, user, template.slug,
             f"folder {target_folder}" if target_folder else f"{len(target_files)} uploaded target(s)")
    return job


def _named(f: UploadedFile, name: str | None = None) -> UploadedFile:
    f.name = safe_name(name or f.name)
    return f


def is_media_name(name: str) -> bool:
    return name.lower().endswith(MEDIA_EXTENSIONS)
