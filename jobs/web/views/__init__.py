"""The web pages. Every job and every file of a job is looked up through `get_job_for_user`:
someone else's job answers 404, never 403, so job ids do not leak. A team lead reaches their
team's jobs too (jobs.access); `own=True` is for what only the owner may do."""
from __future__ import annotations

from django.http import Http404
from django.shortcuts import get_object_or_404

from jobs.models import Job, Target

__all__ = ["get_job_for_user", "get_target_for_user"]


def get_job_for_user(user, job_id, own: bool = False) -> Job:
    """The job if `user` may see it (`Job.objects.visible_to`; with `own`, only if it is theirs), else Http404."""
    jobs = Job.objects.owned(user) if own else Job.objects.visible_to(user)
    return get_object_or_404(jobs.select_related("template", "cluster", "owner"), pk=job_id)


def get_target_for_user(user, job_id, index: int, own: bool = False) -> Target:
    job = get_job_for_user(user, job_id, own=own)
    target = job.targets.filter(index=index).first()
    if target is None:
        raise Http404("No such target")
    target.job = job  # already loaded and checked: no second query for target.job
    return target
