"""The JSON API `/api/v1/` (a stable contract other programs depend on: docs/api.md).

Thin views: the rules live in `start.start_job`, `lifecycle.request_cancel` and `browse.browse`, shared
with the pages. Every job is looked up through `Job.objects.visible_to(user)`, the caller's own
(jobs.access; staff flags grant nothing here): any other job is 404, exactly like one that does
not exist, so ids leak nothing, for reading and for every action.
"""
from __future__ import annotations

import json
import uuid

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.http import JsonResponse
from django.utils.translation import gettext as _

from jobs import shapes as serializers
from jobs import webhooks
from jobs.api.auth import api_view, error
from jobs.api.paging import MAX_OFFSET, BadParameter, paged, whole_number
from jobs.bookings.use import job_outlasts_booking
from jobs.clusters.browse import browse
from jobs.errors import BrowseError, StartError
from jobs.job import again
from jobs.job.lifecycle import request_cancel
from jobs.job.retry import retry_failed, retry_refusal
from jobs.job.start import start_job
from jobs.models import ClusterProfile, Job, JobStatus, Team, Template
from jobs.results.files import download_name, output_path, record_download, serve_file, stream_results_zip
from jobs.results.retention import files_gone_message
from jobs.uploads import store as upload_store

TRUE_WORDS = ("true", "1", "yes", "on")
_callback_url = URLValidator(schemes=["http", "https"])


def _job_for(request, job_id, details: bool = False) -> Job | None:
    """The caller's own job, else None: the API's only way to a job, for reading and acting."""
    visible = Job.objects.visible_to(request.user)
    if details:
        visible = serializers.with_details(visible)
    return visible.filter(pk=job_id).first()


def _no_job() -> JsonResponse:
    return error(_("No such job."), 404)


@api_view("GET", "POST")
def jobs(request):
    """GET: the caller's jobs, newest first. POST: start a job."""
    if request.method == "POST":
        return _create_job(request)
    return _list_jobs(request)


def _create_job(request) -> JsonResponse:
    data = request.POST
    callback_url = data.get("callback_url", "").strip()
    if callback_url:
        try:
            _callback_url(callback_url)
        except ValidationError:
            return error(_("Give the callback as a full http:// or https:// URL."), 400, "callback_url")
        if len(callback_url) > Job._meta.get_field("callback_url").max_length:
            return error(_("The callback URL is too long."), 400, "callback_url")
        if problem := webhooks.check_callback_url(callback_url):  # no private addresses (jobs.webhooks.guard)
            return error(problem, 400, "callback_url")
    slug = data.get("template", "").strip()
    template = Template.objects.select_related("cluster").filter(slug=slug).first() if slug else None
    target_folder, target_uploads = data.get("target_folder", "").strip(), _upload_ids(data, "target_uploads")
    picked, made = [], []
    if look_again_of := data.get("look_again_of", "").strip():  # that job's results that need a look (jobs.job.again)
        try:
            earlier = _job_for(request, look_again_of)
        except ValidationError:  # not a job's id
            earlier = None
        if earlier is None:
            return _no_job()
        template = template or earlier.template
        target_folder = earlier.target_folder
        picked = again.picked_paths(earlier, target_folder)
        made = again.kept_flagged(earlier, request.user)
        target_uploads = [str(u.id) for u in made]
        if not (picked or target_uploads):
            return error(_("No result of that job needs a look, or its files are gone."), 400, "look_again_of")
    try:
        job = start_job(
            user=request.user, template=template, sources=request.FILES.getlist("source"),
            target_folder=target_folder, target_files=request.FILES.getlist("targets"),
            consent=data.get("consent", "").strip().lower() in TRUE_WORDS, name=data.get("name", ""),
            callback_url=callback_url, request=request,
            source_uploads=_upload_ids(data, "source_uploads"), target_uploads=target_uploads, picked=picked,
            face_selector=data.get("face_selector", "").strip() or None, reference=request.FILES.get("reference"),
            reference_uploads=_upload_ids(data, "reference_uploads"),
            booking=data.get("booking", "").strip() or None,  # a GPU booking's id: run in its reservation
            mixed_faces_ok=data.get("mixed_faces_ok", "").strip().lower() in TRUE_WORDS,  # the face photos: one person
            team=data.get("team", "").strip() or None,  # one of the caller's teams, by its Slurm account
        )
    except StartError as exc:
        for upload in made:  # made for this Start only: nobody sent them
            upload_store.remove(upload)
        response = error(exc.message, 400, exc.field)
        if len(exc.problems) > 1:  # every problem at once, as the page shows them
            body = json.loads(response.content)
            body["errors"] = [{"field": f, "error": m} for f, m in exc.problems]
            response = JsonResponse(body, status=400)
        return response
    body = serializers.job_created(job, request)
    if warning := job_outlasts_booking(job):  # started all the same: a warning, not a refusal
        body["warning"] = warning
    response = JsonResponse(body, status=201)
    response["Location"] = body["url"]
    return response


def _upload_ids(data, name: str) -> list[str]:
    """Ids of files sent ahead over tus (`/uploads/`), repeated or comma-separated; non-ids dropped."""
    out = []
    for value in data.getlist(name):
        for part in value.split(","):
            try:
                out.append(str(uuid.UUID(part.strip())))
            except ValueError:
                continue
    return out


