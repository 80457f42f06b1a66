"""The job page in plain words, and "recover, don't redo": no false "Job started.", "Retrying
automatically" only while it is true, Cancel of a job waiting to submit, a missing folder a final
failure, cancelled targets grey, Replace file and the Retry that reads it, the face photos used,
Run again, Technical details and the phone's data-labels. The real cluster run is tests/e2e/test_retry.py."""
import json
import os
import re
import stat
from types import SimpleNamespace

import pytest
from django.contrib.messages import constants
from django.contrib.messages.storage.base import Message
from django.contrib.messages.storage.cookie import CookieStorage
from django.core.files.uploadedfile import SimpleUploadedFile
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone

from cluster import ClusterError
from jobs.background import enqueue
from jobs.job import lifecycle, submit
from jobs.job.retry import retry_failed
from jobs.models import AuditEntry, Job, JobStatus, Source, Target, TargetStatus, Task
from tests.fake_ssh import FakeSSH
from worker.manifest import EngineOptions, Manifest
from worker.manifest import Target as ManifestTarget

from .api_helpers import session_client


def make_job(owner, template, status=JobStatus.PARTIALLY_FAILED, **fields) -> Job:
    fields.setdefault("name", "Wedding set")
    return Job.objects.create(owner=owner, template=template, template_snapshot=template.snapshot().to_json(),
                              cluster=template.cluster, status=status, **fields)


def ended_job(owner, template, status=JobStatus.PARTIALLY_FAILED) -> Job:
    """Two chunks: bride.jpg done, broken.jpg failed for its own reasons (damaged), both in chunk 0;
    clip.mp4 cancelled in chunk 1."""
    job = make_job(owner, template, status=status, slurm_job_id="4242", total=3, finished_at=timezone.now())
    Task.objects.create(job=job, index=0, state="FAILED", exit_code=1)
    Task.objects.create(job=job, index=1, state="CANCELLED")
    Target.objects.create(job=job, index=0, name="bride.jpg", output_name="bride.jpg", status=TargetStatus.DONE,
                          cluster_path="/srv/shoot/bride.jpg", task_index=0)
    Target.objects.create(job=job, index=1, name="broken.jpg", output_name="broken.jpg", status=TargetStatus.FAILED,
                          cluster_path="/srv/shoot/broken.jpg", task_index=0,
                          message="the image is truncated or corrupt")
    Target.objects.create(job=job, index=2, name="clip.mp4", output_name="clip.mp4", status=TargetStatus.CANCELLED,
                          cluster_path="/srv/shoot/clip.mp4", task_index=1)
    job.recount()
    return job


def page(client, job) -> str:
    return client.get(reverse("job-detail", args=[job.id])).content.decode()


# -- No false success -------------------------------------------------------------------------------

def with_messages(client, *messages):
    """Put messages in the client's cookie, as a redirect after Start leaves them."""
    client.cookies["messages"] = CookieStorage(HttpRequest())._encode(list(messages))


STARTED = Message(constants.SUCCESS, "Job started. This page follows its progress.", extra_tags="job-started")


@pytest.mark.parametrize("status", [JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.COMPLETED])
def test_it_never_says_job_started_above_a_job_that_already_ended(owner, template, status):
    job = make_job(owner, template, status=status, error="The folder /srv/x has no images or videos in it.")
    client = session_client(owner)
    with_messages(client, STARTED, Message(constants.INFO, "Your language is now English."))
    body = page(client, job)
    assert "Job started." not in body and "job-started" not in body.split("<main", 1)[-1].split("</ul>", 1)[0]
    assert "Your language is now English." in body  # any other message stays
    assert "has no images or videos in it." in body


def test_it_says_job_started_above_a_job_that_is_running(owner, template):
    job = make_job(owner, template, status=JobStatus.SUBMITTING)
    client = session_client(owner)
    with_messages(client, STARTED)
    assert 'class="msg msg-success job-started"' in page(client, job)


