"""Videos you can follow, in a real browser: a running video's "frame 1,200 of 1,800 · about 40 s
left" on the job page (then moved on by a live event), a finished video's poster where a photo
shows its thumbnail, "1 person" rather than detections x frames; and the New job page's template
cards and estimate for a minute of video. The portal's own web server and Redis are real; the
job's rows are written here as the watcher would leave them (tests/portal/test_watcher_video.py
follows the same rows from a worker's record).
Screenshots: docs/screenshots/videos-*.png (desktop 1280 wide, phone 390 wide).
"""
from __future__ import annotations

import subprocess
import threading
import traceback
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from jobs.models import Job, JobStatus, Target, TargetStatus, Task, Template
from jobs.watcher.outputs import make_video_poster
from tests.e2e.test_browser_live import (CHROMIUM, CHROMIUM_ARGS, REPO, Tab, _sync_playwright, wait_for,  # noqa: F401
                                         web_server)

SHOTS = REPO / "docs" / "screenshots"
FRAMES = "document.querySelector('li[data-target-index=\"0\"] .target-frames-text')"


class _Output(threading.Thread):
    """`Publisher.output` + flush from a thread of its own (async_to_sync refuses Playwright's loop)."""

    def __init__(self, job, index):
        super().__init__(daemon=True)
        self.job, self.index, self.error = job, index, ""

    def run(self) -> None:
        from django.db import connection

        from jobs.live.protocol import Publisher

        try:
            pub = Publisher()
            pub.output(self.job, Target.objects.get(job=self.job, index=self.index))
            pub.flush()
        except BaseException:  # noqa: BLE001 - reported by the test
            self.error = traceback.format_exc()
        finally:
            connection.close()


def _publish_output(job, index) -> None:
    t = _Output(job, index)
    t.start()
    t.join(timeout=30)
    assert not t.is_alive() and not t.error, t.error


def _video_job(owner, template, media: Path) -> Job:
    job = Job.objects.create(owner=owner, template=template, template_snapshot=template.snapshot().to_json(),
                             cluster=template.cluster, status=JobStatus.RUNNING, slurm_job_id="4242", total=3,
                             name="Interview clips")
    Task.objects.create(job=job, index=0, state="RUNNING", node="gpu1")
    clip = media / "done-clip.mp4"
    clip.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=25:duration=3",
                    "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", str(clip)], check=True)
    poster = media / "thumbs" / "done-clip.jpg"
    assert make_video_poster(str(clip), str(poster))
    Target.objects.create(job=job, index=0, name="interview-take-2.mp4", output_name="interview-take-2.mp4",
                          status=TargetStatus.RUNNING, seconds=80.0, frames_done=1200, frames_total=1800)
    Target.objects.create(job=job, index=1, name="street-walk.mp4", output_name="street-walk.mp4",
                          status=TargetStatus.DONE, seconds=41.5, frames_done=75, frames_total=75, faces_found=1,
                          faces_swapped=1, output_file=str(clip), thumbnail_file=str(poster))
    Target.objects.create(job=job, index=2, name="portrait.jpg", output_name="portrait.jpg",
                          status=TargetStatus.WAITING)
    job.recount()
    return job


def test_a_running_video_shows_its_frames_and_time_left_live(local, web_server, monkeypatch):
    sync_playwright = _sync_playwright()
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    SHOTS.mkdir(parents=True, exist_ok=True)
    owner = User.objects.get(username="demo")
    template = Template.objects.get(slug="gpu-batch")
    job = _video_job(owner, template, Path(settings.MEDIA_ROOT) / "users" / str(owner.pk) / "jobs" / "media")
    session = Client()
    session.force_login(owner)
    cookie = session.cookies[settings.SESSION_COOKIE_NAME].value
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            expected = "frame 1,200 of 1,800 · about 40 s left"
            for width, height, name in ((1280, 1000, "desktop"), (390, 844, "phone")):
                context = browser.new_context(base_url=web_server.url, viewport={"width": width, "height": height})
                context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": web_server.url}])
                tab = Tab(context)
                page = tab.page
                page.goto(f"/jobs/{job.id}")
                page.wait_for_selector("#live-indicator[data-mode=live]", timeout=15_000)
                wait_for(page, f"{FRAMES} !== null", 10_000)
                assert page.evaluate(f"{FRAMES}.textContent") == expected
                bar = page.evaluate("document.querySelector('li[data-target-index=\"0\"] .progress-done').style.width")
                assert bar.startswith("66.6" if "1,200" in expected else "83.3")
                done = page.locator('li[data-target-index="1"]')
                assert done.locator(".thumb img").count() == 1  # the poster, where a photo has its thumbnail
                assert "1 person" in done.inner_text() and "face" not in done.inner_text()
                page.locator("#targets").scroll_into_view_if_needed()
                page.screenshot(path=str(SHOTS / f"videos-job-{name}.png"), full_page=False)
                if name == "desktop":
                    # the watcher's next cycle: 1,500 frames after 100 s -> 20 s left
                    Target.objects.filter(job=job, index=0).update(frames_done=1500, seconds=100.0)
                    _publish_output(job, 0)
                    wait_for(page, f"{FRAMES}.textContent.indexOf('1,500') >= 0", 10_000)
                    expected = "frame 1,500 of 1,800 · about 20 s left"
                    assert page.evaluate(f"{FRAMES}.textContent") == expected
                    assert len(tab.navigations) == 1  # no reload
                assert not tab.problems, tab.problems
                context.close()
        finally:
            browser.close()


def test_the_new_job_page_estimates_a_minute_of_video_by_its_frames(local, web_server, monkeypatch):
    sync_playwright = _sync_playwright()
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    SHOTS.mkdir(parents=True, exist_ok=True)
    owner = User.objects.get(username="demo")
    session = Client()
    session.force_login(owner)
    cookie = session.cookies[settings.SESSION_COOKIE_NAME].value
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for width, height, name in ((1280, 1000, "desktop"), (390, 844, "phone")):
                context = browser.new_context(base_url=web_server.url, viewport={"width": width, "height": height})
                context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": web_server.url}])
                tab = Tab(context)
                page = tab.page
                page.goto("/jobs/new")
                card = page.locator(".template-card", has_text="GPU batch")
                facts = " ".join(card.locator(".template-facts").inner_text().split())
                assert "for 100 photos" in facts and "per batch of" in facts and "per task" not in facts
                card.click()
                page.evaluate("document.dispatchEvent(new CustomEvent('uploads:changed', "
                              "{detail: {images: 2, videos: 1, frames: 1800}}))")
                line = page.text_content("#estimate")
                assert "Photos: 2, videos: 1 (1,800 frames in all)" in line, line
                page.evaluate("document.getElementById('estimate').scrollIntoView({block: 'end'})")
                page.screenshot(path=str(SHOTS / f"videos-new-job-{name}.png"), full_page=False)
                assert not [p for p in tab.problems if "uploads" not in p], tab.problems
                context.close()
        finally:
            browser.close()