def _list_jobs(request) -> JsonResponse:
    """`{"count", "next", "previous", "results": [job summary ...]}`; `?status=a,b`, `?limit=`, keyset
    `?after=`/`?before=` (jobs.api.paging) or `?offset=`;
    `?team=<account>`: a team lead's list of that team's jobs (everyone's; a team not led: an empty list)."""
    team = request.GET.get("team", "").strip()
    if team:
        qs = Job.objects.visible_to(request.user).filter(team__slurm_account=team, team__leads=request.user)
    else:
        qs = Job.objects.owned(request.user)
    qs = qs.select_related("owner").order_by("-created_at", "-pk")
    status = request.GET.get("status", "").strip()
    if status:
        wanted = [s.strip() for s in status.split(",") if s.strip()]
        unknown = [s for s in wanted if s not in JobStatus.values]
        if unknown:
            return error(_("Unknown status %(status)s; use one of: %(known)s.")
                         % {"status": ", ".join(unknown), "known": ", ".join(JobStatus.values)}, 400, "status")
        qs = qs.filter(status__in=wanted)
    return paged(request, qs, lambda job: serializers.job_summary(job, request))


@api_view("GET")
def job(request, job_id):
    found = _job_for(request, job_id, details=True)
    if found is None:
        return _no_job()
    return JsonResponse(serializers.job_detail(found, request))


def _rows_page(request, job_id, page_of, link_name) -> JsonResponse:
    """`{"results": [...], "next": url | null}`: `?after=<index>` (exclusive), `?limit=` (1..1000)."""
    found = _job_for(request, job_id)
    if found is None:
        return _no_job()
    try:
        after = whole_number(request, "after", -1, low=-1, high=MAX_OFFSET)
        limit = whole_number(request, "limit", serializers.DETAIL_ROWS, low=1, high=serializers.MAX_PAGE_ROWS)
    except BadParameter as exc:
        return error(exc.message, 400, exc.field)
    results, last = page_of(found, after, limit)
    nxt = serializers.page_link(link_name, found, last, request)
    if nxt is not None and limit != serializers.DETAIL_ROWS:
        nxt += f"&limit={limit}"
    return JsonResponse({"results": results, "next": nxt})


@api_view("GET")
def job_tasks(request, job_id):
    """A job's tasks in index order, a page at a time (the detail lists the first 100)."""
    return _rows_page(request, job_id, serializers.task_page, "api-job-tasks")


@api_view("GET")
def job_outputs(request, job_id):
    """A job's fetched outputs in index order, a page at a time (the detail lists the first 100)."""
    return _rows_page(request, job_id, lambda job, after, limit: serializers.output_page(job, request, after, limit),
                      "api-job-outputs")


@api_view("POST")
def job_cancel(request, job_id):
    """200 with the job (queued: cancelled at once; on the cluster: cancel requested); 409 when final."""
    found = _job_for(request, job_id, details=True)
    if found is None:
        return _no_job()
    if not request_cancel(found, actor=request.user, request=request):
        return error(_("This job is already %(status)s; there is nothing to cancel.")
                     % {"status": found.get_status_display()}, 409)
    return JsonResponse(serializers.job_detail(found, request))


@api_view("POST")
def job_retry(request, job_id):
    """202 with the job: its failed targets are resubmitted as a new attempt (jobs.job.retry).
    409 when nothing can be retried (still running, cancelled, or only own-reason failures)."""
    found = _job_for(request, job_id)
    if found is None:
        return _no_job()
    if not retry_failed(found, actor=request.user, request=request):
        return error(retry_refusal(found), 409)
    found = _job_for(request, job_id, details=True)
    return JsonResponse(serializers.job_detail(found, request), status=202)


@api_view("GET")
def job_results(request, job_id):
    """The job's outputs as one zip, streamed (never built whole in memory or on disk)."""
    found = _job_for(request, job_id)
    if found is None:
        return _no_job()
    if found.files_deleted_at:  # retention: 410 Gone in plain words, not an empty zip
        return error(files_gone_message(found), 410)
    response = stream_results_zip(found)
    record_download(request, found, "zip", via="api")
    return response


@api_view("GET")
def job_output(request, job_id, index):
    """One output file, for token-authenticated clients (the page route needs a browser login)."""
    found = _job_for(request, job_id)
    target = found.targets.filter(index=index).first() if found is not None else None
    if target is None:
        return _no_job()
    path = output_path(target)
    if path is None:
        return error(_("This output is not ready yet."), 404)
    response = serve_file(path, download_name(target), download=request.GET.get("download") == "1", request=request)
    record_download(request, found, "output", target=target, via="api")  # API clients fetch to keep
    return response


@api_view("GET")
def templates(request):
    """The templates the caller may start with: open to them, and used by one of their teams (a
    team's lead may choose its templates: Team.templates; Start checks the job's own team)."""
    teams = list(Team.objects.of(request.user))
    usable = Template.objects.usable_by(request.user).used_by(teams).select_related("cluster")
    return JsonResponse([serializers.template_card(t) for t in usable], safe=False)


@api_view("GET")
def folders(request):
    """`?path=` (none: the allowed roots), optional `?cluster=<slug>` when templates use several clusters."""
    profile = None
    slug = request.GET.get("cluster", "").strip()
    if slug:
        profile = ClusterProfile.objects.filter(slug=slug).first()
        if profile is None:
            return error(_("No such cluster."), 404, "cluster")
    try:
        listing = browse(request.user, request.GET.get("path", "").strip(), profile=profile)
    except BrowseError as exc:
        field = "path" if exc.status in (400, 403) else "cluster" if profile and exc.status == 404 else None
        return error(exc.message, exc.status, field)
    return JsonResponse(listing)


def not_found(request):
    """Any other path under /api/v1/: a JSON 404 rather than the site's HTML page."""
    return error(_("No such API endpoint: %(path)s. See %(docs)s.")
                 % {"path": request.path, "docs": "docs/api.md"}, 404)