# -- "Retrying automatically" only while true ---------------------------------------------------------

@pytest.fixture
def submitting(owner, template, monkeypatch, fake_ssh):
    fake_ssh(on_run=ClusterError("cannot reach the cluster (connection refused)"))  # a cluster that does not answer
    monkeypatch.setattr("jobs.job.submit.publish_job", lambda job: None)
    return make_job(owner, template, status=JobStatus.QUEUED, target_folder="/srv/shoot")


def rq_job(retries_left, interval=300):
    return SimpleNamespace(retries_left=retries_left, get_retry_interval=lambda: interval)


def test_while_rq_will_try_again_the_job_says_when(submitting, monkeypatch):
    monkeypatch.setattr("rq.get_current_job", lambda: rq_job(3, 300))
    before = timezone.now()
    with pytest.raises(ClusterError):
        submit.submit_job(str(submitting.id))
    submitting.refresh_from_db()
    assert submitting.status == JobStatus.SUBMITTING
    assert submitting.error.startswith("Waiting to submit: cannot reach the cluster (connection refused). "
                                       "Retrying automatically at ")
    when = submitting.error.rsplit(" at ", 1)[1].rstrip(".")
    expected = {submit.page_time(before + timezone.timedelta(seconds=s)) for s in (300, 360)}
    assert when in expected


def test_after_the_last_try_the_job_fails_and_says_so(submitting, monkeypatch):
    monkeypatch.setattr("rq.get_current_job", lambda: rq_job(0))
    assert submit.submit_job(str(submitting.id)) is None  # no raise: RQ has nothing left to retry
    submitting.refresh_from_db()
    assert submitting.status == JobStatus.FAILED and submitting.finished_at
    assert "Retrying" not in submitting.error
    assert submitting.error.startswith("Could not send this job to the cluster: cannot reach the cluster")
    assert "try again later with Run again" in submitting.error


def test_outside_rq_it_promises_no_retry(submitting, monkeypatch):
    monkeypatch.setattr("rq.get_current_job", lambda: None)
    with pytest.raises(ClusterError):
        submit.submit_job(str(submitting.id))
    submitting.refresh_from_db()
    assert submitting.status == JobStatus.SUBMITTING and "Retrying" not in submitting.error


def test_cancel_of_a_job_waiting_to_submit_ends_it_at_once_and_drops_the_next_try(owner, template, submitting,
                                                                                   django_capture_on_commit_callbacks):
    queue = enqueue.queue()
    rq_id = enqueue.submission_rq_id(submitting)
    queue.enqueue_in(timezone.timedelta(minutes=5), "jobs.job.submit.submit_job", str(submitting.id), job_id=rq_id)
    assert rq_id in queue.scheduled_job_registry
    Job.objects.filter(pk=submitting.pk).update(
        status=JobStatus.SUBMITTING, error="Waiting to submit: cannot reach the cluster. Retrying automatically at 12:00.")
    client = session_client(owner)
    with_messages(client)
    with django_capture_on_commit_callbacks(execute=True):
        r = client.post(reverse("job-cancel", args=[submitting.id]), follow=True)
    body = r.content.decode()
    submitting.refresh_from_db()
    assert submitting.status == JobStatus.CANCELLED and submitting.finished_at
    assert submitting.error == "Cancelled before it was submitted."
    assert "Retrying automatically" not in body and "Cancelled before it was submitted." in body
    assert rq_id not in queue.scheduled_job_registry  # no more tries
    # A try that was already running finds the job cancelled and submits nothing.
    assert submit.submit_job(str(submitting.id)) is None
    assert Job.objects.get(pk=submitting.pk).status == JobStatus.CANCELLED


# -- A folder the cluster cannot use: a final failure that says what to do --------------------------------

