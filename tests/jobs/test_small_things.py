"""Small things users stumbled on (issue 27, item 11), as a user would notice them: a one-video job's
bar that stayed at 0 % while its card showed frames, "10 of 10 photos and 1 video done 91 %" after a
cancel, file icons that looked like unticked checkboxes, a relative folder refused without a hint,
and the job list's dates in a second format."""
from __future__ import annotations

import html
import json
import re
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from cluster import CommandTimedOut
from jobs.clusters.folder_check import outside_words, suggestions
from jobs.clusters.team_roots import Roots
from jobs.models import Job, JobStatus, Target, TargetStatus
from jobs.web.views.pages import progress_pct
from tests.fake_ssh import run_here
from tests.jobs.test_pages_jobs import make_job
from tests.jobs.test_videos_format_js import node

FORMAT_JS = Path(__file__).resolve().parents[2] / "static" / "js" / "live" / "format.js"
LANGS = [("en", "1 cancelled"), ("zh-hans", "已取消 1 个")]


def page(client, user, job, lang="en") -> str:
    client.force_login(user)
    client.cookies["django_language"] = lang
    return html.unescape(client.get(reverse("job-detail", args=[job.id])).content.decode())


def progress_text(body: str) -> str:
    m = re.search(r'<p class="progress-text" id="progress-text"[^>]*>(.*?)</p>', body, re.S)
    assert m, "no progress sentence"
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", m.group(1))).strip()


# ---- a: a running video moves the job's bar ----------------------------------------------------

def test_a_one_video_jobs_bar_moves_with_its_frames(client, owner, template):
    job = make_job(owner, template, status=JobStatus.RUNNING, slurm_job_id="7", total=1, videos=1)
    Target.objects.create(job=job, index=0, name="clip.mp4", output_name="clip.mp4", status=TargetStatus.RUNNING,
                          frames_done=450, frames_total=900, seconds=30)
    body = page(client, owner, job)
    assert 'class="progress-done" style="width: 50%"' in body
    assert progress_text(body).endswith("50%")
    assert "0 of 1 video done" in progress_text(body)


def test_only_running_videos_count_and_a_video_is_whole_only_when_done(client, owner, template):
    job = make_job(owner, template, status=JobStatus.RUNNING, slurm_job_id="7", total=4, done=1)
    Target.objects.create(job=job, index=0, name="a.jpg", output_name="a.jpg", status=TargetStatus.DONE)
    Target.objects.create(job=job, index=1, name="b.mp4", output_name="b.mp4", status=TargetStatus.RUNNING,
                          frames_done=900, frames_total=900)  # its last frame written, not yet done
    Target.objects.create(job=job, index=2, name="c.mp4", output_name="c.mp4", status=TargetStatus.WAITING,
                          frames_done=500, frames_total=900)  # an old attempt's frames: not running now
    Target.objects.create(job=job, index=3, name="d.jpg", output_name="d.jpg")
    body = page(client, owner, job)
    # (1 + 0.99) / 4 = 49.75 %: not 50 % as if the video were done, nothing from the waiting one
    assert progress_text(body).endswith("50%") and 'class="progress-done" style="width: 50%"' in body
    job.done = 2
    Target.objects.filter(index=1, job=job).update(status=TargetStatus.DONE)
    job.save()
    assert progress_text(page(client, owner, job)).endswith("50%")


@pytest.mark.parametrize("done, failed, total, frames", [
    (0, 0, 1, [{"done": 450, "total": 900}]),
    (3, 1, 7, [{"done": 1, "total": 3}, {"done": 899, "total": 900}]),
    (0, 0, 1, [{"done": 900, "total": 900}]),
    (2, 0, 2, []),
    (0, 0, 0, []),
    (5, 2, 10, [{"done": 10, "total": 0}]),
])
def test_the_live_bar_and_the_server_agree(done, failed, total, frames):
    assert node(f"f.progressPct({done}, {failed}, {total}, {json.dumps(frames)})") == progress_pct(done, failed, total, frames)


# ---- b: a cancelled job says what it did not do ------------------------------------------------

@pytest.mark.parametrize("lang, cancelled", LANGS)
def test_a_cancelled_job_says_what_was_cancelled(client, owner, template, lang, cancelled):
    job = make_job(owner, template, status=JobStatus.CANCELLED, slurm_job_id="7", total=11, done=10, videos=1)
    for i in range(10):
        Target.objects.create(job=job, index=i, name=f"p{i}.jpg", output_name=f"p{i}.jpg", status=TargetStatus.DONE)
    Target.objects.create(job=job, index=10, name="clip.mp4", output_name="clip.mp4", status=TargetStatus.CANCELLED)
    text = progress_text(page(client, owner, job, lang))
    assert cancelled in text and text.endswith("91%")
    if lang == "en":
        # "10 of 10 photos and 1 video done" read as if everything were done
        assert "10 of 11 (10 photos and 1 video) done" in text
    else:
        assert "10 / 11 个（10 张照片和1 个视频）" in text


def test_an_ended_job_says_what_was_not_done(client, owner, template):
    job = make_job(owner, template, status=JobStatus.LOST, slurm_job_id="7", total=4, done=1, failed=1)
    text = progress_text(page(client, owner, job))
    assert "1 failed" in text and "2 not done" in text and text.endswith("50%")


# ---- c: files look like files ------------------------------------------------------------------

