"""A big job's page, snapshot and live.json carry counts and the rows in view, never the whole job.

A 100,000-image job must be as quick to watch as a 10-image one: these tests pin what makes it so
(the rows in view, a constant number of queries, a snapshot far below 64 KB) and what the user sees
(the task summary, filters and pages that keep each other's place).
"""
from __future__ import annotations

import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from jobs.job.retry import has_retryable_targets, is_retryable
from jobs.live.protocol import Publisher, job_snapshot
from jobs.live.view import TARGETS_PER_PAGE, TASKS_PER_PAGE, View, task_summary
from jobs.models import JobStatus, Target, TargetStatus, Task
from jobs.web.views.pages import can_retry
from tests.jobs.test_consumers import connect, run_async
from tests.jobs.test_pages_jobs import make_job

#: a long, non-Latin name: the snapshot's size is bounded for names people really use
LONG_NAME = "婚礼/第二天/" + "海边的日落照片-" * 12


def big_job(owner, template, targets: int, tasks: int, *, failed_every: int = 0, running_tasks: int = 2):
    """A running job with `targets` targets spread over `tasks` tasks (rows made directly)."""
    job = make_job(owner, template, status=JobStatus.RUNNING, slurm_job_id="777", total=targets)
    per_task = max(1, targets // tasks)
    rows = []
    for i in range(targets):
        if failed_every and i % failed_every == 0:
            status = TargetStatus.FAILED
        elif i >= targets - 10:
            status = TargetStatus.WAITING
        else:
            status = TargetStatus.DONE
        rows.append(Target(job=job, index=i, name=f"{LONG_NAME}{i:06d}.jpg", output_name=f"{i:06d}.jpg",
                           task_index=min(i // per_task, tasks - 1), status=status,
                           message="The image could not be read. " * 20 if status == TargetStatus.FAILED else ""))
    Target.objects.bulk_create(rows, batch_size=2000)
    Task.objects.bulk_create([Task(job=job, index=i, state="RUNNING" if i >= tasks - running_tasks else "COMPLETED")
                              for i in range(tasks)], batch_size=2000)
    job.recount()  # done / failed as the watcher keeps them
    job.refresh_from_db()
    return job


@pytest.fixture
def small(owner, template):
    return big_job(owner, template, targets=100, tasks=10)


@pytest.fixture
def huge(owner, template):
    return big_job(owner, template, targets=5_000, tasks=1_000, failed_every=37)


def test_a_snapshot_holds_counts_and_the_rows_in_view_only(huge):
    snap = job_snapshot(huge)
    assert len(snap["targets"]) == TARGETS_PER_PAGE and len(snap["tasks"]) == TASKS_PER_PAGE
    assert [t["index"] for t in snap["targets"]] == list(range(TARGETS_PER_PAGE))
    assert snap["task_summary"] == {"total": 1000, "groups": {"done": 998, "running": 2, "waiting": 0,
                                                              "failed": 0, "cancelled": 0}}
    assert snap["view"]["targets"] == {"show": "all", "page": 1, "pages": -(-5_000 // TARGETS_PER_PAGE),
                                       "per_page": TARGETS_PER_PAGE, "matching": 5_000}
    assert snap["job"]["progress"] == {"total": 5_000, "done": huge.done, "failed": huge.failed, "needs_look": 0}
    size = len(json.dumps(snap).encode())
    assert size < 64 * 1024, size


def warm_the_templates_pace(job) -> None:
    """The template's measured pace costs two queries once a minute per process (jobs.job.expected), not
    per job: it is read before the jobs are compared."""
    from jobs.job.expected import seconds_per_photo
    seconds_per_photo(job)


def test_the_snapshot_costs_the_same_queries_at_any_size(small, huge):
    warm_the_templates_pace(small)
    counts = []
    for job in (small, huge):
        with CaptureQueriesContext(connection) as ctx:
            job_snapshot(job, View(show="failed", page=2, tasks="running"))
        counts.append(len(ctx.captured_queries))
    assert counts[0] == counts[1] <= 6


def test_a_filter_and_a_page_pick_the_right_rows(huge):
    failed = list(Target.objects.filter(job=huge, status=TargetStatus.FAILED).values_list("index", flat=True))
    snap = job_snapshot(huge, View(show="failed", page=2, tasks="running"))
    assert [t["index"] for t in snap["targets"]] == failed[TARGETS_PER_PAGE:2 * TARGETS_PER_PAGE]
    assert all(t["status"] == "failed" for t in snap["targets"])
    assert all(len(t["message"]) <= 160 for t in snap["targets"])  # cut as the page shows it
    assert [t["index"] for t in snap["tasks"]] == [998, 999]
    assert snap["view"]["targets"]["matching"] == len(failed) == huge.failed


def test_odd_views_fall_back_instead_of_failing(huge):
    view = View.from_query({"show": "everything", "page": "-3", "tasks": "'; drop", "tasks_page": "x"})
    assert view == View()
    # past the last page: the last page, not an empty one
    snap = job_snapshot(huge, View(page=10**6))
    last = snap["view"]["targets"]["pages"]
    assert snap["view"]["targets"]["page"] == last and snap["targets"][-1]["index"] == 4_999


def test_the_job_page_shows_a_task_summary_filters_and_pages(client, owner, huge):
    client.force_login(owner)
    r = client.get(reverse("job-detail", args=[huge.id]) + "?tasks=running&page=3")
    body = r.content.decode()
    summary = re.sub(r"<[^>]+>", "", re.search(r'id="task-summary"[^>]*>(.*?)</p>', body, re.S).group(1))
    assert " ".join(summary.split()) == "1,000 tasks: 998 done, 2 running"
    assert body.count('<tr data-task-index=') == 2  # running only
    assert body.count('<li class="target ') == TARGETS_PER_PAGE
    assert f'data-target-index="{2 * TARGETS_PER_PAGE}"' in body  # page 3 starts after two pages
    # the filters keep the other list's place, and the live connection asks for this very view
    assert 'href="?show=failed&amp;tasks=running#targets"' in body
    assert 'href="?page=3#tasks"' in body  # "All tasks" keeps the photos on page 3
    assert f'data-ws-path="/ws/jobs/{huge.id}/?page=3&amp;tasks=running"' in body
    assert "Page 3 of 105" in body


def test_the_job_page_costs_the_same_queries_at_any_size(client, owner, small, huge):
    client.force_login(owner)
    warm_the_templates_pace(small)
    counts = []
    for job in (small, huge):
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(reverse("job-detail", args=[job.id])).status_code == 200
        counts.append(len(ctx.captured_queries))
    assert counts[0] == counts[1]


def test_live_json_answers_the_view_it_is_asked_for(client, owner, huge):
    client.force_login(owner)
    snap = client.get(reverse("job-live", args=[huge.id]) + "?show=todo").json()
    todo = Target.objects.filter(job=huge, status=TargetStatus.WAITING).values_list("index", flat=True)
    assert [t["index"] for t in snap["targets"]] == list(todo) and 5 <= len(todo) <= 10
    assert snap["view"]["targets"]["show"] == "todo"


@pytest.mark.django_db(transaction=True)
def test_the_websocket_keeps_the_view_of_its_address(owner, template):
    _websocket_keeps_its_view(owner, big_job(owner, template, targets=300, tasks=30, failed_every=7))


@run_async
async def _websocket_keeps_its_view(owner, job):
    comm = await connect(f"/ws/jobs/{job.id}/?show=failed&tasks=running", owner)
    first = await comm.receive_json_from()
    assert {t["status"] for t in first["targets"]} == {"failed"} and len(first["tasks"]) == 2
    await comm.send_json_to({"type": "resync"})
    again = await comm.receive_json_from()
    assert again["view"] == first["view"]
    await comm.disconnect()


def test_a_job_event_carries_the_task_summary(huge):
    pub = Publisher()
    pub.job(huge)
    (_group, msg), *_ = pub.messages
    assert msg["task_summary"] == task_summary(huge)


@pytest.mark.parametrize("status,failed_with_task,expected", [
    # the user's Retry takes own failures too (a damaged file, after Replace file) and cancelled ones
    (TargetStatus.DONE, False, False), (TargetStatus.FAILED, False, True), (TargetStatus.FAILED, True, True),
    (TargetStatus.WAITING, False, True), (TargetStatus.RUNNING, False, True), (TargetStatus.NO_FACE, False, False),
    (TargetStatus.CANCELLED, False, True),
])
def test_retry_is_offered_exactly_when_a_target_is_retryable(owner, template, status, failed_with_task, expected):
    job = make_job(owner, template, status=JobStatus.PARTIALLY_FAILED, total=2)
    Target.objects.create(job=job, index=0, name="a.jpg", output_name="a.jpg", status=TargetStatus.DONE)
    t = Target.objects.create(job=job, index=1, name="b.jpg", output_name="b.jpg", status=status,
                              failed_with_task=failed_with_task)
    assert is_retryable(t) is expected
    assert has_retryable_targets(job) is expected and can_retry(job) is expected
