"""GET /api/v1/jobs and GET /api/v1/jobs/<id>: the shapes docs/api.md promises, paging, no N+1."""
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from jobs.models import Job, JobStatus, Target, Task

from .api_helpers import DETAIL_KEYS, SUMMARY_KEYS, make_job, session_client, token_client


@pytest.fixture
def api(owner):
    return token_client(owner)[0]


def test_it_shows_a_job_in_exactly_the_documented_shape(api, owner, template):
    job = make_job(owner, template, name="Shoot", status=JobStatus.RUNNING, targets=3, tasks=2)
    Job.objects.filter(pk=job.pk).update(slurm_job_id="4242", done=1, failed=1)
    Task.objects.filter(job=job, index=1).update(state="OUT_OF_MEMORY", node="gpu01", exit_code=137,
                                                 reason="The task ran out of memory.")
    Target.objects.filter(job=job, index=2).update(output_file="/media/users/1/out/002.jpg")

    r = api.get(f"/api/v1/jobs/{job.id}")
    assert r.status_code == 200
    body = r.json()
    assert set(body) == DETAIL_KEYS
    assert body["id"] == str(job.id)
    assert body["name"] == "Shoot"
    assert body["status"] == "running"
    assert body["template"] == "quick-gpu"
    assert body["slurm_job_id"] == "4242"
    assert body["progress"] == {"total": 3, "done": 1, "failed": 1, "needs_look": 0}
    assert body["tasks"] == [
        {"index": 0, "status": "PENDING", "node": "", "exit_code": None, "reason": ""},
        {"index": 1, "status": "OUT_OF_MEMORY", "node": "gpu01", "exit_code": 137, "reason": "The task ran out of memory."},
    ]
    assert body["outputs"] == [
        {"name": "002.jpg", "url": "http://testserver" + reverse("api-job-output", args=[job.id, 2])},
    ]
    assert body["error"] == ""


def test_it_takes_the_template_from_the_snapshot(api, owner, template):
    job = make_job(owner, template)
    template.delete()  # the job keeps what it ran with
    assert api.get(f"/api/v1/jobs/{job.id}").json()["template"] == "quick-gpu"


@pytest.mark.parametrize("path", ["/api/v1/jobs/not-a-uuid", f"/api/v1/jobs/{uuid.uuid4()}",
                                  "/api/v1/jobs/123/cancel", "/api/v1/nothing-here"])
def test_it_answers_404_in_json_for_unknown_ids_and_paths(api, path):
    r = api.get(path)
    assert r.status_code == 404
    assert r["Content-Type"] == "application/json"
    assert r.json()["error"]


def test_it_lists_the_users_jobs_newest_first(api, owner, colleague, template):
    now = timezone.now()
    old = make_job(owner, template, name="old")
    new = make_job(owner, template, name="new")
    make_job(colleague, template, name="not mine")
    Job.objects.filter(pk=old.pk).update(created_at=now - timedelta(hours=1))
    Job.objects.filter(pk=new.pk).update(created_at=now)

    body = api.get("/api/v1/jobs").json()
    assert body["count"] == 2 and body["next"] is None and body["previous"] is None
    assert [j["name"] for j in body["results"]] == ["new", "old"]
    assert set(body["results"][0]) == SUMMARY_KEYS
    assert body["results"][0] == {k: v for k, v in api.get(f"/api/v1/jobs/{new.id}").json().items() if k in SUMMARY_KEYS}


def test_it_lists_only_the_callers_own_jobs_even_for_a_superuser(staff, owner, stranger, template):
    make_job(owner, template)
    make_job(stranger, template)
    assert token_client(staff)[0].get("/api/v1/jobs").json()["count"] == 0
    assert token_client(owner)[0].get("/api/v1/jobs").json()["count"] == 1


def test_it_filters_by_status(api, owner, template):
    make_job(owner, template, status=JobStatus.RUNNING)
    make_job(owner, template, status=JobStatus.COMPLETED)
    make_job(owner, template, status=JobStatus.FAILED)
    assert [j["status"] for j in api.get("/api/v1/jobs?status=running").json()["results"]] == ["running"]
    both = api.get("/api/v1/jobs?status=completed,failed").json()
    assert sorted(j["status"] for j in both["results"]) == ["completed", "failed"]
    r = api.get("/api/v1/jobs?status=done")
    assert r.status_code == 400 and r.json()["field"] == "status"


def test_it_pages_with_next_and_previous_links(api, owner, template):
    for i in range(5):
        make_job(owner, template, name=f"job {i}")
    first = api.get("/api/v1/jobs?limit=2&status=queued").json()
    assert first["count"] == 5 and len(first["results"]) == 2 and first["previous"] is None
    assert first["next"].startswith("http://testserver/api/v1/jobs?")
    seen = [j["id"] for j in first["results"]]
    page = first
    while page["next"]:
        page = api.get(page["next"]).json()
        seen += [j["id"] for j in page["results"]]
    assert len(seen) == len(set(seen)) == 5
    assert page["previous"] and len(api.get(page["previous"]).json()["results"]) == 2
    assert "status=queued" in page["previous"]


