"""The New job page as a first-time user meets it, in a real browser against the real portal server
(portal/server.py, its own process), real Redis and the real local cluster (the folder check asks it
over SSH): nothing is mocked.

- a 200 MB video dropped on the targets area is sent at once, with visible progress; Start waits;
- the tab is closed mid-way (the page asks first); reopened, the form offers the file sent earlier,
  and choosing the same file again sends only the rest: bytes sent twice < 10 % of the file;
- a photo without a face is refused the moment it arrives, and Replace swaps in a good one;
- an empty folder is refused as it is typed, before Start;
- every form error at once, with every file kept; then a Start that works.

The upload is slowed to ~25 MB/s in the browser (DevTools network conditions), so that "mid-way"
is a moment a test can catch on any machine; the bytes are counted by the server (Upload.received).
Screenshots: <screenshots>/uploads-*.png.
"""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from jobs.models import Job, Upload
from tests.e2e.conftest import SAMPLES
from tests.e2e.shots import SHOTS
from tests.e2e.test_browser_live import CHROMIUM, CHROMIUM_ARGS, Tab, _sync_playwright, web_server  # noqa: F401

MB = 1000 * 1000
THROTTLE_BYTES_PER_S = 25 * MB


def big_video(path: Path) -> Path:
    """A real ~200 MB video (raw frames in Matroska: made in a second or two, no encoding)."""
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=640x480:rate=25",
                    "-frames:v", "440", "-c:v", "rawvideo", "-pix_fmt", "yuv420p", str(path)], check=True, timeout=120)
    assert path.stat().st_size > 200 * MB
    return path


def no_face_photo(path: Path) -> Path:
    import numpy as np
    from PIL import Image

    Image.fromarray(np.random.default_rng(1).integers(0, 255, (480, 640, 3), dtype=np.uint8)).save(path, "JPEG")
    return path


def drop_files(page, zone: str, paths: list[Path]) -> None:
    """Drag and drop files from disk onto an upload area, as a user does: the files are handed to
    the page through a file input of the test's own (backed by the files on disk, never copied
    into the page), then dropped on the area as a DataTransfer."""
    page.evaluate("""() => { if (!document.getElementById('test-dnd')) {
        const i = document.createElement('input'); i.type = 'file'; i.multiple = true; i.id = 'test-dnd';
        i.style.display = 'none'; document.body.appendChild(i); } }""")
    page.set_input_files("#test-dnd", [str(p) for p in paths])
    page.evaluate("""(zone) => {
        const dt = new DataTransfer();
        for (const f of document.getElementById('test-dnd').files) dt.items.add(f);
        const target = document.querySelector(zone + ' [data-drop]');
        target.dispatchEvent(new DragEvent('dragover', {dataTransfer: dt, bubbles: true, cancelable: true}));
        target.dispatchEvent(new DragEvent('drop', {dataTransfer: dt, bubbles: true, cancelable: true}));
    }""", zone)


def wait_until(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout}s: {what}")


def item(page, zone: str, name: str):
    """A file chosen in an upload area (not one offered among the files sent earlier)."""
    return page.locator(f"{zone} .upload-item:not(.upload-earlier-item)", has_text=name)


