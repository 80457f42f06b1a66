"""The live pages' JSON fallback (what static/js/live/ polls when WebSockets cannot connect), and
the hooks the script needs on the server-rendered pages."""
import json

import pytest
from django.urls import reverse
from django.utils import timezone

from jobs.models import JobStatus, Target, TargetStatus, Task
from tests.jobs.test_pages_jobs import make_job

#: "staff" is a superuser: the flags grant nothing outside the admin (jobs.access)
WHO_SEES = [("owner", 200), ("colleague", 404), ("stranger", 404), ("staff", 404)]


@pytest.fixture
def job(owner, template):
    job = make_job(owner, template, status=JobStatus.RUNNING, slurm_job_id="4242", total=2, done=1, failed=0)
    Task.objects.create(job=job, index=0, state="RUNNING", node="gpu-node-1", elapsed_seconds=12)
    Task.objects.create(job=job, index=1, state="PENDING", reason="waiting for a free GPU")
    Target.objects.create(job=job, index=0, name="bride.jpg", output_name="bride.jpg", status=TargetStatus.DONE,
                          faces_swapped=2, output_file="/x/bride.jpg", thumbnail_file="/x/bride-thumb.jpg")
    Target.objects.create(job=job, index=1, name="groom.jpg", output_name="groom.jpg")
    return job


@pytest.mark.parametrize("who,status", WHO_SEES)
def test_the_job_snapshot_is_only_for_its_owner(client, request, job, who, status):
    client.force_login(request.getfixturevalue(who))
    r = client.get(reverse("job-live", args=[job.id]))
    assert r.status_code == status
    if status == 404:
        assert b"bride.jpg" not in r.content and b"4242" not in r.content  # a 404 says nothing of the job
        return
    assert r["Content-Type"] == "application/json"
    assert "no-cache" in r["Cache-Control"] or "no-store" in r["Cache-Control"]
    data = r.json()
    assert data["type"] == "snapshot"
    assert data["job"]["id"] == str(job.id) and data["job"]["status"] == "running"
    assert data["job"]["progress"] == {"total": 2, "done": 1, "failed": 0, "needs_look": 0}
    assert [(t["index"], t["status"], t["reason"]) for t in data["tasks"]] == [
        (0, "RUNNING", ""), (1, "PENDING", "waiting for a free GPU")]
    assert [t["name"] for t in data["targets"]] == ["bride.jpg", "groom.jpg"]
    assert data["targets"][0]["thumb_url"] == reverse("job-thumb", args=[job.id, 0])
    assert data["targets"][1]["thumb_url"] is None
    assert data["cluster"]["unreachable_since"] is None and data["cluster"]["message"] == ""


def test_the_job_snapshot_sends_anonymous_to_login(client, job):
    r = client.get(reverse("job-live", args=[job.id]))
    assert r.status_code == 302 and r["Location"].startswith(reverse("login"))


def test_the_job_snapshot_of_a_missing_job_is_404(client, owner):
    client.force_login(owner)
    assert client.get("/jobs/00000000-0000-0000-0000-000000000000/live.json").status_code == 404


def test_the_job_snapshot_says_since_when_the_cluster_is_unreachable(client, owner, job):
    job.cluster.unreachable_since = timezone.now()
    job.cluster.save()
    client.force_login(owner)
    cluster = client.get(reverse("job-live", args=[job.id])).json()["cluster"]
    assert cluster["unreachable_since"] and "unreachable since" in cluster["message"]


def test_the_job_snapshot_is_read_only(client, owner, job):
    client.force_login(owner)
    assert client.post(reverse("job-live", args=[job.id])).status_code == 405


@pytest.mark.parametrize("who,sees", [("owner", True), ("colleague", False), ("stranger", False), ("staff", False)])
def test_the_list_snapshot_holds_only_the_jobs_the_user_may_see(client, request, job, who, sees):
    client.force_login(request.getfixturevalue(who))
    r = client.get(reverse("jobs-live"))
    assert r.status_code == 200
    data = r.json()
    assert data["type"] == "snapshot"
    assert ([j["id"] for j in data["jobs"]] == [str(job.id)]) == sees
    if not sees:
        assert data["jobs"] == [] and b"4242" not in r.content


def test_the_list_snapshot_is_newest_first(client, owner, template):
    older = make_job(owner, template, name="older")
    newer = make_job(owner, template, name="newer")
    client.force_login(owner)
    assert [j["id"] for j in client.get(reverse("jobs-live")).json()["jobs"]] == [str(newer.id), str(older.id)]


def test_the_list_snapshot_sends_anonymous_to_login(client, job):
    r = client.get(reverse("jobs-live"))
    assert r.status_code == 302 and r["Location"].startswith(reverse("login"))


def test_the_job_page_carries_what_the_live_script_needs(client, owner, job):
    client.force_login(owner)
    body = client.get(reverse("job-detail", args=[job.id])).content.decode()
    assert f'data-ws-path="/ws/jobs/{job.id}/"' in body
    assert f'data-live-url="{reverse("job-live", args=[job.id])}"' in body
    assert 'id="job-status"' in body and 'id="job-progress"' in body and 'id="cluster-banner"' in body
    assert 'data-task-index="1"' in body and 'data-target-index="0"' in body
    assert '<script type="module" src="/static/js/live/main.js">' in body and 'id="live-strings"' in body
    # the words the script writes, with {placeholders} for its numbers
    assert "<strong>{done}</strong> of {total} done" in body and "{n} failed" in body
    assert 'data-key="job:completed">completed<' in body and 'data-key="target:no_face">no face found<' in body
    assert "The cluster has been unreachable since {since}; the portal keeps trying." in body
    assert 'data-final-statuses="completed partially_failed failed cancelled lost"' in body


def test_the_live_words_follow_the_readers_language(client, owner, job):
    client.force_login(owner)
    client.cookies["django_language"] = "zh-hans"
    body = client.get(reverse("job-detail", args=[job.id]), HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert '<html lang="zh-hans">' in body
    # whatever the catalogue holds, the page renders the keys in the request's language
    assert 'data-key="job:running">' in body


def test_the_job_list_carries_what_the_live_script_needs(client, owner, job):
    client.force_login(owner)
    body = client.get(reverse("job-list")).content.decode()
    assert 'data-ws-path="/ws/jobs/"' in body and f'data-live-url="{reverse("jobs-live")}"' in body
    assert f'data-job-id="{job.id}"' in body and 'class="job-status"' in body and "job-progress" in body
    assert "{done} / {total}" in body
    assert '<script type="module" src="/static/js/live/main.js">' in body and 'id="live-strings"' in body
    assert 'data-final-statuses="completed partially_failed failed cancelled lost"' in body


def test_the_snapshots_are_plain_json(client, owner, job):
    client.force_login(owner)
    for url in (reverse("job-live", args=[job.id]), reverse("jobs-live")):
        json.loads(client.get(url).content)  # no HTML, no JSONP
