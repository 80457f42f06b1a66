"""A 100,000-image job is as quick to watch as a 100-image one: bytes and times, measured side by side.

Everything goes through the portal's real web server (portal/server.py, as `make up` runs it) over
real HTTP and WebSocket connections, against a throw-away SQLite database filled directly (rows as
the watcher would leave them: targets done / failed / waiting, tasks COMPLETED / RUNNING).

Measured, for a job of SMALL and of BIG targets (the two sizes alternate, round after round):
  - the job page (GET /jobs/<id>), live.json, the API's job detail, the WebSocket's first snapshot:
    bytes, and the median seconds of REQUESTS calls per round;
  - the job list (page 1 vs the last page) and the API list (its first page vs its last, reached by
    the cursor its links carry and, for older clients, by offset) of a user with JOBS jobs;
  - another user's small page (their job list) p95 with nobody watching and with TABS WebSocket
    clients on the BIG job, while the watcher's events for it are published every second in both
    cases (a job event and ten targets done); the tabs only listen, as the page does, or (a
    harsher case) each asks for a fresh snapshot every second.

Prints, per measure, min / median / max over the rounds and the ratio of the medians (big / small).
Usage: .venv/bin/python bench/bigjob.py [--big 100000] [--rounds 3]   (needs Redis: make test / up)
"""
from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import sys
import threading
import time
import urllib.request

from _portal_env import setup

setup()

import websockets  # noqa: E402
from _live_env import WebServer, session_cookie  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.utils import timezone  # noqa: E402

from jobs.api.paging import cursor_of  # noqa: E402
from jobs.live.protocol import Publisher  # noqa: E402
from jobs.models import Job, JobStatus, Target, TargetStatus, Task, Template  # noqa: E402

REQUESTS = 9
FORK = multiprocessing.get_context("fork")


