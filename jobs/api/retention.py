"""`DELETE /api/v1/jobs/<id>`: delete a job's files (jobs.results.retention), on the job's own address.

Owner only, like every job lookup (jobs.access): someone else's job answers 404 like a missing one. A job still
queued or on the cluster answers 409: cancel it first (`POST .../cancel`), then delete once it
ended; deleting never cancels by itself, so a DELETE sent by mistake cannot stop running work.
Answers 200 with the job (now a tombstone: `files_deleted_at` set, no outputs); a second DELETE
answers 410. GET on the same address is `jobs.api.views.job`.
"""
from __future__ import annotations

from django.http import JsonResponse
from django.utils.translation import gettext as _

from jobs import shapes as serializers
from jobs.api import views as api
from jobs.api.auth import api_view, error
from jobs.models import Job
from jobs.results.retention import delete_job_files, files_gone_message


@api_view("GET", "DELETE")
def job_or_delete(request, job_id):
    if request.method != "DELETE":
        return api.job(request, job_id)
    found = Job.objects.owned(request.user).filter(pk=job_id).first()
    if found is None:
        return error(_("No such job."), 404)
    gone = files_gone_message(found)
    if gone is not None:
        return error(gone, 410)
    if found.is_active:
        return error(_("This job is still %(status)s. Cancel it first (POST /api/v1/jobs/%(id)s/cancel), then "
                       "delete it once it has ended.") % {"status": found.get_status_display(), "id": found.id}, 409)
    if delete_job_files(found, actor=request.user, request=request) is None:
        return error(_("The files of this job could not be deleted now; try again in a moment."), 409)
    found = serializers.with_details(Job.objects.filter(pk=found.pk)).get()
    return JsonResponse(serializers.job_detail(found, request))
