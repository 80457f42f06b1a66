"""The live pages' fallback: the same snapshots the WebSockets send, as plain JSON over HTTP.

static/js/live/ polls these when a WebSocket cannot connect (a proxy that drops upgrades, a
flaky network). They are built by `jobs.live.protocol` from the database, exactly like the consumers' first
message, and looked up like every page: someone else's job answers 404.
"""
from __future__ import annotations

from uuid import UUID

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from jobs.live.protocol import job_snapshot, jobs_snapshot
from jobs.live.view import View
from jobs.web.views import get_job_for_user


@login_required
@require_safe
@never_cache
def job_live(request: HttpRequest, job_id: UUID) -> JsonResponse:
    """`{"type": "snapshot", "job", "task_summary", "tasks", "targets", "view", "cluster"}` of one
    job: the rows in the view its query string names (jobs/live/view.py), as the WebSocket sends."""
    return JsonResponse(job_snapshot(get_job_for_user(request.user, job_id), View.from_query(request.GET)))


@login_required
@require_safe
@never_cache
def jobs_live(request: HttpRequest) -> JsonResponse:
    """`{"type": "snapshot", "jobs": [...]}`: the jobs the user's list shows (newest first)."""
    return JsonResponse(jobs_snapshot(request.user))
