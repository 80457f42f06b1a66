"""Retention of face data (jobs.results.retention): what is due, the notice (once), "Delete job and files" on
the page and through the API (owner only, never while running), the tombstone left behind, the
audit entry (counts, never names), and the cluster folder deleted through the SSH seam.

The cluster side runs for real in tests/e2e/test_retention_cluster.py; here the seam
(`cluster.runner_for`) is a runner that executes the command on THIS machine with a real shell, so
the deletion script itself runs (work root and job folders under pytest's tmp_path)."""
from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.core import mail
from django.urls import reverse
from django.utils import timezone

from jobs.models import (
    AuditEntry,
    EmailNotice,
    Job,
    JobStatus,
    NoticeStatus,
    NotificationPreference,
    RetentionPolicy,
    Source,
    Target,
)
from jobs.results import retention
from tests.fake_ssh import run_here

from .api_helpers import session_client, token_client

PHOTO_NAMES = ("anna-smith-beach.jpg", "holiday/joe-portrait.jpg")
#: the cluster folder is deleted after the commit (on_commit): these tests commit for real
commits = pytest.mark.django_db(transaction=True)


@pytest.fixture
def work_root(profile, tmp_path):
    root = tmp_path / "cluster-work"
    (root / "jobs").mkdir(parents=True)
    profile.work_root = str(root)
    profile.save()
    return root


@pytest.fixture
def local_cluster(fake_ssh, inline_rq, work_root):
    """The SSH seam answered by this machine: each argv runs here with a real shell (no SSH)."""
    return fake_ssh(on_run=run_here)


def finished_job(owner, template, *, ended_days_ago: float = 1, status=JobStatus.COMPLETED, name="Beach shoot",
                 files: bool = True, **fields) -> Job:
    """An ended job with two targets whose input, output and thumbnail lie in its media folder,
    one face photo, and (when a work root exists) its folder on the "cluster"."""
    ended = timezone.now() - timedelta(days=ended_days_ago)
    job = Job.objects.create(owner=owner, name=name, template=template, template_snapshot=template.snapshot().to_json(),
                             cluster=template.cluster, status=status, total=2, done=2, slurm_job_id="77",
                             created_at=ended - timedelta(hours=1), finished_at=ended, **fields)
    if not files:
        return job
    media = job.media_dir
    for sub in ("sources", "targets", "outputs", "thumbs"):
        (media / sub).mkdir(parents=True, exist_ok=True)
    (media / "sources" / "0-face.jpg").write_bytes(b"face" * 100)
    Source.objects.create(job=job, file=str((media / "sources" / "0-face.jpg").relative_to(media.parents[3])),
                          original_name="anna-smith.jpg")
    for i, name in enumerate(PHOTO_NAMES):
        out = f"{i:03d}.jpg"
        (media / "targets" / out).write_bytes(b"in" * 200)
        (media / "outputs" / out).write_bytes(b"out" * 300)
        (media / "thumbs" / out).write_bytes(b"th" * 50)
        Target.objects.create(job=job, index=i, name=name, output_name=out, status="done",
                              upload=str((media / "targets" / out).relative_to(media.parents[3])),
                              output_file=str(media / "outputs" / out), thumbnail_file=str(media / "thumbs" / out))
    root = Path(template.cluster.work_root)
    if root.name == "cluster-work" and root.is_dir():  # only the `work_root` fixture's, never a real one
        folder = Path(job.folder.root)
        (folder / "out").mkdir(parents=True)
        (folder / "out" / "000.jpg").write_bytes(b"x")
        (folder / "manifest.json").write_text("{}")
    return job


# ---- what is due ------------------------------------------------------------------------------

def test_it_selects_notices_days_before_and_deletions_only_after_the_notice(owner, template):
    RetentionPolicy.objects.create(pk=1, days=30, notice_days=3)
    now = timezone.now()
    young = finished_job(owner, template, ended_days_ago=20, files=False)
    noticeable = finished_job(owner, template, ended_days_ago=28, files=False)
    running = finished_job(owner, template, ended_days_ago=40, status=JobStatus.RUNNING, files=False)
    told_long_ago = finished_job(owner, template, ended_days_ago=31, files=False,
                                 retention_notice_at=now - timedelta(days=4))
    told_yesterday = finished_job(owner, template, ended_days_ago=60, files=False,
                                  retention_notice_at=now - timedelta(days=1))
    never_told = finished_job(owner, template, ended_days_ago=60, files=False)
    already_gone = finished_job(owner, template, ended_days_ago=60, files=False, files_deleted_at=now,
                                retention_notice_at=now - timedelta(days=20))

    assert set(retention.due_for_notice(now)) == {noticeable, never_told}
    # A late notice moves the deletion: the owner always gets the days the notice promised.
    assert set(retention.due_for_deletion(now)) == {told_long_ago}
    assert retention.deletion_date(told_yesterday).date() == (now + timedelta(days=2)).date()
    assert young not in retention.due_for_notice(now) and running not in retention.due_for_deletion(now)
    assert already_gone not in retention.due_for_deletion(now)


