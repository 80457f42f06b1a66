"""The ASGI server restarts while a browser watches a job: the page reconnects and resyncs.

The real web server (portal/server.py as `make up` runs it, in its own process, against the
file-based test database), real Redis, headless Chromium; no cluster work: the job is written to
the database directly. The page is open and live; the server is terminated; while it is down the
job moves on in the database (no event can reach the page: nobody is listening); a NEW server
starts on the SAME port. The page must then, without a reload, show the database's state, and no
error.

What is asserted is what a reader of the page sees. HOW the page gets back (a reconnected
WebSocket's snapshot, or live.json polling after three failed connects) and how many connects fail
meanwhile depend on how fast the new server comes up against the page's backoff; both ways are
right, so neither is asserted. The page's sockets are logged for the failure report only.
Screenshot: artifacts/live-after-restart.png.
"""
from __future__ import annotations

import random
import socket
from pathlib import Path

from django.conf import settings
from django.test import Client
from django.utils import timezone

from jobs.models import Job, JobStatus
from tests.e2e.test_browser_live import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    RECORDER,
    Tab,
    WebServer,
    _pct,
    _sync_playwright,
    wait_for,
)

#: how long the page may take to show a state (a loaded 2-CPU machine runs Chromium and the server):
#: a wait ends as soon as the state is there, so a generous one costs nothing when all is well
PAGE_WAIT_MS = 120_000
#: the server's start (Django's imports) on that machine
SERVER_START_S = 120

# Runs in the page before its own scripts: a log of every WebSocket the page makes, printed when
# the test fails (nothing is asserted on it; see the module docstring).
SOCKET_LOG = r"""
(function () {
  var Native = window.WebSocket, log = window.__sockets = [];
  function Logged(url, protocols) {
    var ws = protocols === undefined ? new Native(url) : new Native(url, protocols);
    var rec = {created: performance.now(), opened: null, closed: null, code: null, firstType: null, messages: 0};
    log.push(rec);
    ws.addEventListener("open", function () { rec.opened = performance.now(); });
    ws.addEventListener("message", function (ev) {
      rec.messages += 1;
      if (rec.firstType !== null) return;
      try { rec.firstType = JSON.parse(ev.data).type; } catch (e) { rec.firstType = "?"; }
    });
    ws.addEventListener("close", function (ev) { rec.closed = performance.now(); rec.code = ev.code; });
    return ws;
  }
  Logged.prototype = Native.prototype;
  ["CONNECTING", "OPEN", "CLOSING", "CLOSED"].forEach(function (k) { Logged[k] = Native[k]; });
  window.WebSocket = Logged;
})();
"""
COMPLETED_SHOWN = "document.getElementById('job-status').textContent.trim() === 'completed'"