def test_a_missing_folder_is_a_final_failure_that_says_what_to_do(owner, template, fake_ssh):
    template.cluster.target_roots = ["/srv/shoot"]
    template.cluster.save()
    # a cluster where the job's folder does not exist (the listing exits 102: ENOENT)
    runner = fake_ssh(on_run={"sh": (102, "", "")},
                      on_batch={"squeue": '{"jobs": []}', "*": (1, "", "")})
    job = make_job(owner, template, status=JobStatus.QUEUED, target_folder="/srv/shoot/weddnig")
    assert submit.submit_job(str(job.id)) is None  # not raised: RQ does not try again
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert job.error == ("The folder /srv/shoot/weddnig cannot be read on the cluster: it does not exist (check its "
                         "name). Nothing ran. Use Run again and pick the folder with the folder browser.")
    assert not [c for c in runner.commands if c[0] == "sbatch"]


# -- Cancelled is grey -------------------------------------------------------------------------------------

def test_a_cancelled_job_marks_what_it_stopped_cancelled_and_keeps_real_failures(owner, template):
    job = make_job(owner, template, status=JobStatus.RUNNING, slurm_job_id="4242", total=5, cancel_requested=True)
    Task.objects.create(job=job, index=0, state="OUT_OF_MEMORY")
    Task.objects.create(job=job, index=1, state="CANCELLED")
    rows = [("done.jpg", 0, TargetStatus.DONE, False, ""), ("oom.jpg", 0, TargetStatus.FAILED, True, "ran out of memory"),
            ("broken.jpg", 1, TargetStatus.FAILED, False, "the image is truncated or corrupt"),
            ("clip.mp4", 1, TargetStatus.FAILED, True,
             "stopped before this target finished: the task hit its time limit or was cancelled"),
            ("later.jpg", 1, TargetStatus.WAITING, False, "")]
    for i, (name, task, status, with_task, message) in enumerate(rows):
        Target.objects.create(job=job, index=i, name=name, output_name=name, task_index=task, status=status,
                              failed_with_task=with_task, message=message)
    job.recount()
    assert lifecycle.move(job, "finish", to=JobStatus.CANCELLED, finished_at=timezone.now(),
                          error="Cancelled. 1 of 5 images were finished and are kept.")
    assert {t.name: t.status for t in job.targets.all()} == {
        "done.jpg": "done", "oom.jpg": "failed", "broken.jpg": "failed", "clip.mp4": "cancelled", "later.jpg": "cancelled"}
    job.refresh_from_db()
    assert (job.done, job.failed) == (1, 2)
    body = page(session_client(owner), job)
    assert body.count('class="badge target-status-cancelled">cancelled</span>') == 2
    assert "hit its time limit or was cancelled" not in body


# -- Replace file, then Retry ------------------------------------------------------------------------------

def replace(client, job, index, name, content, content_type="image/jpeg"):
    return client.post(reverse("job-target-replace", args=[job.id, index]),
                       {"file": SimpleUploadedFile(name, content, content_type=content_type)})


def test_replace_file_keeps_the_new_file_privately_and_retry_reads_it(owner, template, jpeg_bytes, settings):
    job = ended_job(owner, template)
    client = session_client(owner)
    body = page(client, job)
    assert body.count('class="replace-form"') == 2  # broken.jpg and clip.mp4; never the done one
    assert f'action="{reverse("job-target-replace", args=[job.id, 1])}"' in body

    r = replace(client, job, 1, "fixed.jpg", jpeg_bytes)
    assert r.status_code == 302 and r["Location"].endswith("#target-1")
    broken = job.targets.get(index=1)
    assert broken.upload.name.endswith("replacements/1/fixed.jpg")
    assert broken.cluster_path == job.folder.target("replacement-1-fixed.jpg")  # the job's folder, not /srv/shoot
    assert broken.status == TargetStatus.FAILED and "Replaced by fixed.jpg" in broken.message
    path = broken.upload.path
    assert open(path, "rb").read() == jpeg_bytes
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    assert AuditEntry.objects.filter(action="target.replace", actor=owner).count() == 1
    # The before/after page shows the new file as "before".
    assert b"".join(client.get(reverse("job-input", args=[job.id, 1])).streaming_content) == jpeg_bytes

    assert retry_failed(job, actor=owner)
    assert {t.index: t.status for t in job.targets.all()} == {0: "done", 1: "waiting", 2: "waiting"}


