"""Try it on a few photos: the chosen template on the first photos of a job-to-be, before the big run.

Nobody should launch 10,000 photos to find out the face was wrong. From New job, "Try it on a few
photos" starts a small job of its own (Job.is_preview) over the first PREVIEW_PHOTOS photos of the
files chosen or of the folder (videos are not previewed: a clip runs as long as the clip), with the
same face photos, template, faces to swap and booking. It is a job like any other: checked at Start
by the same rules, counted in the quotas, listed, followed live, its results compared before/after.

The files sent ahead are COPIED for the preview (`jobs.uploads.store.keep`: linked where the file
system allows), never used up: the whole job's Start, a minute later, still has every one of them.
No program is called back for a preview, and no "job finished" email is sent for one: the person is
on the page, waiting for it.

A preview runs at the job's usual priority. Slurm's backfill starts a job this short at the first
free GPU in most queues; an "urgent" QOS would let anyone pre-empt other people's running work with
previews (the local clusters' urgent level pre-empts high and normal), so it is not used.
"""
from __future__ import annotations

from django.utils.translation import gettext as _

from jobs.errors import StartError
from jobs.job.start import start_job
from jobs.models import Job, Upload, UploadKind
from jobs.models.job import PREVIEW_PHOTOS
from jobs.uploads import store as upload_store
from worker.manifest import is_video_name


def preview_name(name: str) -> str:
    """What the preview is called in lists and on its page, in the language of the page that started it."""
    name = (name or "").strip()
    return (_("Preview: %(name)s") % {"name": name})[:200] if name else _("Preview")


def first_photos(uploads: list[Upload]) -> list[Upload]:
    """The uploads a preview runs on: the first PREVIEW_PHOTOS photos, in the order chosen."""
    return [u for u in uploads if not is_video_name(u.name)][:PREVIEW_PHOTOS]


def start_preview(*, user, template, sent: dict[str, list[Upload]], target_folder: str = "", name: str = "",
                  face_selector: str | None = None, booking=None, consent: bool = False,
                  mixed_faces_ok: bool = False, picked=(), team=None, request=None) -> Job:
    """Start a preview of the job these choices would make. `sent`: the user's uploads the form names
    ({"source", "targets", "reference"}: every file an upload by now, jobs.web.views.new_job keeps
    the ones sent with the form). Raises StartError as Start does; the uploads stay the user's either way."""
    targets = [] if target_folder else first_photos(sent["targets"])
    if sent["targets"] and not target_folder and not targets:
        raise StartError.of([("targets", _("A preview runs on photos, and only videos are chosen. Start the "
                                           "whole job instead."))])
    copies: dict[str, list[Upload]] = {
        key: [c for c in (upload_store.keep(user, u.path, kind, name=u.name) for u in uploads) if c is not None]
        for key, uploads, kind in (("source", sent["source"], UploadKind.SOURCE),
                                   ("targets", targets, UploadKind.TARGET),
                                   ("reference", sent["reference"], UploadKind.REFERENCE))}
    try:
        return start_job(
            user=user, template=template, target_folder=target_folder, consent=consent, name=preview_name(name),
            request=request, source_uploads=[c.id for c in copies["source"]],
            target_uploads=[c.id for c in copies["targets"]], face_selector=face_selector,
            reference_uploads=[c.id for c in copies["reference"]], booking=booking,
            mixed_faces_ok=mixed_faces_ok, is_preview=True, picked=picked, team=team)
    except Exception:
        for made in copies.values():  # refused: the copies go, the originals stay on the form
            for c in made:
                upload_store.remove(c)
        raise