def test_it_deletes_without_notice_when_the_admin_turned_notices_off(owner, template):
    RetentionPolicy.objects.create(pk=1, days=7, notice_days=0)
    old = finished_job(owner, template, ended_days_ago=8, files=False)
    assert list(retention.due_for_notice()) == []
    assert list(retention.due_for_deletion()) == [old]


# ---- the notice -------------------------------------------------------------------------------

def test_it_emails_the_owner_once_with_the_date(owner, template, inline_rq):
    RetentionPolicy.objects.create(pk=1, days=30, notice_days=3)
    job = finished_job(owner, template, ended_days_ago=28, files=False)
    assert retention.beat()["notices"] == 1
    assert retention.beat()["notices"] == 0  # the next beat: already told
    retention.send_notice(str(job.id))  # and a duplicated RQ job sends nothing more
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    job.refresh_from_db()
    # 28 days after its end, 30 days' retention: 2 days left, but the notice promised 3
    expected = timezone.localtime(job.retention_notice_at + timedelta(days=3)).strftime("%Y-%m-%d")
    assert message.to == ["alice@example.org"]
    assert "Beach shoot" in message.subject and expected in message.subject
    assert "Download what you want to keep" in message.body
    assert reverse("job-detail", args=[job.id]) in message.body
    assert EmailNotice.objects.get(key=f"retention:{job.id}").status == NoticeStatus.SENT


def test_an_owner_who_opted_out_gets_no_notice(owner, template, inline_rq):
    NotificationPreference.objects.create(user=owner, job_emails=False)
    job = finished_job(owner, template, ended_days_ago=28, files=False)
    retention.beat()
    assert mail.outbox == []
    assert EmailNotice.objects.get(key=f"retention:{job.id}").status == NoticeStatus.SKIPPED


# ---- Delete job and files ---------------------------------------------------------------------

@commits
def test_the_owner_deletes_a_job_and_its_files_on_both_sides(owner, template, local_cluster):
    job = finished_job(owner, template)
    media, folder = job.media_dir, Path(job.folder.root)
    assert media.is_dir() and folder.is_dir()

    page = session_client(owner).post(reverse("job-delete", args=[job.id]), follow=True)

    assert not media.exists() and not folder.exists()
    assert (folder.parent).is_dir()  # only the job's own folder went
    assert Target.objects.filter(job=job).count() == 0 and Source.objects.filter(job=job).count() == 0
    job.refresh_from_db()
    assert (job.name, job.total, job.done) == ("Beach shoot", 2, 2)  # the tombstone
    assert job.files_deleted_at is not None and job.cluster_files_deleted_at is not None
    text = page.content.decode()
    assert "were deleted from the portal" in text and "Files deleted on" in text
    assert len(local_cluster.commands) == 1 and local_cluster.commands[0][-1] == job.folder.root


def test_the_tombstone_page_offers_no_download_and_the_zip_is_gone(owner, template, local_cluster):
    job = finished_job(owner, template)
    client = session_client(owner)
    before = client.get(reverse("job-detail", args=[job.id])).content.decode()
    assert "Delete job and files" in before and "cannot be undone" in before and 'id="job-download"' in before
    client.post(reverse("job-delete", args=[job.id]))

    after = client.get(reverse("job-detail", args=[job.id])).content.decode()
    assert "Files deleted on" in after and "Beach shoot" in after
    assert 'id="job-download"' not in after and 'id="job-delete"' not in after and "Run again" not in after
    assert "anna-smith" not in after and "joe-portrait" not in after
    zipped = client.get(reverse("job-results-zip", args=[job.id]))
    assert zipped.status_code == 410 and "were deleted on" in zipped.content.decode()
    assert client.get(reverse("job-thumb", args=[job.id, 0])).status_code == 404
    assert "Beach shoot" in client.get(reverse("job-list")).content.decode()  # still listed


@commits
def test_the_api_deletes_answers_the_tombstone_and_410s_the_zip(owner, template, local_cluster):
    job = finished_job(owner, template)
    client, _ = token_client(owner)
    answer = client.delete(f"/api/v1/jobs/{job.id}")
    assert answer.status_code == 200
    body = answer.json()
    assert body["files_deleted_at"] and body["outputs"] == [] and body["progress"]["total"] == 2
    assert not job.media_dir.exists() and not Path(job.folder.root).exists()
    assert client.get(f"/api/v1/jobs/{job.id}").json()["files_deleted_at"] == body["files_deleted_at"]
    zipped = client.get(f"/api/v1/jobs/{job.id}/results.zip")
    assert zipped.status_code == 410 and "deleted" in zipped.json()["error"]
    assert client.delete(f"/api/v1/jobs/{job.id}").status_code == 410


