"""500 WebSocket clients on one ASGI process: fan-out time of one event, memory per connection.

Starts the real web server (one process: portal/server.py, as `make up` runs it) serving the portal,
connects N real WebSocket clients to /ws/jobs/<id>/ of one job (logged in, through the origin and
auth checks), then publishes events the way the watcher does (jobs.live.protocol.Publisher through
channels_redis) and records, per client, the time from publish to arrival. Prints p50/p95/max
fan-out (target p95 < 250 ms) and the server's resident memory per connection.

Usage: .venv/bin/python bench/ws_fanout.py [--clients 500] [--events 10]   (Redis must be up)
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time

from _portal_env import setup

setup()

import websockets  # noqa: E402
from asgiref.sync import sync_to_async  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402

from _live_env import WebServer, session_cookie  # noqa: E402
from jobs.live.protocol import Publisher  # noqa: E402
from jobs.models import Job, JobStatus, Template  # noqa: E402


async def client(url: str, cookie: str, port: int, arrivals: dict, ready: asyncio.Event, n_ready: list, total: int):
    async with websockets.connect(url, additional_headers={"Cookie": cookie, "Origin": f"http://127.0.0.1:{port}"},
                                  open_timeout=60, max_size=2**22, ping_interval=None) as ws:
        first = json.loads(await ws.recv())
        assert first["type"] == "snapshot", first
        n_ready[0] += 1
        if n_ready[0] == total:
            ready.set()
        async for raw in ws:
            msg = json.loads(raw)
            if msg.get("type") == "job":
                seq = msg["job"]["name"]
                arrivals.setdefault(seq, []).append(time.perf_counter())
                if seq == "stop":
                    return


async def main_async(n: int, events: int) -> dict:
    user = await sync_to_async(User.objects.get)(username="demo")
    template = await sync_to_async(Template.objects.select_related("cluster").get)(slug="gpu-batch")
    job = await sync_to_async(Job.objects.create)(owner=user, template=template, template_snapshot=template.snapshot().to_json(),
                                                  cluster=template.cluster, status=JobStatus.RUNNING, total=10)
    cookie = await sync_to_async(session_cookie)(user)
    server = WebServer()
    try:
        base_rss = server.rss_kib()
        arrivals: dict[str, list[float]] = {}
        ready = asyncio.Event()
        n_ready = [0]
        url = server.url(f"/ws/jobs/{job.id}/")
        t0 = time.perf_counter()
        tasks = []
        for i in range(n):
            tasks.append(asyncio.create_task(client(url, cookie, server.port, arrivals, ready, n_ready, n)))
            if i % 25 == 24:
                # Connect in waves (each wave gets its snapshot first): the measure is fan-out to
                # connected clients, not how one listen backlog copes with 500 simultaneous SYNs.
                while n_ready[0] < i + 1 and not any(t.done() for t in tasks):
                    await asyncio.sleep(0.02)
        await asyncio.wait_for(ready.wait(), timeout=180)
        connect_s = time.perf_counter() - t0
        await asyncio.sleep(1.0)
        rss = server.rss_kib()
        sent_at = {}
        for k in range(events):
            seq = f"event-{k}"
            job.name = seq
            pub = Publisher()
            pub.job(job)
            sent_at[seq] = time.perf_counter()
            await sync_to_async(pub.flush)()
            await asyncio.sleep(0.5)
        job.name = "stop"
        pub = Publisher()
        pub.job(job)
        await sync_to_async(pub.flush)()
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=60)
    finally:
        server.stop()
        await sync_to_async(job.delete)()
    lat = [(t - sent_at[s]) * 1000 for s, ts in arrivals.items() if s in sent_at for t in ts]
    lat.sort()
    delivered = sum(len(arrivals.get(s, [])) for s in sent_at)
    return {
        "clients": n,
        "events": events,
        "delivered": f"{delivered}/{n * events}",
        "connect_all_seconds": round(connect_s, 2),
        "fanout_ms_p50": round(statistics.median(lat), 1),
        "fanout_ms_p95": round(lat[int(0.95 * (len(lat) - 1))], 1),
        "fanout_ms_max": round(lat[-1], 1),
        "target_p95_ms": 250,
        "server_rss_mib_before": round(base_rss / 1024, 1),
        "server_rss_mib_with_clients": round(rss / 1024, 1),
        "memory_per_connection_kib": round((rss - base_rss) / n, 1),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=500)
    ap.add_argument("--events", type=int, default=10)
    args = ap.parse_args()
    print(json.dumps(asyncio.run(main_async(args.clients, args.events)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
