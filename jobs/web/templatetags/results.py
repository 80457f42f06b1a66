"""Results in lists: `{% load results %}`.

`{% first_results page.object_list as firsts %}` then `{{ firsts|index_of:job.id }}`: for every job
on a page, the index of its first finished target that has a thumbnail, in ONE query whatever the
number of jobs or targets (a job list must not ask once per row).
"""
from __future__ import annotations

from django import template
from django.db.models import OuterRef, Subquery

from jobs.models import Job, Target
from jobs.models.job import OK_TARGET_STATUSES
from jobs.results.self_check import target_self_check_words

register = template.Library()


def first_result_indexes(job_ids) -> dict:
    """{job id: index of its first finished target with a thumbnail} for the jobs that have one.

    One query: a subquery per job row that walks the job's targets in index order (the
    (job, index) unique index) and stops at the first match, so a job of 100,000 targets costs
    as little as a job of three.
    """
    ids = list(job_ids)
    if not ids:
        return {}
    first = (Target.objects.filter(job_id=OuterRef("pk"), status__in=OK_TARGET_STATUSES).exclude(thumbnail_file="")
             .order_by("index").values("index")[:1])
    rows = Job.objects.filter(pk__in=ids).order_by().annotate(first=Subquery(first)).values_list("pk", "first")
    return {pk: index for pk, index in rows if index is not None}


@register.simple_tag
def first_results(jobs) -> dict:
    return first_result_indexes(job.pk for job in jobs)


@register.filter
def index_of(firsts: dict, job_id):
    """The job's first result index from `first_results`, or None (the row shows a placeholder)."""
    return firsts.get(job_id)


@register.filter
def look_words(target: Target) -> str:
    """What the worker's own look found wrong with a result ("" when nothing): jobs.results.self_check."""
    return target_self_check_words(target)
