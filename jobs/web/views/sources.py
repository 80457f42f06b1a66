"""The face photos a job used (its Source files), shown small on the job's page.

Looked up through the job's owner like every file of a job (`get_job_for_user`: someone else's
job answers 404), and served by `jobs.results.files.serve_file`, which checks the path lies under
MEDIA_ROOT and shows only photo types.
"""
from __future__ import annotations

from pathlib import Path
from uuid import UUID

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_safe

from jobs.models import Job, Source
from jobs.results.files import media_file, serve_file
from jobs.web.views import get_job_for_user


def job_sources(job: Job) -> list[Source]:
    """The job's face photos in the order they were given (`n` in the address is the position)."""
    return list(job.sources.order_by("pk"))


def serve_source(job: Job, n: int, request: HttpRequest | None = None) -> HttpResponse:
    """The job's face photo `n` (its position, as in job_sources), served under the name it was
    sent with; Http404 when there is no such photo. `request`: passed on to serve_file."""
    sources = job_sources(job)
    if not 0 <= n < len(sources):
        raise Http404("No such face photo")
    source = sources[n]
    return serve_file(media_file(source.file.name), Path(source.original_name or source.file.name).name,
                      request=request)


@login_required
@require_safe
def job_source(request: HttpRequest, job_id: UUID, n: int) -> HttpResponse:
    return serve_source(get_job_for_user(request.user, job_id), n)
