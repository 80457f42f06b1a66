"""The live script under a strict Content-Security-Policy (scripts from the portal's own origin
only: no inline script, no inline event handler, no eval), in a real browser against the portal's
real web server, as in test_browser_live.py: the job page falls back to polling jobs/<id>/live.json
when its WebSocket cannot connect, and the job list adds and follows a new job from the portal's
own events (`publish_job`, through Redis and the web server). Anything the policy blocks shows up
as a console error."""
from __future__ import annotations

import threading
import traceback

from django.conf import settings
from django.test import Client

from jobs.models import Job, JobStatus
from tests.e2e.test_browser_live import (  # noqa: F401 - web_server is a fixture
    CHROMIUM,
    CHROMIUM_ARGS,
    Tab,
    _sync_playwright,
    wait_for,
    web_server,
)

# Scripts only from the portal's own origin: no inline script, no inline event handler, no eval.
STRICT_CSP = "script-src 'self'; object-src 'none'; base-uri 'none'"


# A document the test fulfils (strict_csp) has no address of its own, so Chromium's local network
# access checks count it as public and refuse its WebSocket to 127.0.0.1; the real portal's page
# comes from the same origin as its socket, where the checks never apply.
CSP_CHROMIUM_ARGS = [*CHROMIUM_ARGS, "--disable-features=LocalNetworkAccessChecks,LocalNetworkAccessChecksWebSockets"]


def strict_csp(page) -> None:
    """Serve `page`'s documents with STRICT_CSP, as a server sending that header would (launch the
    browser with CSP_CHROMIUM_ARGS)."""
    def add_header(route):
        if route.request.resource_type != "document":
            route.fallback()
            return
        response = route.fetch()
        route.fulfill(response=response, headers={**response.headers, "content-security-policy": STRICT_CSP})

    page.route("**/*", add_header)


class _Publisher(threading.Thread):
    """`publish_job` from a thread of its own: async_to_sync refuses to run under Playwright's loop."""

    def __init__(self, job):
        super().__init__(name="publish", daemon=True)
        self.job, self.error = job, ""

    def run(self) -> None:
        from django.db import connection as thread_connection

        from jobs.live.protocol import publish_job

        try:
            publish_job(Job.objects.get(pk=self.job.pk))
        except BaseException:  # noqa: BLE001 - reported by the test
            self.error = traceback.format_exc()
        finally:
            thread_connection.close()


def _publish(job) -> None:
    publisher = _Publisher(job)
    publisher.start()
    publisher.join(timeout=30)
    assert not publisher.is_alive() and not publisher.error, publisher.error