@pytest.mark.parametrize("query, field", [("limit=0", "limit"), ("limit=201", "limit"), ("limit=x", "limit"),
                                          ("offset=-1", "offset"),
                                          ("offset=99999999999999999999999", "offset")])  # was a 500
def test_it_refuses_bad_paging(api, owner, template, query, field):
    make_job(owner, template)  # a list with rows: the database is asked
    r = api.get(f"/api/v1/jobs?{query}")
    assert r.status_code == 400 and r.json()["field"] == field


def test_it_lists_with_a_flat_number_of_queries(owner, template, django_assert_max_num_queries):
    api = session_client(owner)
    make_job(owner, template, targets=3, tasks=2)
    with CaptureQueriesContext(connection) as one:
        assert len(api.get("/api/v1/jobs").json()["results"]) == 1
    for _ in range(19):
        make_job(owner, template, targets=3, tasks=2)
    with django_assert_max_num_queries(len(one)):
        assert len(api.get("/api/v1/jobs").json()["results"]) == 20
    # session + user + count + page
    assert len(one) <= 4


def test_a_big_jobs_detail_lists_the_first_hundred_and_links_to_the_rest(api, owner, template):
    job = make_job(owner, template, status=JobStatus.RUNNING, targets=250, tasks=125)
    Target.objects.filter(job=job, index__gte=10).update(output_file="/x.jpg")  # 240 fetched
    body = api.get(f"/api/v1/jobs/{job.id}").json()
    assert [t["index"] for t in body["tasks"]] == list(range(100))
    assert [o["name"] for o in body["outputs"]] == [f"{i:03d}.jpg" for i in range(10, 110)]

    names, url, pages = [o["name"] for o in body["outputs"]], body["outputs_next"], 0
    while url:
        page = api.get(url + "&limit=70").json()
        names += [o["name"] for o in page["results"]]
        url, pages = page["next"], pages + 1
    assert names == [f"{i:03d}.jpg" for i in range(10, 250)] and pages == 2  # 70 + 70 after the first 100

    tasks = api.get(body["tasks_next"]).json()
    assert [t["index"] for t in tasks["results"]] == list(range(100, 125)) and tasks["next"] is None
    assert api.get(f"/api/v1/jobs/{job.id}/outputs?after=x").status_code == 400
    assert api.get(f"/api/v1/jobs/{job.id}/tasks?limit=5000").status_code == 400


def test_a_small_jobs_detail_says_there_is_nothing_more(api, owner, template):
    job = make_job(owner, template, targets=3, tasks=2)
    body = api.get(f"/api/v1/jobs/{job.id}").json()
    assert body["tasks_next"] is None and body["outputs_next"] is None


def test_the_pages_of_a_job_are_only_for_its_owner(owner, stranger, template):
    job = make_job(owner, template, targets=3, tasks=2)
    for part in ("tasks", "outputs"):
        assert token_client(stranger)[0].get(f"/api/v1/jobs/{job.id}/{part}").status_code == 404
        assert Client().get(f"/api/v1/jobs/{job.id}/{part}").status_code == 401


def test_it_details_a_job_in_a_flat_number_of_queries(api, owner, template, django_assert_max_num_queries):
    small = make_job(owner, template, targets=1, tasks=1)
    big = make_job(owner, template, targets=400, tasks=200)
    Target.objects.filter(job=big).update(output_file="/x.jpg")
    with CaptureQueriesContext(connection) as one:
        api.get(f"/api/v1/jobs/{small.id}")
    with django_assert_max_num_queries(len(one)):
        assert len(api.get(f"/api/v1/jobs/{big.id}").json()["outputs"]) == 100


def test_it_serves_an_output_to_a_token_client_and_to_nobody_else(owner, stranger, template, settings):
    job = make_job(owner, template, status=JobStatus.COMPLETED, targets=1)
    out = settings.MEDIA_ROOT / "users" / str(owner.pk) / "jobs" / str(job.id) / "outputs" / "000.jpg"
    out.parent.mkdir(parents=True)
    out.write_bytes(b"\xff\xd8\xff swapped")
    Target.objects.filter(job=job, index=0).update(output_file=str(out))
    url = token_client(owner)[0].get(f"/api/v1/jobs/{job.id}").json()["outputs"][0]["url"]

    r = token_client(owner)[0].get(url)
    assert r.status_code == 200 and b"".join(r.streaming_content) == b"\xff\xd8\xff swapped"
    assert token_client(stranger)[0].get(url).status_code == 404
    assert Client().get(url).status_code == 401
    r = token_client(owner)[0].get(f"/api/v1/jobs/{job.id}/outputs/7")
    assert r.status_code == 404