def test_a_replacement_must_be_a_good_file_of_the_same_kind(owner, template, jpeg_bytes):
    job = ended_job(owner, template)
    client = session_client(owner)
    for name, content, why in [("notes.jpg", b"just text, not an image", "was not replaced"),
                               ("cut.jpg", jpeg_bytes[:len(jpeg_bytes) // 2], "damaged or cut off"),
                               ("clip.mp4", b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 64,
                                "Replace a photo with a photo, and a video with a video.")]:
        r = client.post(reverse("job-target-replace", args=[job.id, 1]),
                        {"file": SimpleUploadedFile(name, content)}, follow=True)
        assert why in r.content.decode(), name
    assert not job.targets.get(index=1).upload
    # done targets and running jobs are not replaced
    r = client.post(reverse("job-target-replace", args=[job.id, 0]),
                    {"file": SimpleUploadedFile("x.jpg", jpeg_bytes)}, follow=True)
    assert "bride.jpg was not replaced: Only a photo or video that failed or was cancelled" in r.content.decode()
    assert not job.targets.get(index=0).upload
    running = make_job(owner, template, status=JobStatus.RUNNING)
    Target.objects.create(job=running, index=0, name="a.jpg", output_name="a.jpg", status=TargetStatus.FAILED)
    replace(client, running, 0, "a.jpg", jpeg_bytes)
    assert not running.targets.get(index=0).upload


def test_only_the_owner_replaces_a_file(owner, colleague, stranger, staff, template, jpeg_bytes):
    job = ended_job(owner, template)
    for other, code in ((colleague, 404), (stranger, 404), (staff, 404)):  # staff: a superuser
        assert replace(session_client(other), job, 1, "fixed.jpg", jpeg_bytes).status_code == code
    assert not job.targets.get(index=1).upload
    assert session_client(owner).get(reverse("job-target-replace", args=[job.id, 1])).status_code == 405


def test_the_retry_stages_the_replaced_file_and_points_the_manifest_at_it(owner, template, jpeg_bytes):
    job = ended_job(owner, template)
    replace(session_client(owner), job, 1, "fixed.jpg", jpeg_bytes)
    assert retry_failed(job, actor=owner)
    job.refresh_from_db()
    first = Manifest(job=str(job.id), sources=("/work/s0.jpg",), chunks=((0, 1), (2,)), output_dir="/work/out",
                     targets=tuple(ManifestTarget(path=t.cluster_path if t.index != 1 else "/srv/shoot/broken.jpg",
                                                  output=t.output_name) for t in job.targets.all()),
                     engine=EngineOptions(name="classic", face_selector="many"), target_roots=("/srv/shoot",))
    runner = FakeSSH(serve=lambda remote: first.dumps().encode())  # keeps what the retry's staging puts on it
    script = submit.stage_retry(runner, job)
    new_path = job.folder.target("replacement-1-fixed.jpg")
    assert runner.written[new_path] == jpeg_bytes
    written = json.loads(runner.written[job.folder.manifest])
    assert [t["path"] for t in written["targets"]] == ["/srv/shoot/bride.jpg", new_path, "/srv/shoot/clip.mp4"]
    assert written["chunks"] == [[0, 1], [2]] and written["target_roots"] == ["/srv/shoot"]
    assert script == job.folder.script(2)
    assert not any("/srv/shoot" in p for p in runner.written)  # nothing written into the user's folder


# -- The face photos used ------------------------------------------------------------------------------------

def test_the_page_shows_the_face_photos_used_to_their_owner_only(owner, colleague, stranger, template, jpeg_bytes,
                                                               settings):
    job = ended_job(owner, template)
    folder = settings.MEDIA_ROOT / "users" / str(owner.pk) / "jobs" / str(job.id) / "sources"
    folder.mkdir(parents=True)
    (folder / "anna.jpg").write_bytes(jpeg_bytes)
    Source.objects.create(job=job, file=str((folder / "anna.jpg").relative_to(settings.MEDIA_ROOT)),
                          original_name="anna.jpg")
    client = session_client(owner)
    body = page(client, job)
    url = reverse("job-source", args=[job.id, 0])
    assert f'src="{url}"' in body
    assert 'alt="The face put into the photos and videos: anna.jpg"' in body
    r = client.get(url)
    assert r.status_code == 200 and r["Content-Type"] == "image/jpeg" and b"".join(r.streaming_content) == jpeg_bytes
    assert client.get(reverse("job-source", args=[job.id, 1])).status_code == 404
    for other in (colleague, stranger):
        assert session_client(other).get(url).status_code == 404


# -- Plain words, Run again, the phone ---------------------------------------------------------------------

def test_the_page_counts_videos_as_videos(owner, template):
    job = make_job(owner, template, status=JobStatus.RUNNING, total=10, done=3, videos=2)  # counted at Start
    for i in range(10):
        name = f"{i}.mp4" if i < 2 else f"{i}.jpg"
        Target.objects.create(job=job, index=i, name=name, output_name=name)
    assert "<strong>3</strong> of 10 (8 photos and 2 videos) done" in page(session_client(owner), job)


def test_cluster_words_are_behind_technical_details_and_every_cell_has_its_label(owner, template):
    job = ended_job(owner, template)
    body = page(session_client(owner), job)
    details = re.search(r'<details class="card technical" id="technical">(.*?)</details>', body, re.S)
    assert details, "no Technical details"
    assert "Slurm job" not in body.replace(details.group(1), "")  # only inside
    assert 'id="task-rows"' in details.group(1) and "CANCELLED" in details.group(1)
    assert '<table class="table tasks stack">' in body
    cells = re.findall(r"<td[^>]*>", body)
    assert cells and all('data-label="' in td for td in cells)


def test_run_again_is_offered_to_the_owner_on_every_job(owner, staff, template):
    for status in (JobStatus.RUNNING, JobStatus.COMPLETED, JobStatus.CANCELLED):
        job = make_job(owner, template, status=status)
        link = f'href="{reverse("job-new")}?again={job.id}"'
        assert link in page(session_client(owner), job)
        assert link not in page(session_client(staff), job)  # a superuser gets the 404 of a job not theirs


def test_cancel_asks_first_and_the_retry_button_names_what_it_does(owner, template):
    client = session_client(owner)
    running = make_job(owner, template, status=JobStatus.RUNNING)
    body = page(client, running)
    assert 'data-confirm="cancel-dialog"' in body and '<dialog id="cancel-dialog"' in body
    assert "Cancel this job? Photos and videos already finished are kept." in body
    assert 'value="keep"' in body and "Keep running" in body
    cancelled = ended_job(owner, template, status=JobStatus.CANCELLED)
    body = page(client, cancelled)
    assert 'id="job-retry"' in body and "Process the rest" in body and "cancel-dialog" not in body


def test_dates_are_written_one_way(owner, template):
    job = make_job(owner, template, status=JobStatus.COMPLETED, started_at=timezone.now(), finished_at=timezone.now())
    body = page(session_client(owner), job)
    dates = re.findall(r"<time datetime=\"[^\"]+\">([^<]*)</time>", body)
    assert len(dates) == 3 and all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", d) for d in dates), dates


def test_not_done_yet_lists_the_cancelled_ones_it_counts(owner, template):
    job = ended_job(owner, template, status=JobStatus.CANCELLED)
    body = session_client(owner).get(reverse("job-detail", args=[job.id]) + "?show=todo").content.decode()
    assert '<span class="count" data-count-of="todo">1</span>' in body
    assert 'id="target-2"' in body and 'id="target-1"' not in body
