"""Job pages: the list, a job's page, Cancel, Retry and Replace file (New job: new_job.py; a target's
results: results.py; the face photos used: sources.py)."""
from __future__ import annotations

from uuid import UUID

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_POST, require_safe

from jobs.errors import UploadRejected
from jobs.job import again
from jobs.job.lifecycle import request_cancel
from jobs.job.retry import (
    REPLACEABLE,
    RETRYABLE_JOB_STATUSES,
    has_retryable_targets,
    replace_file,
    retry_failed,
    retry_refusal,
)
from jobs.live.view import View, page_of_job
from jobs.models import Job, JobStatus, Target, TargetStatus
from jobs.models.job import OK_TARGET_STATUSES
from jobs.web.views import get_job_for_user, get_target_for_user
from jobs.web.views.sources import job_sources

JOBS_PER_PAGE = 50
#: the extra tag of New job's "Job started." message (jobs/web/views/new_job.py)
JOB_STARTED_TAG = "job-started"


@login_required
@require_safe
def job_list(request: HttpRequest) -> HttpResponse:
    jobs = Job.objects.owned(request.user).select_related("template").order_by("-created_at", "-pk")
    page = Paginator(jobs, JOBS_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "jobs/job_list.html", {"page": page})


@login_required
@require_safe
def job_detail(request: HttpRequest, job_id: UUID) -> HttpResponse:
    job = get_job_for_user(request.user, job_id)
    if not job.is_active:
        drop_start_message(request)  # "Job started." above a job that already ended would be false
    # Only the rows in view, whatever the job's size (jobs/live/view.py); the live script asks the
    # WebSocket for the same view, so the page and its snapshots agree.
    context = {
        "job": job,
        **page_of_job(job, View.from_query(request.GET)),
        "progress": progress_of(job),
        "has_outputs": job.targets.filter(status__in=OK_TARGET_STATUSES).exclude(output_file="").exists(),
        "cluster_unreachable_since": job.cluster.unreachable_since if job.is_active else None,
        "template_name": job.snapshot.shown_name,  # what it ran with, not the edited template
        "can_retry": can_retry(job),
        # A team lead reaches a member's job (jobs.access) but deletes and replaces nothing of it
        "is_owner": job.owner_id == request.user.pk,
        "can_replace": job.is_final and job.owner_id == request.user.pk,
        "replaceable": [str(s) for s in REPLACEABLE],
        "run_again_url": f"{reverse('job-new')}?again={job.id}",
        "look_again_url": again.look_again_url(job),
        "look_again_now": again.can_try_again(job),
        "look_again_later": job.is_active and not job.is_preview,  # shown by the live script if it ends flagged
        "sources": job_sources(job),
        "attempts": job.attempts.all(),
    }
    return render(request, "jobs/job_detail.html", context)


def drop_start_message(request: HttpRequest) -> None:
    """Remove New job's "Job started." from this request's messages; any other message stays."""
    storage = messages.get_messages(request)
    kept = [m for m in storage if JOB_STARTED_TAG not in (m.extra_tags or "").split()]  # reading spends them all
    storage._loaded_messages.clear()
    for m in kept:  # the others are queued again: this page shows them
        messages.add_message(request, m.level, m.message, extra_tags=m.extra_tags)


@require_POST
@login_required
def job_cancel(request: HttpRequest, job_id: UUID) -> HttpResponse:
    job = get_job_for_user(request.user, job_id)
    if request_cancel(job, actor=request.user, request=request):
        messages.success(request, _("Cancel requested. Photos and videos already finished are kept."))
    else:
        messages.info(request, _("This job has already finished; there is nothing to cancel."))
    return redirect("job-detail", job_id=job.id)


@require_POST
@login_required
def job_retry(request: HttpRequest, job_id: UUID) -> HttpResponse:
    """Retry what did not finish: a new attempt over just the chunks holding it (jobs.job.retry)."""
    job = get_job_for_user(request.user, job_id)
    if retry_failed(job, actor=request.user, request=request):
        messages.success(request, _("Retrying the photos and videos that did not finish. This page follows the new "
                                    "attempt."))
    else:
        messages.info(request, retry_refusal(job))
    return redirect("job-detail", job_id=job.id)


