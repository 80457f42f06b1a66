"""Job pages: the list, a job's page, Cancel and Retry (New job: new_job.py; a target's results: results.py)."""
from __future__ import annotations

from uuid import UUID

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST, require_safe

from jobs.lifecycle import request_cancel
from jobs.retry import RETRYABLE_JOB_STATUSES, has_retryable_targets, retry_failed, retry_refusal
from jobs.live.view import View, page_of_job
from jobs.models import Job
from jobs.models.job import OK_TARGET_STATUSES
from jobs.web.views import get_job_for_user

JOBS_PER_PAGE = 50


@login_required
@require_safe
def job_list(request: HttpRequest) -> HttpResponse:
    jobs = Job.objects.visible_to(request.user).select_related("template", "owner").order_by("-created_at", "-pk")
    page = Paginator(jobs, JOBS_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "jobs/job_list.html", {"page": page, "show_owner": request.user.is_staff})


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