def test_uploads_never_lose_work_and_mistakes_are_caught_before_start(local, folder, redis_queue, web_server, tmp_path, monkeypatch):
    sync_playwright = _sync_playwright()
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # ORM reads beside Playwright's loop
    SHOTS.mkdir(parents=True, exist_ok=True)
    video = big_video(tmp_path / "drone-shot.mkv")
    wall = no_face_photo(tmp_path / "wall.jpg")
    empty = folder / "empty"
    empty.mkdir()
    demo = User.objects.get(username="demo")
    session = Client()
    session.force_login(demo)
    cookie = session.cookies[settings.SESSION_COOKIE_NAME].value

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(base_url=web_server.url, viewport={"width": 1280, "height": 1100})
            context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": web_server.url}])

            # 1. Drop the 200 MB video: it is sent at once, with progress; Start waits for it.
            first = Tab(context)
            page = first.page
            page.context.new_cdp_session(page).send("Network.emulateNetworkConditions", {
                "offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": THROTTLE_BYTES_PER_S})
            page.goto("/jobs/new")
            drop_files(page, "#zone-target", [video])
            wait_until(lambda: page.locator("#zone-target .upload-total-text").inner_text().find("/s") > 0, 30,
                       "the total shows bytes, speed and time left")
            assert page.locator("#start-button").is_disabled()
            assert page.locator("#start-wait").is_visible()
            assert "sending" in item(page, "#zone-target", "drone-shot.mkv").inner_text()
            page.screenshot(path=str(SHOTS / "uploads-sending.png"), full_page=True)

            # 2. Close the tab a quarter of the way: the page asks first.
            size = video.stat().st_size
            wait_until(lambda: Upload.objects.filter(name="drone-shot.mkv", offset__gte=size // 4).exists(), 60,
                       "a quarter of the video reached the server")
            dialogs = []
            page.on("dialog", lambda d: (dialogs.append(d.type), d.accept()))
            page.click("h1")  # browsers ask before leaving only a page the user has touched
            with page.expect_event("close", timeout=10_000):
                page.close(run_before_unload=True)
            assert dialogs == ["beforeunload"]
            upload = Upload.objects.get(name="drone-shot.mkv")
            stopped_at = upload.offset
            assert 0 < stopped_at < size and upload.status == "receiving"

            # 3. Reopen the form: the file sent earlier is offered; choosing it again sends the rest.
            second = Tab(context)
            page = second.page
            page.goto("/jobs/new")
            earlier = page.locator("#zone-target [data-earlier]")
            # The notice follows the page's own request for the user's uploads: on a CI machine whose
            # two cores ran three test processes and three clusters' jobs, it came after more than
            # 10 s (the other waits here allow 60-120 s for the server's answers).
            earlier.wait_for(state="visible", timeout=60_000)
            # each file sent earlier is shown on its own, by name, with its own Add (never added in bulk)
            assert "drone-shot.mkv" in earlier.inner_text()
            assert earlier.locator(".upload-earlier-item [data-action=earlier-add]").count() == 1
            drop_files(page, "#zone-target", [video])
            wait_until(lambda: "ready" in item(page, "#zone-target", "drone-shot.mkv").inner_text(), 120,
                       "the video is sent and checked")
            upload.refresh_from_db()
            assert upload.offset == size and upload.status == "ready"
            resent = upload.received - size
            print(f"200 MB video: stopped at {stopped_at:,} of {size:,} bytes; sent twice: {resent:,} "
                  f"({100 * resent / size:.1f} %)")
            assert 0 <= resent < size * 0.10, f"{resent} bytes sent twice of {size}"
            assert Upload.objects.filter(name="drone-shot.mkv").count() == 1  # resumed, not sent anew
            assert earlier.locator(".upload-earlier-item").count() == 0  # no longer offered: it is chosen
            text = item(page, "#zone-target", "drone-shot.mkv").inner_text()
            assert "440 frames" in text and page.locator("#zone-target .upload-thumb").count() == 1
            assert page.locator("#start-button").is_enabled()

            # 4. A photo without a face is refused on arrival; Replace puts a good one in its place.
            drop_files(page, "#zone-source", [wall])
            wait_until(lambda: "no face found" in item(page, "#zone-source", "wall.jpg").inner_text(), 30,
                       "the face-less photo is refused")
            page.screenshot(path=str(SHOTS / "uploads-no-face.png"), full_page=True)
            with page.expect_file_chooser() as chooser:
                item(page, "#zone-source", "wall.jpg").locator("[data-action=replace]").click()
            chooser.value.set_files(str(SAMPLES / "Tom_Hanks_54745.png"))
            wait_until(lambda: "face found" in item(page, "#zone-source", "Tom_Hanks_54745.png").inner_text(), 30,
                       "the replacement's face is found")
            assert item(page, "#zone-source", "wall.jpg").count() == 0
            assert page.locator("#zone-source .upload-thumb").get_attribute("alt") == "The face found in Tom_Hanks_54745.png"

            # 5. An empty folder is refused as it is typed, before Start.
            page.fill("#id_target_folder", str(empty))
            wait_until(lambda: "no photos or videos" in page.locator("#folder-check").inner_text(), 30,
                       "the empty folder is refused")
            page.fill("#id_target_folder", "")

            # 6. Start without consent and with a folder AND files: every problem at once, files kept.
            page.fill("#id_target_folder", str(empty))
            page.click("#start-button")
            page.wait_for_selector("#form-problems")
            problems = page.locator("#form-problems li").all_inner_texts()
            assert any("Confirm that you have the right" in p for p in problems)
            assert any("one of the two" in p for p in problems)
            assert page.locator("#id_consent-errors").is_visible()
            page.wait_for_selector("#zone-target .upload-item.upload-ready")
            assert "drone-shot.mkv" in page.locator("#zone-target").inner_text()
            assert "Tom_Hanks_54745.png" in page.locator("#zone-source").inner_text()
            page.screenshot(path=str(SHOTS / "uploads-all-problems.png"), full_page=True)
            assert not Job.objects.exists()

            # 7. Fixed: the job starts with the files already sent, none sent again.
            page.fill("#id_target_folder", "")
            page.check("#id_consent")
            page.click("#start-button")
            page.wait_for_url("**/jobs/*")
            job = Job.objects.get()
            assert [t.name for t in job.targets.all()] == ["drone-shot.mkv"] and job.sources.count() == 1
            assert not Upload.objects.filter(owner=demo).exists()
            assert not [p for p in first.problems + second.problems if "favicon" not in p and "/uploads/" not in p]
        finally:
            browser.close()
