"""Job pages: the list, New job, a job's page, Cancel, and one target's before/after."""
from __future__ import annotations

from uuid import UUID

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from worker.manifest import VIDEO_EXTENSIONS

from jobs.lifecycle import request_cancel
from jobs.retry import RETRYABLE_JOB_STATUSES, has_retryable_targets, retry_failed, retry_refusal
from jobs.web.forms import NewJobForm
from jobs.live.view import View, page_of_job
from jobs.models import Job
from jobs.models.job import OK_TARGET_STATUSES
from jobs.quotas import quota_status
from jobs.results import input_path, output_path
from jobs.errors import StartError
from jobs.start import start_job
from jobs.web.views import get_job_for_user
from jobs.web.views import get_target_for_user

JOBS_PER_PAGE = 50


@login_required
@require_safe
def job_list(request: HttpRequest) -> HttpResponse:
    jobs = Job.objects.visible_to(request.user).select_related("template", "owner").order_by("-created_at", "-pk")
    page = Paginator(jobs, JOBS_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "jobs/job_list.html", {"page": page, "show_owner": request.user.is_staff})


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def job_new(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        form = NewJobForm(request.POST, request.FILES, user=request.user)
        if form.is_valid():
            data = form.cleaned_data
            try:
                job = start_job(user=request.user, template=data["template"], sources=data["source"],
                                target_folder=data["target_folder"].strip(), target_files=data["targets"],
                                consent=data["consent"], name=data["name"], request=request)
            except StartError as exc:
                form.add_error(exc.field if exc.field in form.fields else None, exc.message)
            else:
                messages.success(request, _("Job started. This page follows its progress."))
                return redirect("job-detail", job_id=job.id)
    else:
        form = NewJobForm(user=request.user, initial={"target_folder": request.GET.get("target_folder", "")})
        # The admin's first template (by their order) is the default choice.
        form.initial["template"] = form.fields["template"].queryset.values_list("pk", flat=True).first()
    # What the user has left, shown before Start (the Start itself checks again, under a lock).
    return render(request, "jobs/job_new.html", {"form": form, "files_dropped": bool(request.FILES),
                                                 "quota": quota_status(request.user)})


@login_required
@require_safe
def job_detail(request: HttpRequest, job_id: UUID) -> HttpResponse:
    job = get_job_for_user(request.user, job_id)
    # Only the rows in view, whatever the job's size (jobs/live/view.py); the live script asks the
    # WebSocket for the same view, so the page and its snapshots agree.
    context = {
        "job": job,
        **page_of_job(job, View.from_query(request.GET)),
        "progress": progress_of(job),
        "has_outputs": job.targets.filter(status__in=OK_TARGET_STATUSES).exclude(output_file="").exists(),
        "cluster_unreachable_since": job.cluster.unreachable_since if job.is_active else None,
        "template_name": job.snapshot.name,  # what it ran with, not the edited template
        "can_retry": can_retry(job),
        "attempts": job.attempts.all(),
    }
    return render(request, "jobs/job_detail.html", context)


@require_POST
@login_required
def job_cancel(request: HttpRequest, job_id: UUID) -> HttpResponse:
    job = get_job_for_user(request.user, job_id)
    if request_cancel(job, actor=request.user, request=request):
        messages.success(request, _("Cancel requested. Images already finished are kept."))
    else:
        messages.info(request, _("This job has already finished; there is nothing to cancel."))
    return redirect("job-detail", job_id=job.id)


@require_POST
@login_required
def job_retry(request: HttpRequest, job_id: UUID) -> HttpResponse:
    """Retry failed images: a new attempt over just the chunks holding them (jobs.retry)."""
    job = get_job_for_user(request.user, job_id)
    if retry_failed(job, actor=request.user, request=request):
        messages.success(request, _("Retrying the failed images. This page follows the new attempt."))
    else:
        messages.info(request, retry_refusal(job))
    return redirect("job-detail", job_id=job.id)


@login_required
@require_safe
def target_detail(request: HttpRequest, job_id: UUID, index: int) -> HttpResponse:
    """One target's before and after, side by side."""
    target = get_target_for_user(request.user, job_id, index)
    context = {
        "job": target.job,
        "target": target,
        "has_input": input_path(target) is not None,
        "has_output": output_path(target) is not None,
        "is_video": target.output_name.lower().endswith(VIDEO_EXTENSIONS),
    }
    return render(request, "jobs/target_detail.html", context)


def can_retry(job: Job) -> bool:
    """Whether the Retry button is offered: an ended job with an image that failed because its task
    died (one EXISTS query, however many targets the job has)."""
    return job.status in RETRYABLE_JOB_STATUSES and has_retryable_targets(job)


def progress_of(job: Job) -> dict:
    """Done / failed / left, and the bar's widths in whole percent."""
    total = job.total
    finished = job.done + job.failed
    return {
        "total": total, "done": job.done, "failed": job.failed, "left": max(total - finished, 0),
        "done_pct": round(100 * job.done / total) if total else 0,
        "failed_pct": round(100 * job.failed / total) if total else 0,
        "pct": round(100 * finished / total) if total else 0,
    }