def test_a_running_job_is_not_deleted_cancel_first(owner, template, local_cluster):
    job = finished_job(owner, template, status=JobStatus.RUNNING)
    client, _ = token_client(owner)
    answer = client.delete(f"/api/v1/jobs/{job.id}")
    assert answer.status_code == 409 and "Cancel it first" in answer.json()["error"]
    page = session_client(owner)
    assert 'id="job-delete"' not in page.get(reverse("job-detail", args=[job.id])).content.decode()
    page.post(reverse("job-delete", args=[job.id]))
    assert job.media_dir.is_dir() and Path(job.folder.root).is_dir() and local_cluster.commands == []
    job.refresh_from_db()
    assert job.files_deleted_at is None


@pytest.mark.parametrize("who", ["colleague", "stranger", "staff"])
def test_only_the_owner_can_delete(who, request, owner, template, local_cluster):
    job = finished_job(owner, template)
    other = request.getfixturevalue(who)
    client, _ = token_client(other)
    assert client.delete(f"/api/v1/jobs/{job.id}").status_code == 404
    page = session_client(other).post(reverse("job-delete", args=[job.id]))
    assert page.status_code in (302, 404)
    assert job.media_dir.is_dir() and Path(job.folder.root).is_dir()
    assert Target.objects.filter(job=job).count() == 2
    assert 'id="job-delete"' not in session_client(other).get(reverse("job-detail", args=[job.id])).content.decode()


@commits
def test_the_audit_log_records_counts_and_bytes_never_names(owner, template, local_cluster):
    job = finished_job(owner, template)
    session_client(owner).post(reverse("job-delete", args=[job.id]))
    entry = AuditEntry.objects.get(action="job.files_deleted")
    assert entry.actor == owner and entry.target_id == str(job.id)
    # 1 face photo + 2 inputs + 2 outputs + 2 thumbnails, their sizes summed
    assert entry.details["files"] == 7 and entry.details["bytes"] == 400 + 2 * (400 + 900 + 100)
    assert entry.details["reason"] == "owner"
    written = json.dumps(entry.details) + entry.target_repr
    for name in (*PHOTO_NAMES, "anna-smith", "000.jpg", "face"):
        assert name not in written
    cluster_entry = AuditEntry.objects.get(action="job.cluster_files_deleted")
    assert cluster_entry.details["existed"] is True


# ---- the slow beat ----------------------------------------------------------------------------

@commits
def test_the_beat_deletes_expired_jobs_after_the_notice(owner, template, local_cluster):
    RetentionPolicy.objects.create(pk=1, days=30, notice_days=3)
    expired = finished_job(owner, template, ended_days_ago=40, retention_notice_at=timezone.now() - timedelta(days=5))
    fresh = finished_job(owner, template, ended_days_ago=2, name="Fresh")

    counts = retention.beat()

    assert counts["deletions"] == 1
    assert not expired.media_dir.exists() and not Path(expired.folder.root).exists()
    assert fresh.media_dir.is_dir() and Path(fresh.folder.root).is_dir()
    assert AuditEntry.objects.get(action="job.files_deleted").details["reason"] == "retention"


@commits
def test_the_beat_asks_again_for_a_cluster_folder_left_by_an_outage(owner, template, local_cluster, fake_ssh):
    job = finished_job(owner, template)
    fake_ssh.unreachable("connection refused")
    retention.delete_job_files(job)  # the RQ task fails (RQ would keep it); the portal's files went
    job.refresh_from_db()
    assert job.files_deleted_at is not None and job.cluster_files_deleted_at is None
    fake_ssh(local_cluster)
    assert Path(job.folder.root).is_dir() and not job.media_dir.exists()
    Job.objects.filter(pk=job.pk).update(files_deleted_at=timezone.now() - timedelta(hours=1))

    assert retention.beat()["cluster"] == 1
    assert not Path(job.folder.root).exists()
    job.refresh_from_db()
    assert job.cluster_files_deleted_at is not None


def test_a_media_folder_that_is_a_link_is_unlinked_never_followed(owner, template, tmp_path, inline_rq):
    job = finished_job(owner, template, files=False)
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep.jpg").write_bytes(b"k")
    job.media_dir.parent.mkdir(parents=True)
    job.media_dir.symlink_to(precious)
    assert retention.delete_job_files(job) == retention.FilesDeleted(0, 0)
    assert not job.media_dir.is_symlink() and (precious / "keep.jpg").exists()


def test_the_watcher_runs_the_beat_and_a_failing_beat_never_stops_it(owner, template, monkeypatch, inline_rq):
    from django.core.management import call_command

    monkeypatch.setattr("jobs.management.commands.watch_cluster.refuse_insecure_start", lambda: None)
    job = finished_job(owner, template, ended_days_ago=28, files=False)
    call_command("watch_cluster", "--once", "--profile", "none-such")
    job.refresh_from_db()
    assert job.retention_notice_at is not None and len(mail.outbox) == 1  # the first cycle is a slow beat

    def broken(now=None):
        raise RuntimeError("database gone for a moment")

    monkeypatch.setattr(retention, "beat", broken)
    call_command("watch_cluster", "--once", "--profile", "none-such")  # logged, not raised
