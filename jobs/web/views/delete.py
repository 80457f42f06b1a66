"""Delete job and files: the owner removes a job's photos, videos and results from the portal and the
cluster at once (jobs.results.retention). The job stays in the list as a tombstone, marked "files deleted"."""
from __future__ import annotations

from uuid import UUID

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from jobs.results.retention import delete_job_files
from jobs.web.views import get_job_for_user


@require_POST
@login_required
def job_delete(request: HttpRequest, job_id: UUID) -> HttpResponse:
    job = get_job_for_user(request.user, job_id, own=True)
    if job.files_deleted_at is not None:
        messages.info(request, _("The files of this job were already deleted."))
    elif job.is_active:
        messages.error(request, _("This job is still running. Cancel it first, then delete its files."))
    elif delete_job_files(job, actor=request.user, request=request) is None:
        messages.info(request, _("The files of this job could not be deleted now; try again in a moment."))
    else:
        messages.success(request, _("The job's photos, videos and results were deleted from the portal; "
                                    "its folder on the cluster is being deleted."))
    return redirect("job-detail", job_id=job.id)
