"""The ASGI server restarts while a browser watches a job: the page reconnects and resyncs.

Real daphne (in its own process, against the file-based test database), real Redis, headless
Chromium; no cluster work: the job is written to the database directly. The page is open and live;
daphne is terminated; while it is down the job moves on in the database (no event can reach the
page: nobody is listening); a NEW daphne starts on the SAME port. The page must then, without a
reload, reconnect and show the database's state from the fresh snapshot (live.js: reconnect with a
1 s, 2 s, ... backoff; a snapshot on every connect plus an explicit `resync` after a gap; live.json
polling after three failed connects in a row).
Screenshot: artifacts/live-after-restart.png.
"""
from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.test import Client
from django.utils import timezone

from jobs.models import Job, JobStatus
from tests.e2e.test_browser_live import (ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, RECORDER, Daphne, Tab, _pct,
                                         _sync_playwright)


# Runs in the page before its own scripts: a log of every WebSocket the page makes, in the page's
# own clock (performance.now(), ms). Playwright's events would be stamped only when the test next
# talks to the browser; this is stamped when it happens. The sockets themselves are the browser's.
SOCKET_LOG = r"""
(function () {
  var Native = window.WebSocket, log = window.__sockets = [];
  function Logged(url, protocols) {
    var ws = protocols === undefined ? new Native(url) : new Native(url, protocols);
    var rec = {created: performance.now(), opened: null, closed: null, code: null, first: null, firstType: null,
               firstDone: null, messages: 0};
    log.push(rec);
    ws.addEventListener("open", function () { rec.opened = performance.now(); });
    ws.addEventListener("message", function (ev) {
      rec.messages += 1;
      if (rec.first !== null) return;
      rec.first = performance.now();
      try {
        var msg = JSON.parse(ev.data);
        rec.firstType = msg.type;
        rec.firstDone = msg.job && msg.job.progress ? msg.job.progress.done : null;
      } catch (e) { rec.firstType = "?"; }
    });
    ws.addEventListener("close", function (ev) { rec.closed = performance.now(); rec.code = ev.code; });
    return ws;
  }
  Logged.prototype = Native.prototype;
  ["CONNECTING", "OPEN", "CLOSING", "CLOSED"].forEach(function (k) { Logged[k] = Native[k]; });
  window.WebSocket = Logged;
})();
"""
NOW = "performance.now()"
POLLS = ("performance.getEntriesByType('resource').filter(e => e.name.endsWith('live.json'))"
         ".map(e => Math.round(e.startTime))")


