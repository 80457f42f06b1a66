"""A 20,000-image job's page in a real browser: counts, the first page of photos and live events,
over the WebSocket alone (never the live.json fallback).

A real job of three photos runs on the local cluster; 19,997 more targets are added to it directly
in the database (done, with an output, as the watcher would leave them), so the page watches a
20,000-target job while real events (task states, fetched outputs, the end) arrive for three of
them. Before big jobs had bounded snapshots, this page's first snapshot was megabytes: past the
server's message limit the socket closed and the page fell back to polling live.json.
Screenshot: artifacts/live-big-job.png.
"""
from __future__ import annotations

import shutil

from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from jobs.live.view import TARGETS_PER_PAGE
from jobs.models import Job, Target, TargetStatus
from tests.e2e.conftest import SAMPLES, fill, run_rq
from tests.e2e.test_browser_live import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    RECORDER,
    Tab,
    WatcherThread,
    _sync_playwright,
    wait_for,
    web_server,  # noqa: F401 - a fixture of this module's tests
)

TOTAL = 20_000
REAL = 3


def _add_targets(job: Job, media_root) -> None:
    """TOTAL - REAL more targets, done with an output, straight into the database."""
    out = media_root / "big-job-output.jpg"
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SAMPLES / "t1.jpg", out)
    Target.objects.bulk_create(
        [Target(job=job, index=i, name=f"archive/{i // 1000:02d}/IMG_{i:05d}.jpg", output_name=f"{i:05d}.jpg",
                task_index=0, status=TargetStatus.DONE, faces_found=1, faces_swapped=1, output_file=str(out))
         for i in range(REAL, TOTAL)], batch_size=5000)
    Job.objects.filter(pk=job.pk).update(total=TOTAL)
    job.refresh_from_db()
    job.recount()


def test_a_twenty_thousand_image_job_is_watched_live_over_the_websocket(api, local, folder, redis_queue, web_server,
                                                                          monkeypatch):
    sync_playwright = _sync_playwright()
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's loop runs in this thread
    ARTIFACTS.mkdir(exist_ok=True)
    fill(folder, {f"shot{i + 1}.jpg": SAMPLES / "t1.jpg" for i in range(REAL)})
    with open(SAMPLES / "Tom_Hanks_54745.png", "rb") as face:
        r = api.post("/api/v1/jobs", {"template": "gpu-batch", "source": face, "target_folder": str(folder),
                                      "consent": "true", "name": "twenty thousand"})
    assert r.status_code == 201, r.content
    job = Job.objects.get(pk=r.json()["id"])
    run_rq(redis_queue)  # the real submission: three targets, a real Slurm array job
    job.refresh_from_db()
    assert job.slurm_job_id and job.total == REAL, (job.status, job.error)
    _add_targets(job, settings.MEDIA_ROOT)

    session = Client()
    session.force_login(User.objects.get(username="demo"))
    cookie = session.cookies[settings.SESSION_COOKIE_NAME].value
    watcher = None
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(base_url=web_server.url, viewport={"width": 1280, "height": 1000})
            context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": web_server.url}])
            context.add_init_script(RECORDER)
            tab = Tab(context)
            page = tab.page
            sizes = []
            page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: sizes.append(len(payload))))
            page.goto(f"/jobs/{job.id}")
            page.wait_for_selector("#live-indicator[data-mode=live]", timeout=15_000)

            # What the page shows at once: the counts and the first page, not 20,000 photos.
            first_count = page.text_content("#target-filters [data-count-of=all]").strip()
            first_items = page.locator("#target-grid li").count()
            first_progress = " ".join(page.text_content("#progress-text").split())

            # Real events for the three real photos: thumbnails, task states, the end.
            watcher = WatcherThread(job.id, redis_queue, timeout=240)
            watcher.start()
            wait_for(page, "document.querySelectorAll('#target-grid li[data-target-index=\"0\"] img, "
                           "#target-grid li[data-target-index=\"1\"] img, "
                           "#target-grid li[data-target-index=\"2\"] img').length === 3", 200_000)
            wait_for(page, "document.getElementById('job-status').textContent.trim() === 'completed'", 60_000)
            page.screenshot(path=str(ARTIFACTS / "live-big-job.png"), full_page=False)
            final_progress = " ".join(page.text_content("#progress-text").split())
            summary = " ".join(page.text_content("#task-summary").split())
            items = page.locator("#target-grid li").count()
            done_count = page.text_content("#target-filters [data-count-of=done]").strip()
            rec = page.evaluate("window.__live")
        finally:
            if watcher is not None:
                watcher.halt.set()
                watcher.join(timeout=30)
            browser.close()

    print("page showed:", rec, "frames:", sizes, "watcher saw:", watcher.statuses if watcher else None)
    assert not (watcher and watcher.error), watcher.error
    assert first_count == "20,000" and first_items == TARGETS_PER_PAGE
    assert first_progress.startswith(f"{TOTAL - REAL:,} of {TOTAL:,} photos done"), first_progress
    assert final_progress.startswith(f"{TOTAL:,} of {TOTAL:,} photos done"), final_progress
    assert done_count == "20,000" and items == TARGETS_PER_PAGE
    assert summary.endswith("done") and "tasks:" in summary, summary
    # Live over the WebSocket only: events arrived (more frames than the first snapshot), every
    # frame small, and the live.json fallback never asked.
    assert len(sizes) >= 3 and max(sizes) < 64 * 1024, sizes
    assert tab.polls == [] and "live" in rec["modes"], (tab.polls, rec["modes"])
    assert rec["imgs"][0] == 0 and rec["imgs"][-1] >= REAL, rec["imgs"]
    assert not tab.problems, tab.problems
