"""A job's files: outputs, thumbnails, uploaded inputs (for before/after) and the results zip.

Never served as static media: each request looks the job up for the user first, and each path
is checked to lie under MEDIA_ROOT (jobs.results.files) before it is opened.

An output is offered as "<original>-swapped.<ext>" (jobs.results.files.download_name), in the zip too.
Files answer byte ranges, so a video can be sought without downloading all of it first.

Downloads go to the audit log ("job.download"): the zip, and an output or input asked for as a
download (`?download=1`). Showing a picture or playing a video on the job's pages is not a download
and is not recorded (a page shows many pictures; the log would drown in them). Through the API
every output fetched is a download.
"""
from __future__ import annotations

from pathlib import Path
from uuid import UUID

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe

from jobs.results.files import (
    download_name,
    input_path,
    output_path,
    record_download,
    serve_file,
    stream_results_zip,
    thumbnail_path,
)
from jobs.results.retention import files_gone
from jobs.web.views import get_job_for_user, get_target_for_user


@login_required
@require_safe
def job_output(request: HttpRequest, job_id: UUID, index: int) -> HttpResponse:
    target = get_target_for_user(request.user, job_id, index)
    download = request.GET.get("download") == "1"
    response = serve_file(output_path(target), download_name(target), download=download, request=request)
    if download:
        record_download(request, target.job, "output", target=target)
    return response


@login_required
@require_safe
def job_thumb(request: HttpRequest, job_id: UUID, index: int) -> HttpResponse:
    target = get_target_for_user(request.user, job_id, index)
    path = thumbnail_path(target)
    return serve_file(path, Path(target.output_name).stem + ".jpg")


@login_required
@require_safe
def job_input(request: HttpRequest, job_id: UUID, index: int) -> HttpResponse:
    target = get_target_for_user(request.user, job_id, index)
    download = request.GET.get("download") == "1"
    response = serve_file(input_path(target), Path(target.name).name, download=download, request=request)
    if download:
        record_download(request, target.job, "input", target=target)
    return response


@login_required
@require_safe
def job_results_zip(request: HttpRequest, job_id: UUID) -> HttpResponse:
    job = get_job_for_user(request.user, job_id)
    if job.files_deleted_at:  # retention: 410 Gone in plain words, not an empty zip
        return files_gone(job)
    response = stream_results_zip(job)
    record_download(request, job, "zip")
    return response