def make_job(owner, template, targets: int, name: str) -> Job:
    """A running job: 1% failed, the last 1% still waiting, the rest done; a task per 10 targets."""
    job = Job.objects.create(owner=owner, template=template, template_snapshot=template.snapshot().to_json(),
                             cluster=template.cluster, name=name, status=JobStatus.RUNNING, slurm_job_id="1",
                             total=targets)
    rows = []
    for i in range(targets):
        status = (TargetStatus.FAILED if i % 100 == 7 else TargetStatus.WAITING if i >= targets * 0.99
                  else TargetStatus.DONE)
        rows.append(Target(job=job, index=i, name=f"shoot/day-{i // 1000:03d}/IMG_{i:06d}.jpg",
                           output_name=f"{i:06d}.jpg", task_index=i // 10, status=status,
                           output_file=f"/srv/out/{i:06d}.jpg" if status == TargetStatus.DONE else "",
                           message="The image could not be read." if status == TargetStatus.FAILED else ""))
        if len(rows) == 5000:
            Target.objects.bulk_create(rows)
            rows = []
    Target.objects.bulk_create(rows)
    tasks = max(1, targets // 10)
    Task.objects.bulk_create([Task(job=job, index=i, state="RUNNING" if i >= tasks - 2 else "COMPLETED")
                              for i in range(tasks)], batch_size=5000)
    job.recount()
    return job


def make_jobs(owner, template, n: int) -> None:
    now = timezone.now()
    snap = template.snapshot().to_json()
    Job.objects.bulk_create([Job(owner=owner, template=template, template_snapshot=snap, cluster=template.cluster,
                                 name=f"list job {i}", status=JobStatus.COMPLETED, total=10, done=10,
                                 created_at=now - timezone.timedelta(minutes=i)) for i in range(n)], batch_size=2000)


class Http:
    def __init__(self, port: int, cookie: str) -> None:
        self.base, self.cookie = f"http://127.0.0.1:{port}", cookie

    def get(self, path: str) -> tuple[float, int]:
        req = urllib.request.Request(self.base + path, headers={"Cookie": self.cookie, "Accept": "*/*"})
        t0 = time.perf_counter()
        with urllib.request.urlopen(req, timeout=120) as r:
            body = r.read()
        return time.perf_counter() - t0, len(body)


async def ws_snapshot(server: WebServer, cookie: str, path: str) -> tuple[float, int]:
    t0 = time.perf_counter()
    try:
        async with websockets.connect(server.url(path), additional_headers={"Cookie": cookie},
                                      origin=f"http://127.0.0.1:{server.port}", max_size=None) as ws:
            raw = await asyncio.wait_for(ws.recv(), 120)
    except websockets.ConnectionClosed as exc:
        return float("nan"), -(exc.rcvd.code if exc.rcvd else 1006)  # closed before the snapshot
    except websockets.InvalidStatus as exc:
        return float("nan"), -exc.response.status_code  # refused: no snapshot at all
    return time.perf_counter() - t0, len(raw)


def timed(fn, n: int = REQUESTS) -> tuple[float, int]:
    """Median seconds of n calls, and the size of the answer."""
    results = [fn() for _ in range(n)]
    return statistics.median(r[0] for r in results), results[-1][1]


def spread(values) -> str:
    return f"min {min(values):.4f}  median {statistics.median(values):.4f}  max {max(values):.4f}"


def watching(port: int, cookie: str, job_pk, tabs: int, resync: bool, stop) -> None:
    """In a process of its own (so the measuring client shares no interpreter lock with it):
    `tabs` WebSocket clients on the job's page until `stop`, listening as the page does (it asks
    for a snapshot only when it wakes up or reconnects), or with `resync` asking for one every
    second; and what the watcher publishes for a running job each second: ten targets done and
    the job."""
    from django.db import connection

    connection.close()  # the parent's connection is not this process's to use
    url = f"ws://127.0.0.1:{port}/ws/jobs/{job_pk}/"

    async def tab():
        async with websockets.connect(url, additional_headers={"Cookie": cookie},
                                      origin=f"http://127.0.0.1:{port}", max_size=None) as ws:
            while not stop.is_set():
                if resync:
                    await ws.send(json.dumps({"type": "resync"}))
                deadline = time.monotonic() + 1
                while time.monotonic() < deadline:
                    try:
                        await asyncio.wait_for(ws.recv(), max(0.01, deadline - time.monotonic()))
                    except asyncio.TimeoutError:
                        break

    def publishing():
        n = 0
        while not stop.wait(1):
            job = Job.objects.get(pk=job_pk)
            pub = Publisher()
            for target in Target.objects.filter(job=job).order_by("index")[n % 40:n % 40 + 10]:
                pub.output(job, target)
            pub.job(job)
            pub.flush()
            n += 10

    async def all_tabs():
        await asyncio.gather(*(tab() for _ in range(tabs)))

    publisher = threading.Thread(target=publishing, daemon=True)
    publisher.start()
    asyncio.run(all_tabs())
    stop.wait()  # no tabs: publish until told
    publisher.join(10)


def p95(values) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(0.95 * (len(values) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", type=int, default=100)
    ap.add_argument("--big", type=int, default=100_000)
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--tabs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    demo = User.objects.get(username="demo")
    other = User.objects.create_user("other", password="bench-pass-123")
    template = Template.objects.select_related("cluster").get(slug="gpu-batch")
    t0 = time.perf_counter()
    sizes = {"small": make_job(demo, template, args.small, "small"), "big": make_job(demo, template, args.big, "big")}
    make_jobs(demo, template, args.jobs - 2)  # with the two above: exactly --jobs, the last page full
    make_job(other, template, 10, "other's job")
    print(f"# filled the database in {time.perf_counter() - t0:.1f} s: jobs of {args.small} and {args.big} "
          f"targets, {args.jobs} more jobs", flush=True)

    server = WebServer()
    cookie, other_cookie = session_cookie(demo), session_cookie(other)
    http, other_http = Http(server.port, cookie), Http(server.port, other_cookie)
    last_page = -(-args.jobs // 50)
    last_offset = args.jobs - 50
    # the cursor of the row just before the API's last page, as the previous page's `next` carries it
    before_last = Job.objects.filter(owner=demo).order_by("-created_at", "-pk")[last_offset - 1]
    last_cursor = cursor_of(before_last)
    measures: dict[str, dict[str, list]] = {}
    sizes_seen: dict[str, dict[str, int]] = {}

    def record(name, which, seconds, size):
        measures.setdefault(name, {}).setdefault(which, []).append(seconds)
        sizes_seen.setdefault(name, {})[which] = size

    try:
        for job in sizes.values():  # warm up: the first request of a fresh server pays for imports
            http.get(f"/jobs/{job.id}")
            http.get(f"/api/v1/jobs/{job.id}")
            asyncio.run(ws_snapshot(server, cookie, f"/ws/jobs/{job.id}/"))
        other_http.get("/")
        for rnd in range(args.rounds):
            order = ("small", "big") if rnd % 2 == 0 else ("big", "small")
            for which in order:
                job = sizes[which]
                record("job page", which, *timed(lambda job=job: http.get(f"/jobs/{job.id}")))
                record("live.json", which, *timed(lambda job=job: http.get(f"/jobs/{job.id}/live.json")))
                record("API job detail", which, *timed(lambda job=job: http.get(f"/api/v1/jobs/{job.id}")))
                record("WebSocket snapshot", which,
                       *timed(lambda job=job: asyncio.run(ws_snapshot(server, cookie, f"/ws/jobs/{job.id}/")), n=5))
            for which in order:
                page, offset = (1, 0) if which == "small" else (last_page, last_offset)
                after = "" if which == "small" else f"?after={last_cursor}"
                record("job list page", which, *timed(lambda page=page: http.get(f"/?page={page}")))
                record("API job list (cursor)", which, *timed(lambda after=after: http.get(f"/api/v1/jobs{after}")))
                record("API job list (offset)", which,
                       *timed(lambda offset=offset: http.get(f"/api/v1/jobs?offset={offset}")))
            # another user's page, with nobody watching and with TABS tabs on the big job while
            # the watcher's events for it go out every second (a job event, ten targets done)
            for resync in (False, True):
                name = "other user's page p95" + (", tabs resync 1/s" if resync else "")
                for watched in (order[0] == "big", order[0] != "big"):
                    # The watcher's events flow in both cases (it runs whether anyone watches or
                    # not); only the tabs differ, so the ratio is what the tabs cost.
                    stop = FORK.Event()
                    child = FORK.Process(target=watching, args=(server.port, cookie, sizes["big"].pk,
                                                                args.tabs if watched else 0, resync, stop), daemon=True)
                    child.start()
                    time.sleep(2)
                    seconds = [other_http.get("/")[0] for _ in range(60)]
                    stop.set()
                    child.join(15)
                    measures.setdefault(name, {}).setdefault("big" if watched else "small", []).append(p95(seconds))
            print(f"# round {rnd + 1} done", flush=True)
    finally:
        server.stop()

    print(f"\nsmall = {args.small} targets, big = {args.big} targets; list: page 1 vs page {last_page} "
          f"of {args.jobs} jobs; other user's page: nobody watching vs {args.tabs} tabs on the big job")
    for name, by in measures.items():
        s, b = by["small"], by["big"]
        sizes_text = ""
        if name in sizes_seen:
            sizes_text = f"   bytes small {sizes_seen[name]['small']:,}  big {sizes_seen[name]['big']:,}"
        print(f"{name:24s} small: {spread(s)}\n{'':24s} big:   {spread(b)}\n"
              f"{'':24s} ratio of medians big/small: {statistics.median(b) / statistics.median(s):.2f}{sizes_text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
