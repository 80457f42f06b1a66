"""The job page's recovery, in a real browser against the portal's real web server (as `make up`
runs it), the live script connected over its WebSocket:
- Cancel asks first: "Keep running" changes nothing; "Cancel job" in the dialog posts, and a job
  still waiting to submit is cancelled at once, its "Retrying automatically" gone;
- "Job started." above a job disappears, and Retry appears, without a reload, when the job ends
  (here: it failed);
- every cell of the task table says its column (data-label), also the rows the script draws, and
  the dates the script writes look like the server's;
- Replace file and Retry on a partly failed job; the face photo used is shown.
Screenshots (desktop 1280 and phone 390): <screenshots>/recovery-*.png.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.messages import constants
from django.contrib.messages.storage.base import Message
from django.contrib.messages.storage.cookie import CookieStorage
from django.http import HttpRequest
from django.test import Client
from django.utils import timezone

from jobs.models import Job, JobStatus, Source, Target, Task, Template
from tests.e2e.conftest import SAMPLES
from tests.e2e.shots import SHOTS

from .test_browser_live import CHROMIUM, CHROMIUM_ARGS, Tab, _sync_playwright, wait_for, web_server  # noqa: F401
from .test_browser_live_strict_csp import _publish

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = SHOTS
DATE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d")


def make_job(owner, status, name, **fields) -> Job:
    template = Template.objects.get(slug="gpu-batch")
    return Job.objects.create(owner=owner, template=template, template_snapshot=template.snapshot().to_json(), name=name,
                              cluster=template.cluster, status=status, **fields)


@pytest.fixture
def demo(local):
    from django.contrib.auth.models import User

    owner = User.objects.get(username="demo")
    session = Client()
    session.force_login(owner)
    return owner, session.cookies[settings.SESSION_COOKIE_NAME].value


def browser_context(browser, server, cookie: str, width: int, messages=()):
    context = browser.new_context(base_url=server.url, viewport={"width": width, "height": 900}, locale="en-US")
    cookies = [{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": server.url}]
    if messages:  # as the redirect after Start leaves them
        cookies.append({"name": "messages", "value": CookieStorage(HttpRequest())._encode(list(messages)),
                        "url": server.url})
    context.add_cookies(cookies)
    return context


def partly_failed(owner) -> Job:
    """A job with a done photo, a damaged one, a cancelled video, two tasks and a face photo used."""
    now = timezone.now()
    job = make_job(owner, JobStatus.PARTIALLY_FAILED, "Wedding photos", total=3, done=1, failed=1, slurm_job_id="4243",
                   started_at=now, finished_at=now, error="1 of 3 photos and videos failed; see each one's message.")
    Task.objects.create(job=job, index=0, state="FAILED", node="vm", exit_code=1, elapsed_seconds=75,
                        reason="some images failed")
    Task.objects.create(job=job, index=1, state="CANCELLED", node="vm", elapsed_seconds=12)
    Target.objects.create(job=job, index=0, name="bride.jpg", output_name="bride.jpg", status="done", task_index=0,
                          faces_swapped=1)
    Target.objects.create(job=job, index=1, name="broken.jpg", output_name="broken.jpg", status="failed", task_index=0,
                          message="broken.jpg is damaged or cut off; re-export it or replace the file")
    Target.objects.create(job=job, index=2, name="first-dance.mp4", output_name="first-dance.mp4", status="cancelled",
                          task_index=1)
    folder = Path(settings.MEDIA_ROOT) / "users" / str(owner.pk) / "jobs" / str(job.id) / "sources"
    folder.mkdir(parents=True)
    shutil.copyfile(SAMPLES / "Tom_Hanks_54745.png", folder / "anna.png")
    Source.objects.create(job=job, file=str((folder / "anna.png").relative_to(settings.MEDIA_ROOT)),
                          original_name="anna.png")
    return job


def test_cancel_asks_first_and_a_job_waiting_to_submit_is_cancelled_at_once(demo, web_server, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    owner, cookie = demo
    job = make_job(owner, JobStatus.SUBMITTING, "Holiday set",
                   error="Waiting to submit: cannot reach the cluster. Retrying automatically at 2026-12-01 12:00.")
    with _sync_playwright()() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            tab = Tab(browser_context(browser, web_server, cookie, 1280))
            page = tab.page
            page.goto(f"/jobs/{job.id}")
            dialog = page.locator("#cancel-dialog")
            assert not dialog.is_visible()
            page.click("#job-cancel button")
            assert dialog.is_visible()
            assert dialog.inner_text().startswith("Cancel this job? Photos and videos already finished are kept.")
            page.screenshot(path=str(SCREENSHOTS / "recovery-cancel-dialog-desktop.png"))
            page.click("#cancel-dialog button[value=keep]")
            assert not dialog.is_visible()
            assert Job.objects.get(pk=job.pk).status == JobStatus.SUBMITTING  # nothing was posted
            assert len(tab.navigations) == 1

            page.click("#job-cancel button")
            with page.expect_navigation():
                page.click("#cancel-dialog button[value=cancel]")
            job.refresh_from_db()
            assert job.status == JobStatus.CANCELLED and job.error == "Cancelled before it was submitted."
            text = page.inner_text("main")
            assert "Cancelled before it was submitted." in text and "Retrying automatically" not in text
            assert page.locator("#job-status").inner_text() == "cancelled"
            assert not tab.problems, tab.problems
        finally:
            browser.close()


def test_job_started_goes_when_the_job_fails_and_cells_and_dates_match_the_server(demo, web_server, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    owner, cookie = demo
    job = make_job(owner, JobStatus.RUNNING, "Garden party", total=2, slurm_job_id="4250",
                   started_at=timezone.now())
    Task.objects.create(job=job, index=0, state="RUNNING", node="vm")
    for i in range(2):
        Target.objects.create(job=job, index=i, name=f"{i}.jpg", output_name=f"{i}.jpg", task_index=0)
    started = Message(constants.SUCCESS, "Job started. This page follows its progress.", extra_tags="job-started")
    with _sync_playwright()() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            tab = Tab(browser_context(browser, web_server, cookie, 390, messages=[started]))
            page = tab.page
            page.goto(f"/jobs/{job.id}")
            assert page.locator(".messages .job-started").count() == 1
            assert not page.locator("#job-retry").is_visible()  # nothing to retry while it runs
            wait_for(page, "document.getElementById('live-indicator') && !document.getElementById('live-indicator').hidden",
                     10_000)
            # The task ends and the job fails: the script redraws the row and the facts, and drops the flash.
            Task.objects.filter(job=job).update(state="FAILED", exit_code=1, reason="the task could not start")
            Target.objects.filter(job=job).update(status="failed", message="the task could not start")
            now = timezone.now()
            Job.objects.filter(pk=job.pk).update(status=JobStatus.FAILED, failed=2, finished_at=now,
                                                 error="All photos and videos failed: the task could not start")
            _publish(job)
            wait_for(page, "document.getElementById('job-status').textContent.trim() === 'failed'", 15_000)
            wait_for(page, "!document.querySelector('.messages .job-started')", 5_000)
            assert "Job started." not in page.inner_text("body")
            wait_for(page, "!document.getElementById('job-retry').hidden", 5_000)  # Retry offered, no reload
            assert page.locator("#job-retry button").inner_text() == "Retry failed photos and videos"
            assert not page.locator("#job-cancel").count()
            wait_for(page, "!document.getElementById('fact-finished').hidden", 5_000)
            dates = page.eval_on_selector_all("#job-live time", "els => els.map(e => e.textContent.trim())")
            assert len(dates) == 3 and all(DATE.fullmatch(d) for d in dates), dates
            wait_for(page, "document.querySelector('#task-rows .task-code').textContent.trim() === 'FAILED'", 10_000)
            cells = page.eval_on_selector_all("#task-rows td", "tds => tds.map(td => td.getAttribute('data-label'))")
            assert cells == ["#", "State", "Node", "Run time", "Exit code", "Reason"], cells
            assert not tab.problems, tab.problems
        finally:
            browser.close()


def test_replace_file_then_retry_and_screenshots(demo, web_server, monkeypatch, tmp_path):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    monkeypatch.setattr("jobs.background.enqueue.enqueue_submission", lambda job: None)  # the page is what is looked at here
    owner, cookie = demo
    job = partly_failed(owner)
    cancelled = make_job(owner, JobStatus.CANCELLED, "Holiday videos", total=2, done=1, finished_at=timezone.now(),
                         error="Cancelled. 1 of 2 images were finished and are kept.")
    Target.objects.create(job=cancelled, index=0, name="beach.mp4", output_name="beach.mp4", status="done")
    Target.objects.create(job=cancelled, index=1, name="sunset.mp4", output_name="sunset.mp4", status="cancelled")
    with _sync_playwright()() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for width, name in ((1280, "desktop"), (390, "phone")):
                tab = Tab(browser_context(browser, web_server, cookie, width))
                page = tab.page
                page.goto(f"/jobs/{job.id}")
                assert not page.locator("#technical").get_attribute("open")  # closed by default
                # loading="lazy": the page's load event does not wait for it (seen in a loaded CI run);
                # what counts is that it arrives and is a picture, not that it came first.
                assert page.locator(".source-thumb").evaluate(
                    "img => img.complete ? img.naturalWidth > 0 : new Promise(done => {"
                    " img.addEventListener('load', () => done(img.naturalWidth > 0));"
                    " img.addEventListener('error', () => done(false)); })")
                assert page.locator("#job-run-again").get_attribute("href") == f"/jobs/new?again={job.id}"
                badge = page.locator("#target-2 .badge")
                assert badge.inner_text() == "cancelled"
                colour = badge.evaluate("b => getComputedStyle(b).color")
                assert colour != page.locator("#target-1 .badge").evaluate("b => getComputedStyle(b).color")
                page.screenshot(path=str(SCREENSHOTS / f"recovery-job-{name}.png"), full_page=True)
                page.click("#technical summary")
                page.locator("#target-1 details.replace summary").click()
                page.screenshot(path=str(SCREENSHOTS / f"recovery-job-details-open-{name}.png"), full_page=True)
                page.goto(f"/jobs/{cancelled.id}")
                assert page.locator("#job-retry button").inner_text() == "Process the rest"
                page.screenshot(path=str(SCREENSHOTS / f"recovery-cancelled-{name}.png"), full_page=True)
                assert not tab.problems, tab.problems

            page.goto(f"/jobs/{job.id}")
            page.locator("#target-1 details.replace summary").click()
            page.set_input_files("#target-1 input[type=file]", str(SAMPLES / "t1.jpg"))
            with page.expect_navigation():
                page.click("#target-1 .replace-form button")
            assert "broken.jpg will be read from the new file. Use Retry to process it." in page.inner_text("main")
            assert Target.objects.get(job=job, index=1).upload.name.endswith("replacements/1/t1.jpg")
            with page.expect_navigation():
                page.click("#job-retry button")
            job.refresh_from_db()
            assert job.status == JobStatus.QUEUED and job.attempt == 2
            assert sorted(job.targets.filter(status="waiting").values_list("name", flat=True)) == [
                "broken.jpg", "first-dance.mp4"]
            assert "Retrying the photos and videos that did not finish." in page.inner_text("main")
        finally:
            browser.close()
