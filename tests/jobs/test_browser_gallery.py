"""A target's results in a real browser: the portal's web server (portal/server.py) in its own
process against this test's database file, headless Chromium, a finished job whose outputs are real
files (a photo and a video, before and after). No cluster is needed: nothing here runs a job.

It drags the divider and sees the clip follow, moves it with the keyboard, zooms to 200 % and pans
(the divider still cuts where it stands in the frame), switches to side by side and back, goes to
the next target with →, seeks the video and finds both videos at the same time, plays them and
finds them within two frames of each other. Screenshots: <screenshots>/results-*.png (tests/e2e/shots.py).
"""
from __future__ import annotations

import io
import re
import subprocess
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from PIL import Image, ImageOps

from jobs.models import Job, JobStatus, Source, Target, TargetStatus
from tests.e2e.shots import SHOTS
from tests.e2e.test_browser_live import CHROMIUM, CHROMIUM_ARGS, _sync_playwright, running_server, wait_for

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = SHOTS  # results-*.png
FPS = 25
FRAME = 1 / FPS
PHOTO_SIZE = 800

pytestmark = pytest.mark.slow


@pytest.fixture
def web_server(transactional_db, tmp_path):
    with running_server(tmp_path) as server:
        yield server


def video(path: Path, negate: bool) -> bytes:
    """A 4 s, 25 fps test pattern (H.264); `negate`: its colours turned round, as a "result"."""
    cmd = ["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", f"testsrc=size=320x240:rate={FPS}:duration=4"]
    cmd += ["-vf", "negate"] if negate else []
    subprocess.run([*cmd, "-c:v", "libx264", "-pix_fmt", "yuv420p", "-movflags", "+faststart", str(path)],
                   check=True, timeout=60)
    return path.read_bytes()


@pytest.fixture
def finished_job(owner, template, jpeg_bytes, tmp_path):
    """Three targets: a photo, a video, a photo; each with its upload (before) and its output (after)."""
    job = Job.objects.create(owner=owner, template=template, template_snapshot=template.snapshot().to_json(),
                             cluster=template.cluster, name="Gallery walk", status=JobStatus.COMPLETED, total=3, done=3)
    outputs, thumbs = job.media_dir / "outputs", job.media_dir / "thumbs"
    outputs.mkdir(parents=True)
    thumbs.mkdir(parents=True)
    with Image.open(io.BytesIO(jpeg_bytes)) as im:
        big = im.resize((PHOTO_SIZE, PHOTO_SIZE))  # at 200 % wider than the frame: something to pan
        before, after = io.BytesIO(), io.BytesIO()
        big.save(before, format="JPEG")
        ImageOps.grayscale(big).convert("RGB").save(after, format="JPEG")
        im.resize((160, 160)).save(thumbs / "astronaut.jpg")
    before_photo, after_photo = before.getvalue(), after.getvalue()
    files = [("astronaut.jpg", before_photo, after_photo),
             ("clip.mp4", video(tmp_path / "before.mp4", False), video(tmp_path / "after.mp4", True)),
             ("second.jpg", before_photo, after_photo)]
    for index, (name, before, after) in enumerate(files):
        (outputs / name).write_bytes(after)
        Target.objects.create(job=job, index=index, name=f"shoot/{name}", output_name=name, status=TargetStatus.DONE,
                              upload=SimpleUploadedFile(name, before), output_file=str(outputs / name),
                              thumbnail_file=str(thumbs / "astronaut.jpg") if index == 0 else "", faces_swapped=1)
    face = io.BytesIO()
    with Image.open(io.BytesIO(jpeg_bytes)) as im:
        im.crop((160, 20, 340, 200)).save(face, format="JPEG")
    Source.objects.create(job=job, file=SimpleUploadedFile("anna.jpg", face.getvalue()), original_name="anna.jpg")
    return job


def clip_px(page) -> float:
    """Where the "after" starts, in the picture's own (zoomed) pixels: the left inset of its clip-path."""
    clip = page.evaluate("getComputedStyle(document.getElementById('ba-after')).clipPath")
    m = re.match(r"inset\(0px 0px 0px ([\d.]+)px\)", clip)
    assert m, clip
    return float(m.group(1))


def frame(page) -> dict:
    return page.evaluate("""(() => {
      const view = document.getElementById('ba-view').getBoundingClientRect();
      const c = window.ffpGallery.compare;
      return {left: view.left, top: view.top, width: view.width, height: view.height,
              panX: c.panX, panY: c.panY, scale: c.scale, canvasWidth: document.getElementById('ba-canvas').offsetWidth};
    })()""")


def drag(page, x0, y0, x1, y1) -> None:
    page.mouse.move(x0, y0)
    page.mouse.down()
    page.mouse.move((x0 + x1) / 2, (y0 + y1) / 2, steps=4)
    page.mouse.move(x1, y1, steps=4)
    page.mouse.up()


