"""One target's results page: its before and after, and the way to the job's other targets."""
from __future__ import annotations

from uuid import UUID

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_safe

from jobs.job import again
from jobs.models import Job, Target
from jobs.results.files import download_name, input_path, output_path
from jobs.results.self_check import ADVICE, target_self_check_words
from jobs.web.views import get_target_for_user
from worker.manifest import is_video_name


@login_required
@require_safe
def target_detail(request: HttpRequest, job_id: UUID, index: int) -> HttpResponse:
    """One target's before and after (a slider over one frame, or side by side), with previous and next."""
    target = get_target_for_user(request.user, job_id, index)
    job = target.job
    has_input, has_output = input_path(target) is not None, output_path(target) is not None
    context = {
        "job": job,
        "target": target,
        "has_input": has_input,
        "has_output": has_output,
        "can_compare": has_input and has_output,
        "is_video": is_video_name(target.output_name),
        "download_name": download_name(target),
        "sources": source_faces(job),
        "look": target_self_check_words(target),
        "look_advice": ADVICE,
        "look_again_url": again.look_again_url(job) if again.can_try_again(job) else "",
        **neighbours(target),
    }
    return render(request, "jobs/target_detail.html", context)


#: faces shown on a target's page (a job averages its face photos; a few say which person it was)
MAX_SOURCES_SHOWN = 6


def source_faces(job: Job) -> list[tuple[str, str]]:
    """(url, original name) of the face photos the job used, in the order they were uploaded; none
    while the portal has no page that serves them (`job-source`)."""
    names = job.sources.order_by("pk").values_list("original_name", flat=True)[:MAX_SOURCES_SHOWN]
    try:
        return [(reverse("job-source", args=[job.id, n]), name) for n, name in enumerate(names)]
    except NoReverseMatch:
        return []


def neighbours(target: Target) -> dict:
    """The targets before and after `target` in the job's order, and where it stands ("3 of 120").

    One query each way on the (job, index) unique index, whatever the job's size: a job of 100,000
    targets never loads them. Indexes are the manifest's positions, 0 to total - 1 (jobs.job.start,
    jobs.job.submit), so the position is the index + 1; the next/previous query still skips no target
    and steps over any gap.
    """
    siblings = Target.objects.filter(job_id=target.job_id).values_list("index", flat=True)
    previous = siblings.filter(index__lt=target.index).order_by("-index").first()
    following = siblings.filter(index__gt=target.index).order_by("index").first()
    position = target.index + 1
    return {
        "previous_index": previous,
        "next_index": following,
        "position": position,
        "count": max(target.job.total, position),
    }
