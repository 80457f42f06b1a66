"""Jobs, tasks, targets and templates as plain JSON-ready dicts: ONE set of shapes.

The JSON API (a stable contract: docs/api.md) sends `job_summary` / `job_detail`; the live pages (WebSocket
messages and live.json, jobs/live/protocol.py) send `live_job` / `live_task` / `live_target`,
which are the API's shapes plus what a page shows and the API does not (labels in the reader's
language, page links, times). So a job reads the same wherever it is read. Domain code, not a
layer: the API (jobs.api) and the live messages (jobs.live.protocol) both import it.

Pure functions of model instances. They never query on their own beyond the relations named here:
fetch jobs through `with_details()` before calling `job_detail` on many of them.
"""
from __future__ import annotations

import functools

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db.models import QuerySet
from django.urls import get_script_prefix, reverse
from django.utils.text import Truncator

from jobs.job.expected import expected_finish, when_words
from jobs.models import Job, Target, Task, Template
from jobs.results.self_check import target_self_check_words


@functools.lru_cache(maxsize=1024)
def _index_url_prefix(name: str, job_id: str, script_prefix: str) -> str:
    base = reverse(name, args=[job_id, 0])
    if not base.endswith("/0"):  # a route whose index is not its last part: say so at once
        raise ImproperlyConfigured(f"URL {name!r} does not end with the target's index")
    return base[:-1]


def target_url(name: str, job_id, index: int) -> str:
    """`reverse(name, args=[job_id, index])` for the URLs that end with a target's index, at the
    cost of one reverse per job (a reverse costs ~0.1 ms; a page of 48 targets made 144 of them,
    most of a snapshot's time)."""
    return f"{_index_url_prefix(name, str(job_id), get_script_prefix())}{index}"


def absolute(path: str, request=None) -> str:
    """An absolute URL: from the request when there is one, else from SITE_URL (WebSocket, email)."""
    return request.build_absolute_uri(path) if request is not None else f"{settings.SITE_URL}{path}"


#: tasks and outputs a job's detail lists at most; the rest are a `*_next` link away (keyset pages
#: by index), so a 100,000-image job's detail is as small and quick as a 100-image one's
DETAIL_ROWS = 100
#: the most a page of `/tasks` or `/outputs` may ask for
MAX_PAGE_ROWS = 1000


def with_details(jobs: QuerySet) -> QuerySet:
    """The prefetch `job_detail` reads besides its two bounded lists."""
    return jobs.select_related("owner").prefetch_related("attempts")


