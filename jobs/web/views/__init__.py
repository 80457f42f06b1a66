"""The web pages. Every job and every file of a job is looked up through `get_job_for_user`:
someone else's job answers 404, never 403, so job ids do not leak."""
from __future__ import annotations

from django.http import Http404
from django.shortcuts import get_object_or_404

from jobs.models import Job, Target

__all__ = ["get_job_for_user", "get_target_for_user"]


def get_job_for_user(user, job_id) -> Job:
    """The job if `user` may see it (`Job.objects.visible_to`), else Http404."""
    return get_object_or_404(Job.objects.visible_to(user).select_related("template", "cluster", "owner"), pk=job_id)


def get_target_for_user(user, job_id, index: int) -> Target:
    job = get_job_for_user(user, job_id)
    target = job.targets.filter(index=index).first()
    if target is None:
        raise Http404("No such target")
    target.job = job  # already loaded and checked: no second query for target.job
    return target
