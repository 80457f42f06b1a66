"""Videos you can follow, in a real browser: a running video's "frame 1,200 of 1,800 · about 40 s
left" on the job page (then moved on by a live event), a finished video's poster where a photo
shows its thumbnail, "1 person" rather than detections x frames; and the New job page's template
cards and estimate for a minute of video. The portal's own web server and Redis are real; the
job's rows are written here as the watcher would leave them (tests/jobs/test_watcher_video.py
follows the same rows from a worker's record).
Screenshots: <screenshots>/videos-*.png (desktop 1280 wide, phone 390 wide).
"""
from __future__ import annotations

import subprocess
import threading
import traceback
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from jobs.models import Job, JobStatus, Target, TargetStatus, Task, Template
from jobs.watcher.outputs import make_video_poster
from tests.e2e.shots import SHOTS
from tests.e2e.test_browser_live import CHROMIUM, CHROMIUM_ARGS, REPO, Tab, _sync_playwright, wait_for, web_server  # noqa: F401

SIZES = ((1280, 1000, "desktop"), (390, 844, "phone"))
FRAMES = "document.querySelector('li[data-target-index=\"0\"] .target-frames-text')"


def _publish_output(job, index) -> None:
    """`Publisher.output` + flush, as the watcher's cycle sends it, from a thread of its own
    (async_to_sync refuses to run under Playwright's loop)."""
    from jobs.live.protocol import Publisher

    errors = []

    def send():
        from django.db import connection

        try:
            pub = Publisher()
            pub.output(job, Target.objects.get(job=job, index=index))
            pub.flush()
        except BaseException:  # noqa: BLE001 - reported below
            errors.append(traceback.format_exc())
        finally:
            connection.close()

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive() and not errors, errors


@contextmanager
def _tabs(web_server, user):
    """A browser, and for each screen size (desktop, phone) a tab logged in as `user`: yields a list of
    (size name, tab) made one after another; each tab's context closes when the next is asked for."""
    session = Client()
    session.force_login(user)
    cookie = session.cookies[settings.SESSION_COOKIE_NAME].value
    with _sync_playwright()() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)

        def each():
            for width, height, name in SIZES:
                context = browser.new_context(base_url=web_server.url, viewport={"width": width, "height": height})
                context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": web_server.url}])
                yield name, Tab(context)
                context.close()
        try:
            yield each()
        finally:
            browser.close()


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
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    SHOTS.mkdir(parents=True, exist_ok=True)
    owner = User.objects.get(username="demo")
    template = Template.objects.get(slug="gpu-batch")
    job = _video_job(owner, template, Path(settings.MEDIA_ROOT) / "users" / str(owner.pk) / "jobs" / "media")
    expected = "frame 1,200 of 1,800 · about 40 s left"
    with _tabs(web_server, owner) as tabs:
        for name, tab in tabs:
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


def test_the_new_job_page_estimates_a_minute_of_video_by_its_frames(local, web_server, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with _tabs(web_server, User.objects.get(username="demo")) as tabs:
        for name, tab in tabs:
            page = tab.page
            page.goto("/jobs/new")
            card = page.locator(".template-card", has_text="GPU batch")
            facts = " ".join(card.locator(".template-facts").inner_text().split())
            # a measured time, or none yet; never the scheduler's words (issue 27)
            assert "for 100 photos (measured)" in facts or "Speed not measured yet" in facts, facts
            assert "per batch of" not in facts and "per task" not in facts and "GPU-hours" not in facts
            card.click()
            page.evaluate("document.dispatchEvent(new CustomEvent('uploads:changed', "
                          "{detail: {images: 2, videos: 1, frames: 1800}}))")
            line = page.text_content("#estimate")
            assert "Photos: 2, videos: 1 (1,800 frames in all)" in line, line
            page.evaluate("document.getElementById('estimate').scrollIntoView({block: 'end'})")
            page.screenshot(path=str(SHOTS / f"videos-new-job-{name}.png"), full_page=False)
            assert not tab.problems, tab.problems