def task_page(job: Job, after: int = -1, limit: int = DETAIL_ROWS) -> tuple[list[dict], int | None]:
    """Tasks with an index above `after`, in order: (at most `limit` shapes, the index to continue
    after, or None at the end). One indexed range query, however deep the page."""
    rows = list(job.tasks.filter(index__gt=after).order_by("index")[:limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return [task_shape(t) for t in rows], (rows[-1].index if more else None)


def output_page(job: Job, request=None, after: int = -1, limit: int = DETAIL_ROWS) -> tuple[list[dict], int | None]:
    """Fetched outputs with a target index above `after`, as `task_page`."""
    rows = list(job.targets.filter(index__gt=after).exclude(output_file="").order_by("index")
                .only("job", "index", "output_name", "output_file")[:limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return ([{"name": t.output_name, "url": absolute(target_url("api-job-output", job.id, t.index), request)}
             for t in rows], (rows[-1].index if more else None))


def page_link(name: str, job: Job, after: int | None, request=None) -> str | None:
    """The URL of the next page of `/tasks` or `/outputs` (name: api-job-tasks / api-job-outputs)."""
    if after is None:
        return None
    return absolute(f"{reverse(name, args=[job.id])}?after={after}", request)


def _iso(dt) -> str | None:
    return dt.isoformat() if dt else None


def job_summary(job: Job, request=None) -> dict:
    """`{"id", "name", "status", "template", "team", "owner", "slurm_job_id", "progress", "error"}`: the
    list's items. `team`: the Slurm account of the team it runs for ("" when none); `owner`: whose job
    it is (a team lead sees their team's jobs too)."""
    return {
        "id": str(job.id),
        "name": job.name,
        "status": job.status,
        "template": job.snapshot.slug,
        "team": job.slurm_account,
        "owner": job.owner.get_username(),
        "slurm_job_id": job.slurm_job_id,
        "progress": {"total": job.total, "done": job.done, "failed": job.failed, "needs_look": job.needs_look},
        "error": job.error,
    }


def job_detail(job: Job, request=None) -> dict:
    """The summary plus `tasks` (Slurm array indexes), `outputs` (fetched results, with URLs) and
    `attempt` / `attempts` (1 / [] until the job is retried: jobs.job.retry).

    `tasks` and `outputs` hold the first DETAIL_ROWS; `tasks_next` / `outputs_next` link to the
    rest (null when there is none), so the answer's size does not grow with the job."""
    body = job_summary(job, request)
    # Same key order as docs/api.md lists them: error last.
    error = body.pop("error")
    body["tasks"], after_task = task_page(job)
    body["outputs"], after_output = output_page(job, request)
    body["tasks_next"] = page_link("api-job-tasks", job, after_task, request)
    body["outputs_next"] = page_link("api-job-outputs", job, after_output, request)
    body["attempt"] = job.attempt
    # Slurm's estimate of the start (a waiting job) and the finish at the template's pace (jobs.job.expected)
    body["expected_start"], body["expected_finish"] = _iso(job.expected_start), _iso(expected_finish(job))
    body["models"] = [{"name": m["name"], "sha256": m["sha256"]} for m in job.models_used or []]  # jobs.job.model_sets
    body["container_image"] = dict(job.container_image_used) or None  # jobs.job.container: {"image", "sha256"}
    body["attempts"] = [{"attempt": a.number, "slurm_job_id": a.slurm_job_id, "array": a.array, "mem": a.mem,
                         "why": a.why, "auto": a.auto, "at": a.at.isoformat(), "ended": a.ended}
                        for a in job.attempts.all()]
    body["files_deleted_at"] = _iso(job.files_deleted_at)  # retention: set, the files are gone (jobs.results.retention)
    body["error"] = error
    return body


def task_shape(task: Task) -> dict:
    """`{"index", "status", "node", "exit_code", "reason"}`: one array task, its state as Slurm's."""
    return {"index": task.index, "status": task.state, "node": task.node, "exit_code": task.exit_code,
            "reason": task.reason}


def job_created(job: Job, request=None) -> dict:
    """The answer to `POST /api/v1/jobs`: `{"id", "status", "url"}` (url: the job in the API)."""
    return {"id": str(job.id), "status": job.status, "url": absolute(reverse("api-job", args=[job.id]), request)}


def template_card(template: Template) -> dict:
    """A template as `GET /api/v1/templates` lists it (`cluster`: the value `?cluster=` of folders takes).
    `name` and `description` are the admin's English, whatever the request's language; `name_zh` and
    `description_zh` the Chinese ones ("" when the admin wrote none: a client falls back to English)."""
    return {
        "slug": template.slug,
        "name": template.name,
        "name_zh": template.name_zh,
        "description": template.description,
        "description_zh": template.description_zh,
        "cluster": template.cluster.slug,
        "partition": template.partition,
        "gres": template.gres,
        "time_limit": template.time_limit,
        "chunk_size": template.chunk_size,
        "engine": template.engine,
    }


#: a target's message as the job page shows it (`truncatechars:160` in templates/jobs/job_detail.html)
MESSAGE_CHARS = 160


# ---- what the live pages get besides -----------------------------------------------------------

def live_job(job: Job) -> dict:
    """The API's summary, plus the page's extras: the status in words, the owner, the template's
    name, times and the job page's link."""
    return {
        **job_summary(job),
        "status_label": job.get_status_display(), "owner": job.owner.get_username(),
        "cancel_requested": job.cancel_requested, "template_name": job.snapshot.name_in(job.language or None),  # its owner's language: the watcher pushes these too
        "created_at": _iso(job.created_at), "started_at": _iso(job.started_at), "finished_at": _iso(job.finished_at),
        "url": reverse("job-detail", args=[job.id]),
        "expected_start": _iso(job.expected_start), "expected_finish": _iso(expected_finish(job)),
        "when": when_words(job),
    }


def live_task(task: Task) -> dict:
    """The API's task, plus its run time."""
    return {**task_shape(task), "elapsed_seconds": task.elapsed_seconds}


def live_target(target: Target) -> dict:
    """One target as the job page's grid shows it (the API lists only finished outputs)."""
    job_id = target.job_id
    return {
        "index": target.index, "name": target.name, "status": target.status,
        # cut as the page shows it (the target's own page has it whole): a snapshot stays small
        "status_label": target.get_status_display(), "message": Truncator(target.message).chars(MESSAGE_CHARS),
        "faces_found": target.faces_found, "faces_swapped": target.faces_swapped, "seconds": target.seconds,
        "frames": target.frames_in_progress(),
        "task_index": target.task_index,
        # the worker's own look at the result: "" when it took (jobs.results.self_check)
        "self_check": target.self_check, "self_check_words": target_self_check_words(target),
        "output_url": target_url("job-output", job_id, target.index) if target.output_file else None,
        "thumb_url": target_url("job-thumb", job_id, target.index) if target.thumbnail_file else None,
        "page_url": target_url("job-target", job_id, target.index),
    }
