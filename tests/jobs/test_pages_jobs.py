"""The job list, a job's page, Cancel, and one target's before/after page."""
import pytest
from django.test import Client
from django.urls import reverse

from jobs import transitions
from jobs.models import Job, JobStatus, Target, TargetStatus, Task

#: "staff" is a superuser: the flags grant nothing outside the admin (jobs.access)
WHO_SEES = [("owner", 200), ("colleague", 404), ("stranger", 404), ("staff", 404)]


def make_job(owner, template, **fields) -> Job:
    fields.setdefault("name", "Wedding set")
    return Job.objects.create(owner=owner, template=template, template_snapshot=template.snapshot().to_json(),
                              cluster=template.cluster, **fields)


@pytest.fixture
def job(owner, template):
    job = make_job(owner, template, status=JobStatus.RUNNING, slurm_job_id="4242", total=3, done=1, failed=1,
                   error="Task 1 ran out of memory (over 2G).")
    Task.objects.create(job=job, index=0, state="COMPLETED", node="gpu-node-1", exit_code=0, elapsed_seconds=3725)
    Task.objects.create(job=job, index=1, state="OUT_OF_MEMORY", node="gpu-node-2", exit_code=137,
                        reason="ran out of memory")
    Target.objects.create(job=job, index=0, name="bride.jpg", output_name="bride.jpg", status=TargetStatus.DONE,
                          faces_swapped=2)
    Target.objects.create(job=job, index=1, name="groom.jpg", output_name="groom.jpg", status=TargetStatus.FAILED,
                          message="The image could not be read.")
    Target.objects.create(job=job, index=2, name="cake.jpg", output_name="cake.jpg")
    return job


def test_it_lists_only_the_users_jobs_newest_first(client, owner, colleague, template):
    older = make_job(owner, template, name="Older job")
    newer = make_job(owner, template, name="Newer job", total=10, done=4, failed=1)
    make_job(colleague, template, name="Bob's secret job")
    client.force_login(owner)
    r = client.get(reverse("job-list"))
    assert r.status_code == 200
    body = r.content.decode()
    assert body.index("Newer job") < body.index("Older job")
    assert "Bob&#x27;s secret job" not in body and "Bob's secret job" not in body
    assert reverse("job-detail", args=[newer.id]) in body and reverse("job-detail", args=[older.id]) in body
    assert "Quick GPU" in body  # template
    assert 'class="badge status-queued"' in body
    assert "1 failed" in body and "/ 10" in body


def test_it_lists_only_ones_own_jobs_even_for_a_superuser(client, owner, colleague, staff, template):
    make_job(owner, template, name="Alice's job")
    make_job(colleague, template, name="Bob's job")
    client.force_login(staff)
    body = client.get(reverse("job-list")).content.decode()
    assert "Alice&#x27;s job" not in body and "Bob&#x27;s job" not in body and "No jobs yet." in body
    client.force_login(owner)
    body = client.get(reverse("job-list")).content.decode()
    assert "Alice&#x27;s job" in body and "Bob&#x27;s job" not in body and "Your jobs" in body


def test_it_shows_an_empty_state(client, owner):
    client.force_login(owner)
    r = client.get(reverse("job-list"))
    assert "No jobs yet." in r.content.decode()
    assert reverse("job-new") in r.content.decode()


