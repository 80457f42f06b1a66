"""One target's results page: its before and after."""
from __future__ import annotations

from uuid import UUID

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from worker.manifest import VIDEO_EXTENSIONS

from jobs.results import input_path, output_path
from jobs.web.views import get_target_for_user


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
