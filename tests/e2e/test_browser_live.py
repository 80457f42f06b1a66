"""The job page follows a real job live, in a real browser, without reloading.

Every part is real: the portal's web server (portal/server.py, as `make up` runs it) in its own process,
Redis as the Channels layer between processes, the local Slurm cluster over SSH, headless Chromium.

How the pieces meet:
- The test database is a FILE (portal/settings.py gives SQLite tests one), so the server process
  started here reads exactly what this test process writes (`transactional_db`: commits are real).
- The browser logs in with a session made here (`Client.force_login`) and opens the job page while
  the job is still queued, BEFORE anything runs.
- The submission runs in this process (an RQ SimpleWorker, as in test_end_to_end), then
  `jobs.watcher.poll.poll_profile` runs in a background thread; its events go through channels_redis
  to the server's consumers and from there over the WebSocket to the page.
- The page records every change it makes (an init script with a MutationObserver), and the test
  counts navigations, so "it changed without a reload" is measured, not assumed.
- The live script is native ES modules (static/js/live/, no inline script): the polling and list
  tests (test_browser_live_strict_csp.py) serve their pages under a Content-Security-Policy
  without 'unsafe-inline', where anything the policy blocks shows up as a console error.
Screenshots: artifacts/live-job-running.png (mid-run) and artifacts/live-job.png (finished).
"""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import threading
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.test import Client

