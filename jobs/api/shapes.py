"""Jobs and templates as plain JSON-ready dicts: the shapes of the JSON API (DESIGN.md, stable).

Pure functions of model instances, so the API and the job page's WebSocket snapshot send the same
thing. They never query on their own beyond the relations named here: fetch jobs through
`with_details()` before calling `job_detail` on many of them.
"""
from __future__ import annotations

from django.conf import settings
from django.db.models import QuerySet
from django.urls import reverse

from jobs.models import Job, Template


def absolute(path: str, request=None) -> str:
    """An absolute URL: from the request when there is one, else from SITE_URL (WebSocket, email)."""
    return request.build_absolute_uri(path) if request is not None else f"{settings.SITE_URL}{path}"


def with_details(jobs: QuerySet) -> QuerySet:
    """The prefetches `job_detail` reads: two queries for any number of jobs."""
    return jobs.prefetch_related("tasks", "targets", "attempts")


def job_summary(job: Job, request=None) -> dict:
    """`{"id", "name", "status", "template", "slurm_job_id", "progress", "error"}`: the list's items."""
    return {
        "id": str(job.id),
        "name": job.name,
        "status": job.status,
        "template": job.snapshot.slug,
        "slurm_job_id": job.slurm_job_id,
        "progress": {"total": job.total, "done": job.done, "failed": job.failed},
        "error": job.error,
    }


def job_detail(job: Job, request=None) -> dict:
    """The summary plus `tasks` (Slurm array indexes), `outputs` (fetched results, with URLs) and
    `attempt` / `attempts` (1 / [] until the job is retried: jobs.retry)."""
    body = job_summary(job, request)
    # Same key order as DESIGN.md lists them: error last.
    error = body.pop("error")
    body["tasks"] = [
        {"index": t.index, "status": t.state, "node": t.node, "exit_code": t.exit_code, "reason": t.reason}
        for t in job.tasks.all()
    ]
    # Filtered here, not in the query, so that one prefetch of "targets" serves every caller.
    body["outputs"] = [
        {"name": t.output_name, "url": absolute(reverse("api-job-output", args=[job.id, t.index]), request)}
        for t in job.targets.all() if t.output_file
    ]
    body["attempt"] = job.attempt
    body["attempts"] = [{"attempt": a.number, "slurm_job_id": a.slurm_job_id, "array": a.array, "mem": a.mem,
                         "why": a.why, "auto": a.auto, "at": a.at.isoformat(), "ended": a.ended}
                        for a in job.attempts.all()]
    body["error"] = error
    return body


def job_created(job: Job, request=None) -> dict:
    """The answer to `POST /api/v1/jobs`: `{"id", "status", "url"}` (url: the job in the API)."""
    return {"id": str(job.id), "status": job.status, "url": absolute(reverse("api-job", args=[job.id]), request)}


def template_card(template: Template) -> dict:
    """A template as `GET /api/v1/templates` lists it (`cluster`: the value `?cluster=` of folders takes)."""
    return {
        "slug": template.slug,
        "name": template.name,
        "description": template.description,
        "cluster": template.cluster.slug,
        "partition": template.partition,
        "gres": template.gres,
        "time_limit": template.time_limit,
        "chunk_size": template.chunk_size,
        "engine": template.engine,
    }