def port_outside_ephemeral_range() -> int:
    """A free port the kernel never hands out by itself (below ip_local_port_range), so that no
    outgoing connection or `bind(0)` elsewhere on the machine can take it while the first server
    is gone and before the second one binds it."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    candidates = list(range(max(1025, low - 10_000), low))
    random.shuffle(candidates)
    for port in candidates[:200]:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError(f"no free port below the ephemeral range (which starts at {low})")


def test_the_job_page_reconnects_and_resyncs_after_the_server_restarts(local, tmp_path, monkeypatch):
    from django.contrib.auth.models import User

    from jobs.models import Target, TargetStatus, Task, Template

    sync_playwright = _sync_playwright()
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # ORM calls beside Playwright's event loop
    ARTIFACTS.mkdir(exist_ok=True)
    owner = User.objects.get(username="demo")
    template = Template.objects.get(slug="gpu-batch")
    job = Job.objects.create(owner=owner, template=template, template_snapshot=template.snapshot().to_json(),
                             cluster=template.cluster, name="through a restart", status=JobStatus.RUNNING,
                             slurm_job_id="999998", total=5, done=2, started_at=timezone.now())
    Task.objects.create(job=job, index=0, state="COMPLETED", node="vm", exit_code=0, elapsed_seconds=42)
    Task.objects.create(job=job, index=1, state="RUNNING", node="vm")
    for i in range(5):
        Target.objects.create(job=job, index=i, name=f"r{i}.jpg", output_name=f"r{i}.jpg", task_index=i // 3,
                              status=TargetStatus.DONE if i < 2 else TargetStatus.WAITING,
                              faces_swapped=1 if i < 2 else 0)
    session = Client()
    session.force_login(owner)
    cookie = session.cookies[settings.SESSION_COOKIE_NAME].value
    media = Path(settings.MEDIA_ROOT)

    first = WebServer(tmp_path / "web-server-1.log", media, port=port_outside_ephemeral_range())
    second = None
    errors: list[tuple[str, str]] = []  # (what, the URL it was about) of every error the page met
    try:
        first.wait_ready(timeout=SERVER_START_S)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                context = browser.new_context(base_url=first.url, viewport={"width": 1280, "height": 900})
                context.set_default_timeout(PAGE_WAIT_MS)
                context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": first.url}])
                context.add_init_script(RECORDER)
                context.add_init_script(SOCKET_LOG)
                tab = Tab(context)
                page = tab.page
                page.on("console", lambda m: errors.append((m.text, (m.location or {}).get("url", "")))
                        if m.type == "error" else None)
                page.on("pageerror", lambda exc: errors.append((str(exc), "")))
                page.on("response", lambda r: errors.append((f"HTTP {r.status}", r.url)) if r.status >= 400 else None)

                # 1. Live, showing the job as the database has it.
                page.goto(f"/jobs/{job.id}")
                page.wait_for_selector("#live-indicator[data-mode=live]")
                assert page.text_content("#job-status").strip() == "running"
                assert page.eval_on_selector("#job-progress .progress-done", "e => e.style.width") == "40%"
                assert page.text_content('#task-rows tr[data-task-index="1"] .task-code') == "RUNNING"
                page.evaluate("window.__sameDocument = 'still here'")

                # 2. The server goes away (its process has exited when stop() returns); the page
                # says it is reconnecting (or, after three failed connects, polling).
                first.stop()
                page.wait_for_selector("#live-indicator[data-mode=reconnecting], #live-indicator[data-mode=polling]",
                                       state="attached")
                mode_while_down = page.get_attribute("#live-indicator", "data-mode")

                # 3. Meanwhile the job moves on, in the database only (no server: nothing can tell the page).
                Task.objects.filter(job=job, index=1).update(state="COMPLETED", exit_code=0, elapsed_seconds=75)
                Target.objects.filter(job=job, index__gte=2).update(status=TargetStatus.DONE, faces_swapped=1)
                Job.objects.filter(pk=job.pk).update(status=JobStatus.COMPLETED, done=5, finished_at=timezone.now())
                assert page.text_content("#job-status").strip() == "running"

                # 4. A new server on the same port. No reload: the page finds it and shows the new state.
                second = WebServer(tmp_path / "web-server-2.log", media, port=first.port)
                second.wait_ready(timeout=SERVER_START_S)
                wait_for(page, COMPLETED_SHOWN, 120_000)
                page.wait_for_selector("#live-indicator", state="hidden")  # final: it stopped listening
                page.wait_for_timeout(300)  # the redrawn items' fade-in, for the screenshot only
                page.screenshot(path=str(ARTIFACTS / "live-after-restart.png"), full_page=True)

                rec = page.evaluate("window.__live")
                same_document = page.evaluate("window.__sameDocument")
                nav_entries = page.evaluate("performance.getEntriesByType('navigation').length")
                width = page.eval_on_selector("#job-progress .progress-done", "e => e.style.width")
                progress_text = " ".join(page.text_content("#progress-text").split())
                task_states = page.eval_on_selector_all("#task-rows tr .task-code",
                                                        "els => els.map(e => e.textContent.trim())")
                target_states = page.eval_on_selector_all("#target-grid li .badge",
                                                          "els => els.map(e => e.textContent.trim())")
                badge_class = page.get_attribute("#job-status", "class")
                error_shown = page.is_visible("#job-error")
                cluster_banner_shown = page.is_visible("#cluster-banner")
                sockets = page.evaluate("window.__sockets")
                polls = list(tab.polls)
            finally:
                browser.close()
    finally:
        first.stop()
        if second is not None:
            second.stop()
        # For the report when the test fails, here or below.
        print("errors the page met:", errors)
        for log in sorted(tmp_path.glob("web-server-*.log")):
            print(f"{log.name} (end):", log.read_text(errors="replace")[-3000:])

    # How the page got back, in its own clock (ms).
    print("sockets:", [{k: (round(v) if isinstance(v, float) else v) for k, v in s.items()} for s in sockets])
    print("live.json polls:", polls, "mode while down:", mode_while_down)
    print("what the page showed, in order:", rec)

    # No reload: one navigation (the first load), one document, one load of the recorder.
    assert len(tab.navigations) == 1, tab.navigations
    assert same_document == "still here" and nav_entries == 1 and rec["loads"] == 1

    # The database's state after the restart, all of it: progress, tasks, targets, status.
    assert width == "100%" and _pct(rec["widths"][0]) == 40, rec["widths"]
    assert "5 of 5 photos done" in progress_text, progress_text
    assert task_states == ["COMPLETED", "COMPLETED"], task_states
    assert len(target_states) == 5 and all("done" in s for s in target_states), target_states
    assert rec["badges"] == ["running", "completed"], rec["badges"]  # never anything else in between
    assert "status-completed" in badge_class
    assert rec["tasks"]["1"] == ["RUNNING", "COMPLETED"], rec["tasks"]
    # live; "reconnecting" once the server was gone; then nothing (final: it stopped listening)
    assert mode_while_down in ("reconnecting", "polling"), mode_while_down
    assert "live" in rec["modes"] and "reconnecting" in rec["modes"][rec["modes"].index("live"):], rec["modes"]
    assert rec["modes"][-1] == "", rec["modes"]

    # No error shown, and none met but the server's absence: the page's connects to it refused
    # (its WebSocket, and live.json had it fallen back to polling). An HTTP error status, a
    # script error, or a refusal of anything else is a failure.
    assert not error_shown and not cluster_banner_shown
    ws_url = f"ws://127.0.0.1:{first.port}/ws/jobs/{job.id}/"
    live_url = f"{first.url}/jobs/{job.id}/live.json"

    def server_absent(what: str, url: str) -> bool:
        return (what.startswith(f"WebSocket connection to '{ws_url}' failed")
                or (url == live_url and what.startswith("Failed to load resource: net::ERR_")))

    unexpected = [e for e in errors if not server_absent(*e) and not e[1].endswith("/favicon.ico")]
    assert not unexpected, errors
