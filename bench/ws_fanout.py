"""500 WebSocket clients: fan-out time of one event, on one web server process against two; memory per socket.

Each round starts the real web server (portal/server.py, as `make up` runs it) with `--processes 1`
and with `--processes 2`, in alternating order, connects N real WebSocket clients to /ws/jobs/<id>/
of one job (logged in, through the origin and auth checks), then publishes events the way the
watcher does (jobs.live.protocol.Publisher through channels_redis) and records, per client, the time
from the publish call to the event's arrival. Per round and server it prints p50/p95/max fan-out
(target p95 < 250 ms), how the sockets were spread over the processes, and the memory per socket:
the resident memory of all the server's processes with N sockets open, less the same with none
(after a warm-up that loaded everything one socket loads), over N. Then min/median/max over rounds,
and the ratio one process : two processes of each round's p95 (both measured in the same round).

The clients are one asyncio protocol each, no library: the arrival time is taken in data_received,
before anything is parsed, so the client process (on the same cores) adds as little as it can.

Usage: .venv/bin/python bench/ws_fanout.py [--clients 500] [--events 10] [--rounds 3]   (Redis must be up)
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import statistics
import struct
import sys
import time
from pathlib import Path

from _portal_env import setup

setup()

from _live_env import WebServer, session_cookie  # noqa: E402
from asgiref.sync import sync_to_async  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402

from jobs.live.protocol import Publisher  # noqa: E402
from jobs.models import Job, JobStatus, Template  # noqa: E402

WAVE = 25  # clients connected at a time (each wave gets its snapshot before the next starts)
EVENT_GAP_S = 0.5
TARGET_P95_MS = 250


class Client(asyncio.Protocol):
    """One WebSocket client: the upgrade request, then every text frame kept with its arrival time."""

    def __init__(self, request: bytes, on_snapshot):
        self.request = request
        self.on_snapshot = on_snapshot
        self.buf = b""
        self.upgraded = False
        self.frames: list[tuple[float, bytes]] = []  # (arrival, payload) of each text frame
        self.closed = asyncio.get_running_loop().create_future()

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        self.buf += data
        if not self.upgraded:
            head, sep, rest = self.buf.partition(b"\r\n\r\n")
            if not sep:
                return
            if b" 101 " not in head.split(b"\r\n", 1)[0]:
                raise SystemExit(f"upgrade refused: {head[:200]!r}")
            self.upgraded, self.buf = True, rest
        while len(self.buf) >= 2:
            opcode, length, at = self.buf[0] & 0x0F, self.buf[1] & 0x7F, 2
            if length == 126:
                length, at = struct.unpack(">H", self.buf[2:4])[0], 4
            elif length == 127:
                length, at = struct.unpack(">Q", self.buf[2:10])[0], 10
            if len(self.buf) < at + length:
                return
            payload, self.buf = self.buf[at:at + length], self.buf[at + length:]
            if opcode == 0x1:
                self.frames.append((now, payload))
                if len(self.frames) == 1:
                    self.on_snapshot()
            elif opcode == 0x9:  # the server's keep-alive ping: answered, as a browser does
                self.send(0xA, payload)
            elif opcode == 0x8:
                self.transport.close()

    def send(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)  # client frames are masked (RFC 6455)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.transport.write(bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + masked)

    def connection_lost(self, exc) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


def upgrade_request(port: int, path: str, cookie: str) -> bytes:
    key = base64.b64encode(os.urandom(16)).decode()
    return (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nOrigin: http://127.0.0.1:{port}\r\n"
            f"Cookie: {cookie}\r\n\r\n").encode()


async def connect_all(server: WebServer, path: str, cookie: str, n: int) -> list[Client]:
    loop = asyncio.get_running_loop()
    ready = [0]
    clients = []
    for start in range(0, n, WAVE):
        for _ in range(min(WAVE, n - start)):
            _, client = await loop.create_connection(
                lambda: Client(upgrade_request(server.port, path, cookie), lambda: ready.__setitem__(0, ready[0] + 1)),
                "127.0.0.1", server.port)
            clients.append(client)
        # Waves: the measure is fan-out to connected clients, not a listen backlog under 500 SYNs.
        deadline = time.monotonic() + 120
        while ready[0] < len(clients):
            if time.monotonic() > deadline or any(c.closed.done() for c in clients):
                raise SystemExit(f"only {ready[0]} of {len(clients)} clients got their snapshot")
            await asyncio.sleep(0.02)
    return clients


def sockets_per_process(server: WebServer) -> dict[int, int]:
    """{pid: open sockets} of the server's processes (the listening socket, Redis, clients)."""
    counts = {}
    for pid in server.pids():
        try:
            counts[pid] = sum(os.readlink(f).startswith("socket:") for f in Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            pass
    return counts


def settle(server: WebServer, seconds: float = 1.0) -> int:
    """Resident memory once it stopped moving (at most 15 s): lazy imports and freed buffers done."""
    last = server.rss_kib()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        time.sleep(seconds)
        now = server.rss_kib()
        if abs(now - last) < 256:
            return now
        last = now
    return last


async def one_round(processes: int, n: int, events: int, job: Job, cookie: str) -> dict:
    server = WebServer(processes=processes)
    path = f"/ws/jobs/{job.id}/"
    clients: list[Client] = []
    try:
        # Warm-up: enough sockets that every process has served some (the kernel picks which), so
        # "idle" below already holds what the first socket loads (consumers, Redis connections).
        warm = await connect_all(server, path, cookie, 10 * processes)
        for c in warm:
            c.transport.close()
        await asyncio.gather(*(c.closed for c in warm))
        idle_rss = await asyncio.to_thread(settle, server)
        idle_sockets = sockets_per_process(server)
        t0 = time.perf_counter()
        clients = await connect_all(server, path, cookie, n)
        connect_s = time.perf_counter() - t0
        loaded_rss = await asyncio.to_thread(settle, server)
        spread = sorted(count - idle_sockets.get(pid, 0) for pid, count in sockets_per_process(server).items()
                        if count - idle_sockets.get(pid, 0) > 0)
        sent_at = {}
        for k in range(events):
            name = f"event-{k}"
            sent_at[name] = await sync_to_async(publish)(job, name)
            await asyncio.sleep(EVENT_GAP_S)
        await asyncio.sleep(1.0)  # the last event's stragglers
    finally:
        for c in clients:
            c.transport.close()
        server.stop()
    lat = []
    for c in clients:
        assert json.loads(c.frames[0][1])["type"] == "snapshot"
        for arrived, payload in c.frames[1:]:
            msg = json.loads(payload)
            if msg.get("type") == "job" and msg["job"]["name"] in sent_at:
                lat.append((arrived - sent_at[msg["job"]["name"]]) * 1000)
    lat.sort()
    return {
        "processes": processes, "delivered": f"{len(lat)}/{n * events}", "connect_all_s": round(connect_s, 1),
        "sockets_per_process": spread,
        "p50_ms": round(statistics.median(lat), 1), "p95_ms": round(lat[int(0.95 * (len(lat) - 1))], 1),
        "max_ms": round(lat[-1], 1),
        "rss_idle_mib": round(idle_rss / 1024, 1), "rss_with_clients_mib": round(loaded_rss / 1024, 1),
        "kib_per_socket": round((loaded_rss - idle_rss) / n, 1),
    }


def publish(job: Job, name: str) -> float:
    """One `job` event, as the watcher sends it; the time just before it is handed to the channel layer."""
    job.name = name
    pub = Publisher()
    pub.job(job)  # builds the message (a query for the task counts): not part of the fan-out
    at = time.perf_counter()
    pub.flush()
    return at


def spread(values: list[float]) -> str:
    return f"{min(values):.1f} / {statistics.median(values):.1f} / {max(values):.1f}"


async def main_async(n: int, events: int, rounds: int) -> None:
    user = await sync_to_async(User.objects.get)(username="demo")
    template = await sync_to_async(Template.objects.select_related("cluster").get)(slug="gpu-batch")
    job = await sync_to_async(Job.objects.create)(owner=user, template=template,
                                                  template_snapshot=template.snapshot().to_json(),
                                                  cluster=template.cluster, status=JobStatus.RUNNING, total=10)
    cookie = await sync_to_async(session_cookie)(user)
    results: dict[int, list[dict]] = {1: [], 2: []}
    ratios = []
    print(f"{n} clients, {events} events per round, {rounds} rounds, {os.cpu_count()} cores", flush=True)
    try:
        for r in range(rounds):
            for processes in ((1, 2) if r % 2 == 0 else (2, 1)):  # alternated, so drift hits both alike
                result = await one_round(processes, n, events, job, cookie)
                results[processes].append(result)
                print(json.dumps({"round": r + 1, **result}), flush=True)
            ratios.append(results[1][-1]["p95_ms"] / results[2][-1]["p95_ms"])
    finally:
        await sync_to_async(job.delete)()
    print("\nmin / median / max over rounds")
    for processes, rows in results.items():
        print(f"{processes} process{'es' if processes > 1 else '  '}: "
              f"p50 {spread([r['p50_ms'] for r in rows])} ms, p95 {spread([r['p95_ms'] for r in rows])} ms "
              f"(target < {TARGET_P95_MS}), memory per socket {spread([r['kib_per_socket'] for r in rows])} KiB, "
              f"idle {spread([r['rss_idle_mib'] for r in rows])} MiB")
    print(f"p95 one process : two processes, same round: {spread(ratios)}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=500)
    ap.add_argument("--events", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    asyncio.run(main_async(args.clients, args.events, args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
