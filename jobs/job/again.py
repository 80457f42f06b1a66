"""Try the results that need a look again, with another face photo.

A result the worker's own look flagged (worker.selfcheck: the new face did not take, or was lost)
is kept, counted and filtered on the job page (Job.needs_look). What helps is another face photo,
so the job page offers "Try these again with another face photo": New job, filled from the job
(jobs.web.views.new_job, `?again=<job>&only=look`) with its template, faces to swap and
reference photo, and ONLY the flagged photos, but without its face photos: the user adds another.

- Uploaded photos are made ready again as uploads (linked, not copied), like Run again's.
- A folder job's photos stay where they are: the new job names the same folder and picks the
  flagged files by their cluster paths (Job.picked); jobs.job.submit lists the folder as usual (in
  the allowed roots, links resolved) and keeps only those. A file gone from the folder since is
  left out; a folder changed on the form means the whole folder, as the user typed it.
"""
from __future__ import annotations

from django.urls import reverse

from jobs.models import Job, Target, Upload, UploadKind
from jobs.models.job import NEEDS_LOOK
from jobs.uploads import store as upload_store

#: flagged photos made ready again at most (as Run again: jobs.web.views.new_job.AGAIN_MAX_FILES)
MAX_FILES = 1000

#: what `?only=` says for the flagged results (the only choice, for now)
ONLY_LOOK = "look"


def look_again_url(job: Job) -> str:
    """New job for the flagged results of `job` (the job page and a photo's page link to it)."""
    return f"{reverse('job-new')}?again={job.id}&only={ONLY_LOOK}"


def flagged(job: Job):
    """The job's results that need a look, in the job's order."""
    return Target.objects.filter(job=job).filter(NEEDS_LOOK).order_by("index")


def can_try_again(job: Job) -> bool:
    """Whether the job page offers "Try these again with another face photo": an ended job (not a
    preview: its New job still has every file) with flagged results whose files are still kept."""
    return job.is_final and job.needs_look > 0 and not job.files_deleted_at and not job.is_preview


def picked_paths(job: Job | None, target_folder: str) -> list[str]:
    """For a Start from "try again": the cluster paths of `job`'s flagged results when the new job
    names the same folder (else [], the whole folder)."""
    if job is None or not job.target_folder or target_folder.rstrip("/") != job.target_folder.rstrip("/"):
        return []
    return list(flagged(job).values_list("cluster_path", flat=True))


def kept_flagged(job: Job, user) -> list[Upload]:
    """The flagged photos of an uploads job made ready again as `user`'s uploads (linked, not
    copied; a folder job's stay in its folder: `picked_paths`)."""
    if job.target_folder:
        return []
    kept = (upload_store.keep(user, t.upload.path, UploadKind.TARGET, name=t.name)
            for t in flagged(job).exclude(upload="")[:MAX_FILES])
    return [u for u in kept if u is not None]


def keep_picked(entries: list, picked: list[str]) -> list:
    """The folder listing's entries (anything with `.path`) that a picked job runs on, in the folder's order."""
    if not picked:
        return entries
    wanted = set(picked)
    return [e for e in entries if e.path in wanted]