def test_the_job_page_polls_live_json_when_its_websocket_cannot_connect(local, web_server, monkeypatch):
    """Three failed connections in a row: the page polls jobs/<id>/live.json, follows the database
    from there, and stops once the snapshot says the job is over. (The socket is refused by the
    browser's own routing; the rest is real: the web server, the views, the database.) The page is served
    under STRICT_CSP: the script runs without any inline script."""
    from django.contrib.auth.models import User

    from jobs.models import Target, TargetStatus, Task, Template

    sync_playwright = _sync_playwright()
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    owner = User.objects.get(username="demo")
    template = Template.objects.get(slug="gpu-batch")
    job = Job.objects.create(owner=owner, template=template, template_snapshot=template.snapshot().to_json(),
                             cluster=template.cluster, name="polled", status=JobStatus.RUNNING, slurm_job_id="999999",
                             total=2)
    Task.objects.create(job=job, index=0, state="RUNNING", node="vm")
    for i in range(2):
        Target.objects.create(job=job, index=i, name=f"p{i}.jpg", output_name=f"p{i}.jpg", task_index=0)
    session = Client()
    session.force_login(owner)
    cookie = session.cookies[settings.SESSION_COOKIE_NAME].value

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CSP_CHROMIUM_ARGS)
        try:
            context = browser.new_context(base_url=web_server.url)
            context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": web_server.url}])
            tab = Tab(context)
            refused = []

            def refuse(ws):  # the upgrade "fails": closed before any message
                refused.append(ws.url)
                ws.close(code=1011, reason="refused by the test")

            tab.page.route_web_socket("**/ws/jobs/**", refuse)
            strict_csp(tab.page)
            tab.page.goto(f"/jobs/{job.id}")
            tab.page.wait_for_selector("#live-indicator[data-mode=polling]", timeout=20_000)  # after 1 s + 2 s backoff
            assert len(refused) == 3, refused

            Task.objects.filter(job=job).update(state="COMPLETED", exit_code=0, elapsed_seconds=61)
            Target.objects.filter(job=job, index=0).update(status=TargetStatus.DONE, faces_swapped=1)
            Job.objects.filter(pk=job.pk).update(done=1)
            wait_for(tab.page, "document.getElementById('progress-text').textContent.includes('of 2 photos done')"
                               " && document.querySelector('#job-progress .progress-done').style.width === '50%'",
                     timeout=15_000)
            assert tab.page.text_content('#task-rows tr[data-task-index="0"] .task-code') == "COMPLETED"
            # the server drew it running; the script recoloured it with the server's mapping
            assert tab.page.get_attribute('#task-rows tr[data-task-index="0"] .badge', "class") == "badge task-ok"
            assert tab.page.text_content('#task-rows tr[data-task-index="0"] td:nth-child(4)') == "0:01:01"
            assert "done" in tab.page.text_content('li[data-target-index="0"] .badge')

            Job.objects.filter(pk=job.pk).update(status=JobStatus.FAILED, failed=1, error="Task 0 ran out of memory.")
            wait_for(tab.page, "document.getElementById('job-status').textContent.trim() === 'failed'", timeout=15_000)
            tab.page.wait_for_selector("#live-indicator", state="hidden", timeout=5_000)
            assert tab.page.is_visible("#job-error") and "ran out of memory" in tab.page.text_content("#job-error")
            assert tab.page.get_attribute("#job-error", "class") == "notice notice-bad"  # a failed job's error
            assert tab.page.locator("#job-cancel").count() == 0
            polls_at_final = len(tab.polls)
            tab.page.wait_for_timeout(4_500)  # longer than one polling interval: nothing more is asked
            assert len(tab.polls) == polls_at_final
        finally:
            browser.close()

    assert tab.polls and set(tab.polls) == {f"/jobs/{job.id}/live.json"}, tab.polls
    assert len(tab.navigations) == 1 and not tab.problems, (tab.navigations, tab.problems)


def test_the_job_list_adds_and_follows_a_new_job_under_a_strict_csp(local, web_server, monkeypatch):
    """The job list, served under STRICT_CSP, is live over its WebSocket: a `job` event for a job it
    has never seen brings the new row (through jobs/live.json), later events move its status and
    progress. The events are the portal's own (`publish_job`, through Redis and the web server)."""
    from django.contrib.auth.models import User

    from jobs.models import Template

    sync_playwright = _sync_playwright()
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    owner = User.objects.get(username="demo")
    template = Template.objects.get(slug="gpu-batch")
    session = Client()
    session.force_login(owner)
    cookie = session.cookies[settings.SESSION_COOKIE_NAME].value

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CSP_CHROMIUM_ARGS)
        try:
            context = browser.new_context(base_url=web_server.url)
            context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": web_server.url}])
            tab = Tab(context)
            strict_csp(tab.page)
            tab.page.goto("/")
            tab.page.wait_for_selector("#live-indicator[data-mode=live]", timeout=15_000)
            assert tab.page.is_visible("#jobs-empty")

            job = Job.objects.create(owner=owner, template=template, template_snapshot=template.snapshot().to_json(),
                                     cluster=template.cluster, name="under a strict policy",
                                     status=JobStatus.RUNNING, total=4, done=1)
            _publish(job)
            row = f'tr[data-job-id="{job.id}"]'
            tab.page.wait_for_selector(row, timeout=15_000)
            assert tab.page.text_content(f"{row} .job-status .badge") == "running"
            assert " ".join(tab.page.text_content(f"{row} .job-progress").split()) == "1 / 4"
            assert tab.page.is_hidden("#jobs-empty")

            Job.objects.filter(pk=job.pk).update(status=JobStatus.PARTIALLY_FAILED, done=3, failed=1)
            _publish(job)
            wait_for(tab.page, f"document.querySelector('{row} .job-status .badge').textContent === 'partially failed'",
                     timeout=15_000)
            assert tab.page.get_attribute(f"{row} .job-status .badge", "class") == "badge status-partially_failed"
            assert " ".join(tab.page.text_content(f"{row} .job-progress").split()) == "3 / 4 · 1 failed"
            assert tab.page.get_attribute(f"{row} .progress-done", "style") == "width: 75%;"
        finally:
            browser.close()

    assert set(tab.polls) == {"/jobs/live.json"}, tab.polls  # the new row, fetched once
    assert len(tab.navigations) == 1 and not tab.problems, (tab.navigations, tab.problems)