def test_it_sends_anonymous_users_to_login(client):
    r = client.get(reverse("job-list"))
    assert r.status_code == 302 and r["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("who,status", WHO_SEES)
def test_it_shows_the_job_page_only_to_its_owner(client, request, job, who, status):
    client.force_login(request.getfixturevalue(who))
    r = client.get(reverse("job-detail", args=[job.id]))
    assert r.status_code == status
    assert ("Wedding set" in r.content.decode()) == (status == 200)  # a 404 says nothing of the job


def test_it_sends_anonymous_from_job_page_to_login(client, job):
    r = client.get(reverse("job-detail", args=[job.id]))
    assert r.status_code == 302 and r["Location"].startswith(reverse("login"))


def test_it_answers_404_for_a_job_that_does_not_exist(client, owner):
    client.force_login(owner)
    assert client.get("/jobs/00000000-0000-0000-0000-000000000000").status_code == 404


def test_it_shows_status_error_progress_tasks_and_targets(client, owner, job):
    client.force_login(owner)
    body = client.get(reverse("job-detail", args=[job.id])).content.decode()
    assert 'class="badge status-running"' in body
    assert "Task 1 ran out of memory (over 2G)." in body
    assert 'style="width: 33%"' in body  # 1 of 3 done, 1 of 3 failed
    assert "<strong>1</strong> of 3 photos done" in body and "1 failed" in body
    # tasks: index, state, node, run time, exit code, reason
    assert "gpu-node-1" in body and "1:02:05" in body and "OUT_OF_MEMORY" in body and "137" in body
    assert "ran out of memory" in body
    # targets: status, message, faces swapped, before/after link
    assert "bride.jpg" in body and "2 faces" in body and "The image could not be read." in body
    assert reverse("job-target", args=[job.id, 0]) in body
    assert "4242" in body
    # active: Cancel (POST form with CSRF); no outputs yet: no zip link
    assert f'action="{reverse("job-cancel", args=[job.id])}"' in body and "csrfmiddlewaretoken" in body
    assert reverse("job-results-zip", args=[job.id]) not in body


def test_it_offers_the_zip_and_thumbnails_once_outputs_exist(client, owner, job):
    Target.objects.filter(job=job, index=0).update(output_file="/x/bride.jpg", thumbnail_file="/x/bride-thumb.jpg")
    transitions.update_if(job, "status", (JobStatus.RUNNING,), JobStatus.PARTIALLY_FAILED)
    client.force_login(owner)
    body = client.get(reverse("job-detail", args=[job.id])).content.decode()
    assert reverse("job-results-zip", args=[job.id]) in body
    assert reverse("job-thumb", args=[job.id, 0]) in body
    assert reverse("job-output", args=[job.id, 0]) in body
    assert reverse("job-cancel", args=[job.id]) not in body  # final: no Cancel


def test_it_warns_when_the_cluster_is_unreachable(client, owner, job):
    from django.utils import timezone

    job.cluster.unreachable_since = timezone.now()
    job.cluster.save()
    client.force_login(owner)
    body = client.get(reverse("job-detail", args=[job.id])).content.decode()
    since = timezone.localtime(job.cluster.unreachable_since).strftime("%Y-%m-%d %H:%M")
    assert f"The cluster has been unreachable since {since}; the portal keeps trying." in body


def test_it_cancels_a_queued_job(client, owner, template):
    job = make_job(owner, template)
    client.force_login(owner)
    r = client.post(reverse("job-cancel", args=[job.id]), follow=True)
    assert r.redirect_chain[-1][0] == reverse("job-detail", args=[job.id])
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED and job.cancel_requested
    assert "Cancel requested" in r.content.decode()


def test_it_asks_the_cluster_to_cancel_a_running_job(client, owner, job, monkeypatch,
                                                     django_capture_on_commit_callbacks):
    enqueued = []

    class FakeQueue:
        def enqueue(self, func, *args, **kwargs):
            enqueued.append((func, args))

    monkeypatch.setattr("jobs.background.enqueue.queue", lambda: FakeQueue())
    client.force_login(owner)
    with django_capture_on_commit_callbacks(execute=True):  # scancel is enqueued once the flag commits
        r = client.post(reverse("job-cancel", args=[job.id]))
    assert r.status_code == 302
    job.refresh_from_db()
    assert job.cancel_requested and enqueued == [("jobs.job.submit.cancel_on_cluster", (str(job.id),))]


def test_it_says_when_there_is_nothing_to_cancel(client, owner, template):
    job = make_job(owner, template, status=JobStatus.COMPLETED)
    client.force_login(owner)
    r = client.post(reverse("job-cancel", args=[job.id]), follow=True)
    assert "already finished" in r.content.decode()
    job.refresh_from_db()
    assert job.status == JobStatus.COMPLETED and not job.cancel_requested


def test_it_cancels_by_post_only(client, owner, template):
    job = make_job(owner, template)
    client.force_login(owner)
    assert client.get(reverse("job-cancel", args=[job.id])).status_code == 405
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED


def test_it_refuses_cancel_without_csrf_token(owner, template):
    job = make_job(owner, template)
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    assert client.post(reverse("job-cancel", args=[job.id])).status_code == 403
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED and not job.cancel_requested
    # with the token from the job page it goes through
    page = client.get(reverse("job-detail", args=[job.id]))
    token = page.context["csrf_token"]
    assert client.post(reverse("job-cancel", args=[job.id]), {"csrfmiddlewaretoken": token}).status_code == 302
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED


@pytest.mark.parametrize("who,status", [("owner", 302), ("colleague", 404), ("stranger", 404), ("staff", 404)])
def test_it_lets_only_the_owner_cancel(client, request, owner, template, who, status):
    job = make_job(owner, template)
    client.force_login(request.getfixturevalue(who))
    assert client.post(reverse("job-cancel", args=[job.id])).status_code == status
    job.refresh_from_db()
    assert (job.status == JobStatus.CANCELLED) == (status == 302)


def test_it_sends_anonymous_cancel_to_login(client, owner, template):
    job = make_job(owner, template)
    r = client.post(reverse("job-cancel", args=[job.id]))
    assert r.status_code == 302 and r["Location"].startswith(reverse("login"))
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED


@pytest.mark.parametrize("who,status", WHO_SEES)
def test_it_shows_a_target_page_only_to_its_owner(client, request, job, who, status):
    client.force_login(request.getfixturevalue(who))
    assert client.get(reverse("job-target", args=[job.id, 0])).status_code == status


def test_it_sends_anonymous_from_target_page_to_login(client, job):
    r = client.get(reverse("job-target", args=[job.id, 0]))
    assert r.status_code == 302 and r["Location"].startswith(reverse("login"))


def test_it_answers_404_for_a_target_index_that_does_not_exist(client, owner, job):
    client.force_login(owner)
    assert client.get(reverse("job-target", args=[job.id, 99])).status_code == 404


def test_it_shows_placeholders_when_before_and_after_are_missing(client, owner, job):
    client.force_login(owner)
    body = client.get(reverse("job-target", args=[job.id, 1])).content.decode()
    assert "groom.jpg" in body and "The image could not be read." in body
    assert "No result yet." in body
    assert reverse("job-output", args=[job.id, 1]) not in body


def test_it_pages_through_many_targets(client, owner, template):
    job = make_job(owner, template, total=130)
    Target.objects.bulk_create(Target(job=job, index=i, name=f"img-{i:03d}.jpg", output_name=f"img-{i:03d}.jpg")
                               for i in range(130))
    client.force_login(owner)
    first = client.get(reverse("job-detail", args=[job.id])).content.decode()
    assert "img-000.jpg" in first and "img-060.jpg" not in first and "Page 1 of 3" in first
    third = client.get(reverse("job-detail", args=[job.id]) + "?page=3").content.decode()
    assert "img-129.jpg" in third and "img-000.jpg" not in third
