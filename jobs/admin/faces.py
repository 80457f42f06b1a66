"""People's face photos and results in the admin: shown only with `jobs.see_faces`, and audited.

The admin's `view_job` shows a job's metadata (owner, states, counts, paths, tasks, targets). Its
face files (the source photos, the reference face, each target's input and output, the results
zip) are sensitive: links to them appear only for users with the explicit permission
`jobs.see_faces` (jobs.access.may_see_faces; superusers hold every permission, the staff flag
alone none), and they are served only through `face_file` below, which checks it again and writes a
"job.face_file" audit entry each time a file is opened (who, whose job, which file).

Links, never pictures shown inline: every picture a page showed would be an opening, and looking at
someone's face should be a deliberate act that the log records, one entry per file.
"""
from __future__ import annotations

from pathlib import Path

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils.html import format_html_join
from django.utils.translation import gettext as _

from jobs import audit
from jobs.access import may_see_faces
from jobs.models import Job, Target
from jobs.results.files import download_name, input_path, media_file, output_path, serve_file, stream_results_zip
from jobs.results.retention import files_gone
from jobs.web.views.sources import job_sources, serve_source

#: the admin URL's name for one face file (JobAdmin.get_urls): kind, then a position
URL_NAME = "jobs_job_face_file"
#: what can be opened: a source photo (by position), the reference face, a target's input or output
#: (by index), the results zip
KINDS = ("source", "reference", "input", "output", "zip")


def face_url(job_id, kind: str, n: int = 0) -> str:
    return reverse(f"admin:{URL_NAME}", args=[job_id, kind, n])


def job_links(job: Job) -> str:
    """The job's face photos, reference face and results zip as links (HTML)."""
    links = [(face_url(job.pk, "source", n), _("Face photo %(n)d") % {"n": n + 1})
             for n, _source in enumerate(job_sources(job))]
    if job.reference_face:
        links.append((face_url(job.pk, "reference"), _("Reference face")))
    if job.done and not job.files_deleted_at:
        links.append((face_url(job.pk, "zip"), _("Results (zip)")))
    if not links:
        return "—"
    return format_html_join(" · ", '<a href="{}">{}</a>', links)


def target_links(target: Target) -> str:
    """A target's input and output as links (HTML); no file question is asked of the disk here."""
    links = [(face_url(target.job_id, "input", target.index), _("input"))]
    if target.output_file:
        links.append((face_url(target.job_id, "output", target.index), _("output")))
    return format_html_join(" · ", '<a href="{}">{}</a>', links)


def face_file(request: HttpRequest, job_id, kind: str, n: int, may_view_job: bool) -> HttpResponse:
    """Serve one face file of a job to a permitted admin user, and audit the opening.

    403 without `jobs.see_faces` (or without the admin's view permission on jobs); 404 for a
    file that is not there. Only what was actually served is audited."""
    if not (may_view_job and may_see_faces(request.user)):
        raise PermissionDenied
    if kind not in KINDS:
        raise Http404("No such kind of file")
    job = get_object_or_404(Job.objects.select_related("owner", "cluster"), pk=job_id)
    response, target = _response(request, job, kind, n)
    if response.status_code < 400:
        details = {"file": kind, "owner": job.owner.get_username(), "own": job.owner_id == request.user.pk}
        if kind != "zip" and kind != "reference":
            details["index"] = n
        if target is not None:
            details["name"] = target.name
        audit.record(request.user, "job.face_file", target=job, details=details, request=request)
    return response


def _response(request: HttpRequest, job: Job, kind: str, n: int) -> tuple[HttpResponse, Target | None]:
    if kind == "zip":
        return files_gone(job) or stream_results_zip(job), None
    if kind == "reference":
        path = media_file(job.reference_face.name) if job.reference_face else None
        return serve_file(path, Path(job.reference_face.name or "reference").name, request=request), None
    if kind == "source":
        return serve_source(job, n, request=request), None
    target = job.targets.filter(index=n).first()
    if target is None:
        raise Http404("No such target")
    target.job = job
    if kind == "input":
        return serve_file(input_path(target), Path(target.name).name, request=request), target
    return serve_file(output_path(target), download_name(target), request=request), target