@require_POST
@login_required
def target_replace(request: HttpRequest, job_id: UUID, index: int) -> HttpResponse:
    """Replace file: the new file of a failed or cancelled target, read by the next Retry (jobs.job.retry)."""
    target = get_target_for_user(request.user, job_id, index, own=True)
    if "file" not in request.FILES:
        messages.error(request, _("Choose the file to use instead."))
    else:
        try:
            replace_file(target, request.FILES["file"], actor=request.user, request=request)
        except UploadRejected as exc:
            messages.error(request, _("%(name)s was not replaced: %(why)s") % {"name": target.name, "why": exc.message})
        else:
            messages.success(request, _("%(name)s will be read from the new file. Use Retry to process it.")
                             % {"name": target.name})
    return redirect(reverse("job-detail", args=[target.job.id]) + f"#target-{target.index}")


def can_retry(job: Job) -> bool:
    """Whether the Retry button is offered: an ended job with something not done (one EXISTS query,
    however many targets the job has)."""
    return job.status in RETRYABLE_JOB_STATUSES and has_retryable_targets(job)


def media_words(job: Job) -> str:
    """"8 photos", "2 videos" or "10 (8 photos and 2 videos)": the job's targets by kind, from the
    counts kept on the job (no query); "" before they are known."""
    if not job.total:
        return ""
    videos = job.videos
    photos = max(job.total - videos, 0)
    photo_words = ngettext("%(n)s photo", "%(n)s photos", photos) % {"n": f"{photos:,}"}
    video_words = ngettext("%(n)s video", "%(n)s videos", videos) % {"n": f"{videos:,}"}
    if not videos:
        return photo_words
    if not photos:
        return video_words
    # "11 (10 photos and 1 video)": in "10 of 10 photos and 1 video done" the 10 reads as the photos'
    # alone, as if the video were done too.
    return _("%(total)s (%(photos)s and %(videos)s)") % {"total": f"{job.total:,}", "photos": photo_words,
                                                         "videos": video_words}


def progress_of(job: Job) -> dict:
    """Done / failed / left, and the bar's widths in whole percent.

    A running video counts as the share of its frames done, so a one-video job's bar moves with
    its frames (static/js/live/format.js `progressPct` is the live twin). Only running videos'
    rows are read (the `target_job_status` index), never every target. In an ended job, what is
    neither done nor failed was stopped: "cancelled" (a cancelled job) or "not done" (any other).
    """
    total = job.total
    finished = job.done + job.failed
    running = job.targets.filter(status=TargetStatus.RUNNING, frames_done__gt=0, frames_total__gt=0) \
        if job.is_active and total else Target.objects.none()
    frames = [{"done": d, "total": t} for d, t in running.values_list("frames_done", "frames_total")]
    left = max(total - finished, 0)
    stopped = left if job.is_final else 0
    return {
        "total": total, "done": job.done, "failed": job.failed, "left": left,
        **progress_pct(job.done, job.failed, total, frames),
        "cancelled": stopped if job.status == JobStatus.CANCELLED else 0,
        "not_done": stopped if job.status != JobStatus.CANCELLED else 0,
        "total_words": media_words(job),
    }


def progress_pct(done: int, failed: int, total: int, frames: list[dict]) -> dict:
    """The bar's widths and the percentage: each running video adds its share of frames done
    (at most just under one whole target, so a video is 100 % only once it is done)."""
    if not total:
        return {"done_pct": 0, "failed_pct": 0, "pct": 0}
    share = sum(min(f["done"] / f["total"], 0.99) for f in frames if f.get("total"))
    return {
        "done_pct": round(100 * (done + share) / total),
        "failed_pct": round(100 * failed / total),
        "pct": min(round(100 * (done + failed + share) / total), 100),
    }