from jobs.models import Job, JobStatus
from portal.server import command as server_command
from tests.e2e.conftest import SAMPLES, fill

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "artifacts"
#: FFP_CHROMIUM: another browser command (make test-clock's keeps the real clock: scripts/clock/chromium)
CHROMIUM = os.environ.get("FFP_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]

# Runs in the page before its own scripts: keeps the sequence of everything the live script shows.
RECORDER = r"""
window.__live = {widths: [], badges: [], rows: [], tasks: {}, imgs: [], modes: [], loads: 0, listRows: [], topRow: []};
document.addEventListener("DOMContentLoaded", function () {
  var rec = window.__live;
  rec.loads += 1;
  function push(list, value) { if (list[list.length - 1] !== value) list.push(value); }
  function sample() {
    var bar = document.querySelector("#job-progress .progress-done");
    push(rec.widths, bar ? bar.style.width : null);
    var badge = document.getElementById("job-status");
    push(rec.badges, badge ? badge.textContent.trim() : null);
    var rows = document.querySelectorAll("#task-rows tr");
    push(rec.rows, rows.length);
    rows.forEach(function (tr) {
      var i = tr.getAttribute("data-task-index");
      push(rec.tasks[i] || (rec.tasks[i] = []), tr.querySelector(".task-code").textContent.trim());
    });
    push(rec.imgs, document.querySelectorAll("#target-grid img").length);
    var listRows = document.querySelectorAll("#job-rows tr");
    push(rec.listRows, listRows.length);
    var top = listRows[0] && listRows[0].querySelector(".job-status .badge");
    push(rec.topRow, top ? top.textContent.trim() + " " + listRows[0].querySelector(".job-progress").textContent.replace(/\s+/g, " ").trim() : null);
    var ind = document.getElementById("live-indicator");
    push(rec.modes, ind ? ind.getAttribute("data-mode") || "" : null);
  }
  sample();
  new MutationObserver(sample).observe(document.body,
    {subtree: true, childList: true, attributes: true, characterData: true});
});
"""


class WebServer:
    """The portal's web server, started with `make up`'s command (portal.server.command), on a free
    port, against this test's database; `env` adds settings (shorter timeouts, smaller limits)."""

    def __init__(self, log_path: Path, media_root: Path, port: int | None = None, env: dict[str, str] | None = None):
        self.port = port or _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings", "DATABASE_URL": _test_database_url(),
               "MEDIA_ROOT": str(media_root), "REDIS_URL": settings.REDIS_URL, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(server_command(self.port), cwd=REPO, env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"the web server exited with {self.proc.returncode}:\n{self.tail()}", pytrace=False)
            try:
                with urllib.request.urlopen(self.url + "/login/", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.2)
        pytest.fail(f"the web server did not answer on {self.url} within {timeout}s:\n{self.tail()}", pytrace=False)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # open connections get a few seconds (portal.server.GRACEFUL_SHUTDOWN_S)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.log.close()

    def tail(self, n: int = 4000) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")[-n:]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _test_database_url() -> str:
    """The database this test process uses (the test database), as a DATABASE_URL for the server."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        if connection.is_in_memory_db():
            pytest.fail("the browser test needs a file-based SQLite test database (see portal/settings.py)",
                        pytrace=False)
        return f"sqlite:///{Path(db['NAME']).resolve()}"
    if connection.vendor == "postgresql":
        q = urllib.parse.quote
        return f"postgres://{q(db['USER'] or '')}:{q(db['PASSWORD'] or '')}@{db['HOST'] or 'localhost'}:{db['PORT'] or 5432}/{q(db['NAME'])}"
    pytest.fail(f"no DATABASE_URL for a {connection.vendor} test database", pytrace=False)


@contextlib.contextmanager
def running_server(tmp_path: Path):
    """The portal's web server on this test's database and media folder, stopped afterwards."""
    server = WebServer(tmp_path / "web-server.log", Path(settings.MEDIA_ROOT))
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


@pytest.fixture
def web_server(local, tmp_path):
    with running_server(tmp_path) as server:
        yield server


def _thread_worker_class():
    """RQ's SimpleWorker, fit for a thread: no signal handlers, a timer for job timeouts (SIGALRM
    and signal.signal belong to the main thread)."""
    from rq import SimpleWorker
    from rq.timeouts import TimerDeathPenalty

    class ThreadWorker(SimpleWorker):
        death_penalty_class = TimerDeathPenalty

        def _install_signal_handlers(self):
            pass

    return ThreadWorker


class WatcherThread(threading.Thread):
    """In this process, beside the browser: the RQ submission, then the watcher's loop (one
    `poll_profile` a second, then what it enqueued: output fetches) until the job is final. Not in
    the main thread, where Playwright's event loop runs: events are published with async_to_sync,
    which refuses to run under a loop."""

    def __init__(self, job_id, queue, timeout: float = 120):
        super().__init__(name="watcher", daemon=True)
        self.job_id, self.queue, self.timeout = job_id, queue, timeout
        self.halt = threading.Event()
        self.statuses: list[str] = []
        self.error = ""

    def run(self) -> None:
        from django.db import connection as thread_connection

        from jobs.watcher.poll import poll_profile

        try:
            worker = _thread_worker_class()
            worker([self.queue], connection=self.queue.connection, serializer=self.queue.serializer).work(burst=True)
            job = Job.objects.select_related("cluster").get(pk=self.job_id)
            deadline = time.monotonic() + self.timeout
            while not self.halt.is_set() and time.monotonic() < deadline:
                poll_profile(job.cluster)
                worker([self.queue], connection=self.queue.connection, serializer=self.queue.serializer).work(burst=True)
                job.refresh_from_db()
                if not self.statuses or self.statuses[-1] != job.status:
                    self.statuses.append(job.status)
                if job.is_final:
                    return
                self.halt.wait(1.0)
        except BaseException:  # noqa: BLE001 - reported by the test
            self.error = traceback.format_exc()
        finally:
            thread_connection.close()


def _sync_playwright():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        pytest.fail(f"Playwright is not installed in this venv ({exc}); run `make venv`", pytrace=False)
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium is missing at {CHROMIUM}: `apt-get install chromium` (scripts/install-system.sh)",
                    pytrace=False)
    return sync_playwright


def wait_for(page, expression: str, timeout: float) -> None:
    """`page.wait_for_function` for a page under a Content-Security-Policy (the portal's own, or
    test_browser_live_strict_csp.STRICT_CSP), whose policy forbids the eval that
    Playwright's in-page polling uses: asks from here instead (evaluating through the DevTools
    protocol is not the page's own script, so the policy does not apply), every 100 ms."""
    deadline = time.monotonic() + timeout / 1000
    while not page.evaluate(expression):
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout} ms: {expression}")
        page.wait_for_timeout(100)


def _pct(width: str | None) -> float:
    return float((width or "0%").rstrip("%") or 0)


