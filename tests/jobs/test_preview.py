"""Try it on a few photos (jobs.job.preview): a small job of the first photos, before the big run; the
files stay the user's for the whole job's Start; a folder's preview takes its first photos on the
cluster; no email for it; both languages. Only the SSH seam is faked."""
from __future__ import annotations

import subprocess

import pytest
from django.core import mail
from django.urls import reverse

from cluster import RemoteEntry
from cluster.paths import answer_folder_listing
from jobs.job.submit import submit_job
from jobs.models import Job, JobStatus, Upload
from jobs.models.job import PREVIEW_PHOTOS
from jobs.usage.notifications import notify_job_finished

from .test_quotas_submit import FOLDER, NOTHING_SUBMITTED
from .test_uploads_tus import send


@pytest.fixture
def alice(client, owner):
    client.force_login(owner)
    return client


@pytest.fixture(scope="module")
def clip_bytes(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("clip") / "clip.mp4"
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i",
                    "testsrc2=size=160x120:rate=5:duration=1", "-c:v", "libx264", "-preset", "ultrafast",
                    "-pix_fmt", "yuv420p", str(path)], check=True)
    return path.read_bytes()


def form(template, face, targets, **more) -> dict:
    return {"template": template.pk, "consent": "on", "source_uploads": [face.id],
            "target_uploads": [t.id for t in targets], "name": "Wedding", **more}


def test_a_preview_runs_the_first_photos_and_leaves_every_file_for_start(alice, owner, template, jpeg_bytes,
                                                                        clip_bytes):
    face = send(alice, jpeg_bytes, "face.jpg", "source")
    chosen = [send(alice, clip_bytes, "intro.mp4", "target")]
    chosen += [send(alice, jpeg_bytes, f"p{i}.jpg", "target") for i in range(5)]
    r = alice.post(reverse("job-new"), {**form(template, face, chosen), "preview": "1"},
                   HTTP_ACCEPT="application/json")
    assert r.status_code == 201, r.content
    preview = Job.objects.get(pk=r.json()["id"])
    assert r.json()["url"] == reverse("job-detail", args=[preview.id])
    assert r.json()["live"] == reverse("job-live", args=[preview.id])
    # the first photos in the order chosen, the video left out
    assert preview.is_preview and preview.name == "Preview: Wedding"
    assert [t.name for t in preview.targets.order_by("index")] == ["p0.jpg", "p1.jpg", "p2.jpg"][:PREVIEW_PHOTOS]
    assert preview.sources.count() == 1 and preview.callback_url == ""
    # every file the user chose is still theirs: the whole job starts from the same ids
    assert Upload.objects.filter(pk__in=[face.pk, *[c.pk for c in chosen]]).count() == 7
    r = alice.post(reverse("job-new"), form(template, face, chosen))
    job = Job.objects.exclude(pk=preview.pk).get()
    assert r.status_code == 302 and not job.is_preview and job.total == 6
    assert sorted(t.name for t in job.targets.all()) == sorted(["intro.mp4", *[f"p{i}.jpg" for i in range(5)]])


@pytest.mark.parametrize("language, words", [
    ("en", "A preview runs on photos, and only videos are chosen. Start the whole job instead."),
    ("zh-hans", "预览只处理照片，而您只选了视频。请直接开始整个任务。"),
])
def test_a_preview_of_videos_only_is_refused_in_plain_words(alice, template, jpeg_bytes, clip_bytes, language,
                                                            words):
    face = send(alice, jpeg_bytes, "face.jpg", "source")
    clip = send(alice, clip_bytes, "intro.mp4", "target")
    r = alice.post(reverse("job-new"), {**form(template, face, [clip]), "preview": "1"},
                   HTTP_ACCEPT="application/json", HTTP_ACCEPT_LANGUAGE=language)
    assert r.status_code == 400 and r.json()["errors"] == [words]
    assert not Job.objects.exists()
    assert Upload.objects.filter(pk__in=[face.pk, clip.pk]).count() == 2 and Upload.objects.count() == 2  # no copy left


def test_a_refused_preview_says_why_like_start(alice, template, jpeg_bytes):
    face = send(alice, jpeg_bytes, "face.jpg", "source")
    photo = send(alice, jpeg_bytes, "p.jpg", "target")
    data = form(template, face, [photo], preview="1")
    del data["consent"]
    r = alice.post(reverse("job-new"), data, HTTP_ACCEPT="application/json")
    assert r.status_code == 400
    assert any("Confirm that you have the right" in e for e in r.json()["errors"])
    assert Upload.objects.count() == 2


@pytest.mark.parametrize("language, banner", [
    ("en", "A preview: the chosen template on the first 2 photos of your job"),
    ("zh-hans", "这是预览：在正式运行之前，用所选模板处理您任务中的前 2 张照片。"),
])
def test_without_a_script_the_preview_opens_its_own_page(alice, template, jpeg_bytes, language, banner):
    face = send(alice, jpeg_bytes, "face.jpg", "source")
    photos = [send(alice, jpeg_bytes, f"p{i}.jpg", "target") for i in range(2)]
    r = alice.post(reverse("job-new"), {**form(template, face, photos), "preview": "1"},
                   HTTP_ACCEPT_LANGUAGE=language)
    preview = Job.objects.get()
    assert r.status_code == 302 and r["Location"] == reverse("job-detail", args=[preview.id])
    page = alice.get(r["Location"], HTTP_ACCEPT_LANGUAGE=language).content.decode()
    assert banner in page and 'id="job-run-again"' not in page


def test_the_new_job_page_offers_it_in_both_languages(alice, template):
    assert "Try it on a few photos" in alice.get(reverse("job-new")).content.decode()
    assert "先用几张照片试试" in alice.get(reverse("job-new"), HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()


def test_a_folders_preview_takes_its_first_photos_on_the_cluster(fake_ssh, owner, template, jpeg_bytes, alice):
    entries = [RemoteEntry(name=n, path=f"{FOLDER}/{n}", type="file", size=1000, mtime=0)
               for n in ("a.mp4", "b.jpg", "c.png", "d.mov", "e.jpg", "f.jpg", "g.jpg")]
    runner = fake_ssh(on_run={"sh": lambda argv: answer_folder_listing(argv, entries), "sbatch": "4242\n"},
                      on_batch=NOTHING_SUBMITTED)
    face = send(alice, jpeg_bytes, "face.jpg", "source")
    r = alice.post(reverse("job-new"), {"template": template.pk, "consent": "on", "source_uploads": [face.id],
                                        "target_folder": FOLDER, "preview": "1"}, HTTP_ACCEPT="application/json")
    assert r.status_code == 201, r.content
    preview = Job.objects.get(pk=r.json()["id"])
    submit_job(str(preview.id))
    preview.refresh_from_db()
    assert [t.name for t in preview.targets.order_by("index")] == ["b.jpg", "c.png", "e.jpg"]
    assert preview.total == 3 and [c for c in runner.commands if c[0] == "sbatch"]


def test_no_email_is_sent_when_a_preview_ends(owner, template, settings):
    job = Job.objects.create(owner=owner, template=template, template_snapshot=template.snapshot().to_json(),
                             cluster=template.cluster, status=JobStatus.COMPLETED, is_preview=True, total=3, done=3)
    assert notify_job_finished(str(job.id)) == "" and mail.outbox == []