def test_the_folder_browser_gives_photos_and_videos_their_own_glyphs(client, owner, template, tmp_path, fake_ssh):
    shoot = tmp_path / "storage" / "shoot"
    (shoot / "day 2").mkdir(parents=True)
    for name in ("bride.JPG", "dance.mp4", "notes.txt"):
        (shoot / name).write_bytes(b"x")
    template.cluster.target_roots = [str(tmp_path / "storage")]
    template.cluster.save()
    fake_ssh(on_run=run_here)
    client.force_login(owner)
    body = client.get(reverse("folder-browse") + f"?path={shoot}").content.decode()
    icons = dict((name, kind) for kind, name in re.findall(r'class="icon (icon-[\w -]+)" aria-hidden="true"></span>([^<]+)<', body))
    assert icons == {"day 2": "icon-dir", "bride.JPG": "icon-file icon-photo", "dance.mp4": "icon-file icon-video",
                     "notes.txt": "icon-file icon-other"}
    css = (Path(__file__).resolve().parents[2] / "static" / "css" / "portal.css").read_text()
    rule = re.search(r"\.icon-file \{([^}]*)\}", css).group(1)
    assert "border:" not in rule and "clip-path" in rule  # a sheet with a folded corner, not a box


# ---- d: a relative or outside folder gets a suggestion ----------------------------------------

def test_suggestions_are_the_roots_that_could_hold_the_folder():
    roots = ["/srv/ffportal/storage", "/data/shared/"]
    assert suggestions("ux3/photos", roots) == ["/srv/ffportal/storage/ux3/photos", "/data/shared/ux3/photos"]
    assert suggestions("/storage/ux3/photos", roots) == ["/srv/ffportal/storage/ux3/photos"]
    assert suggestions("/etc", roots) == []
    assert suggestions("../etc", roots) == []


@pytest.fixture
def storage(template, tmp_path, fake_ssh):
    root = tmp_path / "storage"
    (root / "ux3" / "photos").mkdir(parents=True)
    (root / "ux3" / "photos" / "a.jpg").write_bytes(b"x")
    template.cluster.target_roots = [str(root)]
    template.cluster.save()
    fake_ssh(on_run=run_here)
    return root


@pytest.mark.parametrize("lang, words", [("en", "Did you mean {}?"), ("zh-hans", "您是不是要找 {}？")])
def test_a_relative_folder_is_answered_with_the_folder_it_meant(client, owner, storage, lang, words):
    client.force_login(owner)
    client.cookies["django_language"] = lang
    found = client.get(reverse("folder-check"), {"path": "ux3/photos"}).json()
    assert not found["ok"] and words.format(storage / "ux3" / "photos") in found["summary"]


@pytest.mark.parametrize("lang, words", [("en", "Did you mean {}?"), ("zh-hans", "您是不是要找 {}？")])
def test_start_answers_a_relative_folder_with_the_folder_it_meant(client, owner, template, storage, jpeg_bytes,
                                                                   settings, lang, words):
    """Start says the same as the folder check, next to the field, and starts nothing."""
    settings.FOLDER_CHECK_ON_START = True
    client.force_login(owner)
    client.cookies["django_language"] = lang
    r = client.post(reverse("job-new"), {"template": template.pk, "consent": "on", "target_folder": "ux3/photos",
                                         "source": SimpleUploadedFile("face.jpg", jpeg_bytes, "image/jpeg")})
    assert r.status_code == 200 and words.format(storage / "ux3" / "photos") in r.content.decode()
    assert not Job.objects.exists()


def test_a_folder_with_no_match_is_answered_with_the_allowed_folders(client, owner, storage):
    client.force_login(owner)
    found = client.get(reverse("folder-check"), {"path": "ux9/nothing"}).json()
    assert not found["ok"]
    assert found["summary"] == (f"ux9/nothing is outside the folders you may use. Folders you may use: {storage}. "
                                "Pick one with the folder browser.")


# ---- g: one date format on the job list --------------------------------------------------------

@pytest.mark.parametrize("lang", ["en", "zh-hans"])
def test_the_job_list_writes_dates_as_the_job_page_does(client, owner, template, settings, lang):
    settings.TIME_ZONE = "Asia/Shanghai"
    job = make_job(owner, template, status=JobStatus.COMPLETED)
    type(job).objects.filter(pk=job.pk).update(created_at=datetime(2026, 12, 1, 15, 48, tzinfo=ZoneInfo("UTC")))
    client.force_login(owner)
    client.cookies["django_language"] = lang
    body = client.get(reverse("job-list")).content.decode()
    assert ">2026-12-01 23:48</time>" in body


def test_the_live_list_writes_the_same_date():
    assert node('f.pageDate("2026-12-01T15:48:00+00:00", "Asia/Shanghai")') == "2026-12-01 23:48"
    source = (FORMAT_JS.parent / "job_list.js").read_text()
    assert "pageDate(job.created_at" in source and "toLocaleString" not in (FORMAT_JS.read_text() + source)
    assert node('f.pageDate("2026-12-31T16:05:00Z", "Asia/Shanghai")') == "2027-01-01 00:05"



def test_a_cluster_that_stops_answering_is_asked_about_one_suggestion_only(template, fake_ssh):
    """Start asks for suggestions inside the web request: a cluster that times out is not asked about
    the next candidate (up to four), and the refusal still says which folders may be used."""
    asked = []

    def too_slow(argv):
        asked.append(argv)
        raise CommandTimedOut("no answer in 15 s")

    words = outside_words("ux3/photos", Roots(("/srv/a", "/srv/b", "/srv/c"), ()), fake_ssh(on_run=too_slow))
    assert len(asked) == 1
    assert words.startswith("ux3/photos is outside the folders you may use. Folders you may use: /srv/a, /srv/b")