class Tab:
    """One browser page, with what happened to it: navigations, live.json requests, errors."""

    def __init__(self, context):
        self.page = page = context.new_page()
        self.navigations, self.polls, self.problems = [], [], []
        page.on("framenavigated", lambda frame: self.navigations.append(frame.url) if frame == page.main_frame else None)
        page.on("request", lambda req: self.polls.append(urllib.parse.urlsplit(req.url).path)
                if req.url.endswith("live.json") else None)
        page.on("console", lambda msg: self.problems.append(msg.text)
                if msg.type == "error" and "favicon.ico" not in (msg.location or {}).get("url", "") else None)
        page.on("pageerror", lambda exc: self.problems.append(str(exc)))
        page.on("response", lambda resp: self.problems.append(f"{resp.status} {resp.url}")
                if resp.status >= 400 and not resp.url.endswith("/favicon.ico") else None)


def test_the_job_page_follows_a_real_job_live_without_reloading(api, local, folder, redis_queue, web_server, monkeypatch):
    sync_playwright = _sync_playwright()
    # Playwright's sync API runs an event loop in this thread: let the ORM calls below run anyway.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    ARTIFACTS.mkdir(exist_ok=True)
    photos = [SAMPLES / "t1.jpg", SAMPLES / "astronaut.png", SAMPLES / "Tom_Hanks_54745.png"]
    fill(folder, {f"shot{i + 1}{photos[i % 3].suffix}": photos[i % 3] for i in range(6)})
    from django.contrib.auth.models import User

    session = Client()
    session.force_login(User.objects.get(username="demo"))  # the `api` fixture's token user
    cookie = session.cookies[settings.SESSION_COOKIE_NAME].value

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        watcher = None
        try:
            context = browser.new_context(base_url=web_server.url, viewport={"width": 1280, "height": 1000})
            context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": web_server.url}])
            context.add_init_script(RECORDER)

            # 1. The job list is open before the job exists.
            jobs_tab = Tab(context)
            jobs_tab.page.goto("/")
            jobs_tab.page.wait_for_selector("#live-indicator[data-mode=live]", timeout=15_000)

            # 2. Start: the job is queued, its submission waits in Redis.
            with open(SAMPLES / "Tom_Hanks_54745.png", "rb") as face:
                r = api.post("/api/v1/jobs", {"template": "gpu-batch", "source": face, "target_folder": str(folder),
                                              "consent": "true", "name": "six photos, live"})
            assert r.status_code == 201, r.content
            job = Job.objects.get(pk=r.json()["id"])
            assert job.status == JobStatus.QUEUED
            assert jobs_tab.page.locator(f'tr[data-job-id="{job.id}"]').count() == 0

            # 3. The job's page is open (its WebSocket connected) before anything runs.
            tab = Tab(context)
            page = tab.page
            page.goto(f"/jobs/{job.id}")
            page.wait_for_selector("#live-indicator[data-mode=live]", timeout=15_000)
            assert page.text_content("#job-status").strip() == "queued"
            # (the tasks are Slurm's words: inside "Technical details", closed)
            assert page.get_attribute("#tasks-empty", "hidden") is None and page.locator("#target-grid img").count() == 0
            page.evaluate("window.__sameDocument = 'still here'")
            jobs_tab.page.evaluate("window.__sameDocument = 'still here'")

            # 4. Submit (real sbatch over SSH), then the watcher's loop, beside the browser.
            watcher = WatcherThread(job.id, redis_queue)
            watcher.start()

            # 5. Thumbnails arrive while it runs; then it completes. No reload at any point.
            page.wait_for_selector("#target-grid img", timeout=60_000)
            page.screenshot(path=str(ARTIFACTS / "live-job-running.png"), full_page=True)
            wait_for(page, "document.getElementById('job-status').textContent.trim() === 'completed'", 90_000)
            wait_for(page, "document.querySelectorAll('#target-grid img').length === 6", 15_000)
            wait_for(page, "Array.from(document.querySelectorAll('#target-grid img'))"
                           ".every(i => i.complete && i.naturalWidth > 0)", 15_000)
            page.wait_for_selector("#live-indicator", state="hidden", timeout=15_000)  # final: stopped listening
            page.wait_for_timeout(700)  # let the last thumbnail's fade-in end before the picture
            page.screenshot(path=str(ARTIFACTS / "live-job.png"), full_page=True)

            rec = page.evaluate("window.__live")
            same_document = page.evaluate("window.__sameDocument")
            nav_entries = page.evaluate("performance.getEntriesByType('navigation').length")
            final_text = page.text_content("#progress-text")
            has_cancel = page.locator("#job-cancel").count()
            has_zip = page.locator("#job-download").count()
            task_states = page.eval_on_selector_all("#task-rows tr .task-code", "els => els.map(e => e.textContent.trim())")
            task_classes = page.eval_on_selector_all("#task-rows tr .badge", "els => els.map(e => e.className)")

            # 6. The list showed the new job on its own and followed it to the end.
            row = f'tr[data-job-id="{job.id}"]'
            wait_for(jobs_tab.page,
                     f"(document.querySelector('{row} .job-status .badge') || {{}}).textContent === 'completed'",
                     15_000)
            jobs_tab.page.screenshot(path=str(ARTIFACTS / "live-jobs-list.png"))
            list_rec = jobs_tab.page.evaluate("window.__live")
            list_same_document = jobs_tab.page.evaluate("window.__sameDocument")
            list_progress = " ".join(jobs_tab.page.text_content(f"{row} .job-progress").split())
            list_name = jobs_tab.page.text_content(f"{row} td a")
        finally:
            if watcher is not None:
                watcher.halt.set()
                watcher.join(timeout=30)
            browser.close()

    print("what the job page showed, in order:", rec, "watcher saw:", watcher.statuses)  # in the report on failure
    assert not watcher.error, watcher.error
    job.refresh_from_db()
    assert job.status == JobStatus.COMPLETED, (job.error, watcher.statuses)

    # No reload: one navigation (the first load), one document, one load of the recorder.
    assert len(tab.navigations) == 1, tab.navigations
    assert same_document == "still here" and nav_entries == 1 and rec["loads"] == 1
    # Everything came over the WebSocket: the live.json fallback was never needed.
    assert tab.polls == [], tab.polls
    assert "live" in rec["modes"] and rec["modes"][-1] == "", rec["modes"]
    assert not tab.problems, tab.problems

    # The progress bar grew over time: from empty, through at least one step in between, to full.
    widths = [_pct(w) for w in rec["widths"]]
    assert widths[0] == 0 and widths[-1] == 100, rec["widths"]
    assert widths == sorted(widths), rec["widths"]  # never went backwards
    assert any(0 < w < 100 for w in widths), rec["widths"]
    # counted after the page loaded: the number alone (a page loaded later says "6 of 6 photos done")
    assert "6 of 6 done" in " ".join(final_text.split())

    # The status badge moved through the job's states to completed.
    assert rec["badges"][0] == "queued" and rec["badges"][-1] == "completed", rec["badges"]
    assert len(rec["badges"]) >= 3, rec["badges"]

    # Task rows appeared (none at first: the job had not been sent) and changed state.
    assert rec["rows"][0] == 0 and rec["rows"][-1] == 3, rec["rows"]
    assert task_states == ["COMPLETED"] * 3
    assert task_classes == ["badge task-ok"] * 3  # drawn by the script, coloured by the server's mapping
    assert any(len(states) >= 2 for states in rec["tasks"].values()), rec["tasks"]

    # Thumbnails appeared while it ran (not all at once with the final state).
    assert rec["imgs"][0] == 0 and rec["imgs"][-1] == 6, rec["imgs"]
    assert len(rec["imgs"]) >= 3, rec["imgs"]

    # A finished job: no Cancel button, and the results zip is offered.
    assert has_cancel == 0 and has_zip == 1

    # The job list: the new row came by itself (a `job` event for an unknown id -> jobs/live.json),
    # then its status and progress followed the job, without a reload.
    print("what the job list showed:", list_rec, "its requests:", jobs_tab.polls)
    assert len(jobs_tab.navigations) == 1 and list_same_document == "still here", jobs_tab.navigations
    assert list_name.strip() == "six photos, live" and list_progress == "6 / 6", list_progress
    assert set(jobs_tab.polls) <= {"/jobs/live.json"} and len(jobs_tab.polls) >= 1, jobs_tab.polls
    assert not jobs_tab.problems, jobs_tab.problems
    assert list_rec["listRows"][0] + 1 == list_rec["listRows"][-1], list_rec["listRows"]  # one row more
    assert list_rec["topRow"][-1] == "completed 6 / 6" and len(set(list_rec["topRow"][1:])) >= 3, list_rec["topRow"]