def times(page) -> tuple[float, float]:
    return tuple(page.evaluate("[document.getElementById('video-before').currentTime,"
                               " document.getElementById('video-after').currentTime]"))


def test_it_compares_zooms_goes_next_and_keeps_videos_in_step(web_server, finished_job, owner, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    sync_playwright = _sync_playwright()
    session = Client()
    session.force_login(owner)
    cookie = session.cookies[settings.SESSION_COOKIE_NAME].value
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    job_id = finished_job.id

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(base_url=web_server.url, viewport={"width": 1280, "height": 900})
            context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": web_server.url}])
            page = context.new_page()
            errors = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("console", lambda msg: errors.append(f"{msg.text} {msg.location}") if msg.type == "error" else None)
            page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)

            # ---- the slider over a photo ----
            page.goto(f"/jobs/{job_id}/targets/0")
            wait_for(page, "window.ffpGallery && window.ffpGallery.compare.scale > 0"
                           " && document.querySelector('#ba-after img').complete", 10_000)
            assert page.locator("#gallery").get_attribute("class").split().count("mode-slider") == 1
            assert page.locator("#gallery-position").inner_text().strip() == "1 of 3"
            f = frame(page)
            assert abs(clip_px(page) - (f["width"] / 2 - f["panX"])) < 2  # starts in the middle of the frame
            page.screenshot(path=str(ARTIFACTS / "results-slider-desktop.png"))
            # the face used, small, served by the job's own page for it (job-source)
            wait_for(page, "document.querySelector('.source-faces img') &&"
                           " document.querySelector('.source-faces img').naturalWidth > 0", 10_000)
            assert page.locator(".source-faces img").get_attribute("alt") == "Face photo used: anna.jpg"
            page.screenshot(path=str(ARTIFACTS / "results-slider-desktop-full.png"), full_page=True)

            handle = page.locator("#ba-divider .ba-handle").bounding_box()
            drag(page, handle["x"] + handle["width"] / 2, handle["y"] + handle["height"] / 2,
                 f["left"] + f["width"] * 0.25, handle["y"] + handle["height"] / 2)
            assert abs(clip_px(page) - (f["width"] * 0.25 - f["panX"])) < 2
            assert page.locator("#ba-divider").get_attribute("aria-valuenow") == "25"

            page.locator("#ba-divider").focus()
            for _ in range(5):
                page.keyboard.press("ArrowRight")  # the divider's arrows, not the page's "next"
            assert page.locator("#ba-divider").get_attribute("aria-valuenow") == "30"
            assert abs(clip_px(page) - (f["width"] * 0.30 - f["panX"])) < 2
            assert page.url.endswith(f"/jobs/{job_id}/targets/0")

            # ---- zoom 200 %, pan: the divider still cuts where it stands in the frame ----
            page.get_by_role("button", name="200 %").click()
            f = frame(page)
            assert f["scale"] == 2 and f["canvasWidth"] == 2 * PHOTO_SIZE
            assert abs(clip_px(page) - (f["width"] * 0.30 - f["panX"])) < 2
            cx, cy = f["left"] + f["width"] * 0.7, f["top"] + f["height"] / 2
            drag(page, cx, cy, cx - 150, cy - 60)  # the picture moves; the divider stays
            moved = frame(page)
            assert moved["panX"] == pytest.approx(f["panX"] - 150, abs=2)
            assert moved["panY"] == pytest.approx(f["panY"] - 60, abs=2)
            assert abs(clip_px(page) - (f["width"] * 0.30 - moved["panX"])) < 2
            assert page.locator("#ba-divider").get_attribute("aria-valuenow") == "30"
            handle = page.locator("#ba-divider .ba-handle").bounding_box()
            drag(page, handle["x"] + handle["width"] / 2, handle["y"] + handle["height"] / 2,
                 f["left"] + f["width"] * 0.6, handle["y"] + handle["height"] / 2)
            assert abs(clip_px(page) - (f["width"] * 0.6 - moved["panX"])) < 2
            page.screenshot(path=str(ARTIFACTS / "results-zoom-desktop.png"))
            page.get_by_role("button", name="100 %").click()
            assert frame(page)["canvasWidth"] == PHOTO_SIZE
            page.get_by_role("button", name="Fit").click()

            # ---- side by side and back ----
            page.get_by_role("button", name="Side by side").click()
            before_box = page.locator(".ba-before img").bounding_box()
            after_box = page.locator(".ba-after img").bounding_box()
            assert after_box["x"] >= before_box["x"] + before_box["width"]
            assert page.evaluate("getComputedStyle(document.getElementById('ba-after')).clipPath") == "none"
            page.screenshot(path=str(ARTIFACTS / "results-side-desktop.png"))
            page.get_by_role("button", name="Slider").click()
            f = frame(page)
            assert abs(clip_px(page) - (f["width"] * 0.6 - f["panX"])) < 2  # where it was left

            # ---- → goes to the next target ----
            page.evaluate("document.activeElement && document.activeElement.blur()")
            page.keyboard.press("ArrowRight")
            page.wait_for_url(f"**/jobs/{job_id}/targets/1")
            assert page.locator("#gallery-position").inner_text().strip() == "2 of 3"

            # ---- the video: one seek moves both, playing keeps them together ----
            wait_for(page, "document.getElementById('video-before').readyState >= 2"
                           " && document.getElementById('video-after').readyState >= 2", 15_000)
            assert page.locator("#video-bar").is_visible()
            assert page.evaluate("document.getElementById('video-before').controls") is False
            page.locator("#video-seek").fill("2.2")
            wait_for(page, "!document.getElementById('video-before').seeking"
                           " && !document.getElementById('video-after').seeking"
                           " && Math.abs(document.getElementById('video-before').currentTime - 2.2) < 0.01", 10_000)
            before_t, after_t = times(page)
            assert abs(after_t - before_t) < FRAME / 2, (before_t, after_t)
            page.locator("#video-play").click()
            wait_for(page, "document.getElementById('video-before').currentTime > 2.9", 10_000)
            before_t, after_t = times(page)
            assert page.evaluate("!document.getElementById('video-after').paused")
            assert abs(after_t - before_t) <= 2 * FRAME, (before_t, after_t)
            page.locator("#video-play").click()
            wait_for(page, "document.getElementById('video-before').paused"
                           " && !document.getElementById('video-after').seeking", 5_000)
            before_t, after_t = times(page)
            assert abs(after_t - before_t) < FRAME / 2, (before_t, after_t)
            f = frame(page)  # the slider works over the video too
            drag(page, f["left"] + f["width"] / 2, f["top"] + f["height"] / 2, f["left"] + f["width"] * 0.8,
                 f["top"] + f["height"] / 2)
            assert abs(clip_px(page) - (f["width"] * 0.8 - f["panX"])) < 2
            page.screenshot(path=str(ARTIFACTS / "results-video-desktop.png"))

            # ---- ← goes back (from the page, not from the focused divider); the phone ----
            page.evaluate("document.activeElement && document.activeElement.blur()")
            page.keyboard.press("ArrowLeft")
            page.wait_for_url(f"**/jobs/{job_id}/targets/0")
            page.set_viewport_size({"width": 390, "height": 844})
            wait_for(page, "window.ffpGallery && window.ffpGallery.compare.scale > 0", 10_000)
            assert page.evaluate("document.documentElement.scrollWidth") <= 390
            page.screenshot(path=str(ARTIFACTS / "results-slider-phone.png"), full_page=True)

            # ---- the job list: each job's first result ----
            page.set_viewport_size({"width": 1280, "height": 900})
            page.goto("/")
            thumb = page.locator(f'tr[data-job-id="{job_id}"] img.job-thumb')
            wait_for(page, f"document.querySelector('tr[data-job-id=\"{job_id}\"] img.job-thumb').naturalWidth > 0",
                     10_000)
            assert thumb.get_attribute("alt") == "First result of Gallery walk"
            page.screenshot(path=str(ARTIFACTS / "results-job-list-desktop.png"))
            # a job started elsewhere arrives live: its row has the placeholder and names every column.
            # A minute after the newest row (the server's clock): the browser's may be another.
            wait_for(page, "window.ffpLive !== undefined", 10_000)
            page.evaluate("""window.ffpLive.renderAll([{id: '00000000-0000-4000-8000-000000000001', name: 'Arrived live',
                url: '/jobs/00000000-0000-4000-8000-000000000001', created_at: new Date(Date.parse(
                  document.querySelector('#jobs-table tbody tr[data-created]').dataset.created) + 60000).toISOString(),
                template_name: 'Quick GPU', status: 'running', progress: {total: 4, done: 1, failed: 0}}])""")
            live_row = page.locator('tr[data-job-id="00000000-0000-4000-8000-000000000001"]')
            assert live_row.locator(".job-thumb-none").count() == 1
            assert live_row.evaluate("tr => Array.from(tr.cells).map(td => td.getAttribute('data-label'))") == \
                page.evaluate("Array.from(document.querySelectorAll('#jobs-table thead th')).map(th => th.getAttribute('data-label'))")
            assert None not in live_row.evaluate("tr => Array.from(tr.cells).map(td => td.getAttribute('data-label'))")
            page.set_viewport_size({"width": 390, "height": 844})
            page.screenshot(path=str(ARTIFACTS / "results-job-list-phone.png"), full_page=True)
            assert not [e for e in errors if "/favicon.ico" not in e], errors  # the site has no icon (not this page's)
        finally:
            browser.close()