def test_the_job_page_reconnects_and_resyncs_after_the_server_restarts(local, tmp_path, monkeypatch):
    from django.contrib.auth.models import User

    from jobs.models import Target, TargetStatus, Task, Template

    sync_playwright = _sync_playwright()
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # ORM calls beside Playwright's event loop
    ARTIFACTS.mkdir(exist_ok=True)
    owner = User.objects.get(username="demo")
    template = Template.objects.get(slug="gpu-batch")
    job = Job.objects.create(owner=owner, template=template, template_snapshot=template.snapshot(),
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

    first = Daphne(tmp_path / "daphne-1.log", media)
    second = None
    try:
        first.wait_ready()
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                context = browser.new_context(base_url=first.url, viewport={"width": 1280, "height": 900})
                context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": first.url}])
                context.add_init_script(RECORDER)
                context.add_init_script(SOCKET_LOG)
                tab = Tab(context)
                page = tab.page

                # 1. Live, showing the job as the database has it.
                page.goto(f"/jobs/{job.id}")
                page.wait_for_selector("#live-indicator[data-mode=live]", timeout=15_000)
                assert page.text_content("#job-status").strip() == "running"
                assert page.eval_on_selector("#job-progress .progress-done", "e => e.style.width") == "40%"
                assert page.text_content('#task-rows tr[data-task-index="1"] .badge') == "RUNNING"
                page.evaluate("window.__sameDocument = 'still here'")

                # 2. The server goes away; the page notices (its socket closed) and retries.
                t_stop = page.evaluate(NOW)
                first.stop()
                t_down = page.evaluate(NOW)
                page.wait_for_selector("#live-indicator[data-mode=reconnecting], #live-indicator[data-mode=polling]",
                                       state="attached", timeout=10_000)
                mode_while_down = page.get_attribute("#live-indicator", "data-mode")

                # 3. Meanwhile the job moves on, in the database only (no event reaches anyone).
                Task.objects.filter(job=job, index=1).update(state="COMPLETED", exit_code=0, elapsed_seconds=75)
                Target.objects.filter(job=job, index__gte=2).update(status=TargetStatus.DONE, faces_swapped=1)
                Job.objects.filter(pk=job.pk).update(status=JobStatus.COMPLETED, done=5, finished_at=timezone.now())
                assert page.text_content("#job-status").strip() == "running"  # nothing told the page yet

                # 4. A new server on the same port. No reload: the page finds it and resyncs.
                second = Daphne(tmp_path / "daphne-2.log", media, port=first.port)
                second.wait_ready()
                t_up = page.evaluate(NOW)
                page.wait_for_function("document.getElementById('job-status').textContent.trim() === 'completed'",
                                       timeout=20_000)
                t_seen = page.evaluate(NOW)
                page.wait_for_selector("#live-indicator", state="hidden", timeout=5_000)  # final: stopped listening
                page.wait_for_timeout(300)
                page.screenshot(path=str(ARTIFACTS / "live-after-restart.png"), full_page=True)

                rec = page.evaluate("window.__live")
                same_document = page.evaluate("window.__sameDocument")
                nav_entries = page.evaluate("performance.getEntriesByType('navigation').length")
                width = page.eval_on_selector("#job-progress .progress-done", "e => e.style.width")
                progress_text = " ".join(page.text_content("#progress-text").split())
                task_states = page.eval_on_selector_all("#task-rows tr .badge",
                                                        "els => els.map(e => e.textContent.trim())")
                target_states = page.eval_on_selector_all("#target-grid li .badge",
                                                          "els => els.map(e => e.textContent.trim())")
                badge_class = page.get_attribute("#job-status", "class")
                sockets = page.evaluate("window.__sockets")
                poll_times = page.evaluate(POLLS)
            finally:
                browser.close()
    finally:
        first.stop()
        if second is not None:
            second.stop()

    def ms(v):
        return None if v is None else round(v)

    timeline = {"stop": ms(t_stop), "down": ms(t_down), "up": ms(t_up), "seen": ms(t_seen), "polls": poll_times,
                "mode_while_down": mode_while_down,
                "sockets": [{k: (ms(v) if isinstance(v, float) else v) for k, v in s.items()} for s in sockets]}
    print("timeline (page clock, ms):", timeline)
    print("what the page showed, in order:", rec)
    print("console errors and failed requests:", tab.problems)
    print(f"shown {(t_seen - t_up) / 1000:.2f}s after the new server answered, "
          f"{(t_seen - t_down) / 1000:.2f}s after the old one was gone")

    # No reload: one navigation (the first load), one document, one load of the recorder.
    assert len(tab.navigations) == 1, tab.navigations
    assert same_document == "still here" and nav_entries == 1 and rec["loads"] == 1

    # The database's state after the restart, all of it: progress, tasks, targets, status.
    assert width == "100%" and _pct(rec["widths"][0]) == 40, rec["widths"]
    assert "5 of 5 done" in progress_text, progress_text
    assert task_states == ["COMPLETED", "COMPLETED"], task_states
    assert len(target_states) == 5 and all("done" in s for s in target_states), target_states
    assert rec["badges"] == ["running", "completed"], rec["badges"]
    assert "status-completed" in badge_class
    assert rec["tasks"]["1"] == ["RUNNING", "COMPLETED"], rec["tasks"]
    # live, then reconnecting when the server went away, then nothing (final: it stopped listening)
    assert "live" in rec["modes"] and "reconnecting" in rec["modes"][rec["modes"].index("live"):], rec["modes"]
    assert rec["modes"][-1] == "", rec["modes"]

    # The socket before the restart: live, then closed when the server went away.
    assert sockets[0]["first"] is not None and sockets[0]["firstType"] == "snapshot", timeline
    assert sockets[0]["closed"] is not None and sockets[0]["closed"] <= t_down + 50, timeline
    # While the server was down: only failed connects (never opened, no message).
    down = [s for s in sockets[1:] if s["created"] < t_up and s["opened"] is None]
    assert down and not any(s["messages"] for s in down), timeline
    # The new state came from a fresh snapshot from the NEW server: a reconnected WebSocket whose
    # first message was a snapshot with the new progress, or (had three connects in a row failed
    # first) live.json, the same snapshot over HTTP.
    fresh = [s for s in sockets if s["first"] is not None and s["first"] > t_down]
    polled_after_up = [t for t in poll_times if t >= t_up - 500]
    if fresh:
        assert fresh[0]["firstType"] == "snapshot" and fresh[0]["firstDone"] == 5, timeline
        assert fresh[0]["first"] <= t_seen + 50, timeline
    else:
        assert polled_after_up, timeline
    assert t_seen - t_up < 20_000, timeline

    # No console errors but the expected failed WebSocket connects while the server was down
    # (and, had it fallen back to polling meanwhile, the refused live.json requests).
    ws_url = f"ws://127.0.0.1:{first.port}/ws/jobs/{job.id}/"
    unexpected = [m for m in tab.problems
                  if not m.startswith(f"WebSocket connection to '{ws_url}' failed")
                  and not ("net::ERR_CONNECTION_REFUSED" in m and not fresh)]
    assert not unexpected, tab.problems
