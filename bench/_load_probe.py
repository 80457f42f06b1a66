"""What bench/load_run.py measures while the load runs: the portal's processes (memory, CPU), the
watcher's cycles, outputs fetched, PostgreSQL and Redis, pages as users open them, and live events
in real WebSockets. Plain helpers; the run itself is bench/load_run.py."""
from __future__ import annotations

import asyncio
import http.client
import json
import os
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from _live_env import proc_stats, process_tree
from _portal_env import ROOT

TICK = os.sysconf("SC_CLK_TCK")
PAGE_KiB = os.sysconf("SC_PAGE_SIZE") // 1024
#: the outside programs whose memory and CPU the run reports, by their process name
SYSTEM = {"redis": ("redis-server",), "postgresql": ("postgres",), "slurm": ("slurmctld", "slurmd", "slurmdbd", "slurmstepd")}


def spread(values, unit: str | None = None, digits: int = 3):
    """min / median / max (and n): a dict, or a short text when `unit` is given."""
    if not values:
        return None if unit is None else "none"
    lo, mid, hi = min(values), statistics.median(values), max(values)
    if unit is not None:
        return f"{lo:.{digits}f} / {mid:.{digits}f} / {hi:.{digits}f} {unit} (n={len(values)})"
    return {"min": round(lo, digits), "median": round(mid, digits), "max": round(hi, digits), "n": len(values)}


def p95(values) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return round(values[int(0.95 * (len(values) - 1))], 4)


def _rss_and_ticks(fields: list[str]) -> tuple[int, int]:
    """(resident KiB, CPU ticks used so far) from a process's stat fields (proc_stats)."""
    return int(fields[21]) * PAGE_KiB, int(fields[11]) + int(fields[12])


def _sockets_to(port: int) -> set[str]:
    """Inodes of the open TCP sockets whose far end is `port` (PostgreSQL's: 5432)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[2].rsplit(":", 1)[1], 16) == port and fields[3] == "01":  # ESTABLISHED
                found.add(fields[9])
    return found


def _connections(pid: int, inodes: set[str]) -> int:
    n = 0
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                link = os.readlink(fd)
            except OSError:
                continue
            n += link.startswith("socket:[") and link[8:-1] in inodes
    except OSError:
        pass
    return n


class Processes:
    """The portal's processes the run started (each with its children), and the outside programs."""

    def __init__(self) -> None:
        self.started: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}
        self.trees: dict[str, object] = {}

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        log = self.logs[name] = Path(tempfile.mkstemp(prefix=f"ffp-load-{name}-", suffix=".log")[1])
        with log.open("w") as out:
            self.started[name] = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                                  env={**os.environ, "LOG_LEVEL": "WARNING", **(env or {})})

    def add_tree(self, name: str, server) -> None:
        self.trees[name] = server

    def groups(self, stats: dict[int, tuple[str, list[str]]]) -> dict[str, list[int]]:
        """Each group's processes, from one reading of /proc (proc_stats)."""
        out = {name: process_tree(p.pid, stats) for name, p in self.started.items() if p.poll() is None}
        out.update({name: process_tree(server.proc.pid, stats) for name, server in self.trees.items()})
        out.update({name: [pid for pid, (comm, _) in stats.items() if comm in names] for name, names in SYSTEM.items()})
        return out

    def dead(self) -> list[str]:
        return [f"{name} (exit {p.returncode}): {self.tail(name)}" for name, p in self.started.items()
                if p.poll() is not None]

    def tail(self, name: str) -> str:
        return self.logs[name].read_text(errors="replace")[-1500:]

    def stop_all(self) -> None:
        for p in self.started.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.started.values():
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for log in self.logs.values():
            log.unlink(missing_ok=True)


class Probe:
    """Samples every `every` seconds for `seconds`; report() turns the samples into figures."""

    def __init__(self, procs: Processes, profile, cycles_file: str, every: float = 5.0, count_every: float = 30.0):
        self.procs, self.profile, self.cycles_file = procs, profile, cycles_file
        self.every, self.count_every = every, count_every
        self.memory: dict[str, list[tuple[int, int, int]]] = {}  # name -> [(sum KiB, largest KiB, processes)]
        self.cpu: dict[str, float] = {}  # name -> CPU seconds used in the window
        self.last_ticks: dict[int, int] = {}
        self.names: dict[str, set[str]] = {}
        self.pg_connections: dict[str, list[int]] = {}  # name -> [connections to PostgreSQL, each sample]
        self.counts: list[tuple[float, int, int]] = []  # (time, photos done, outputs fetched)
        self.redis: list[tuple[float, int, int]] = []  # (time, commands so far, used memory)
        self.pg: list[tuple[float, dict]] = []

    def _counts(self) -> None:
        from django.db.models import Sum

        from jobs.models import Job, Target

        done = Job.objects.filter(cluster=self.profile).aggregate(n=Sum("done"))["n"] or 0
        fetched = Target.objects.filter(job__cluster=self.profile).exclude(output_file="").count()
        self.counts.append((time.monotonic(), done, fetched))

    def _sample(self) -> None:
        import django_rq
        from django.db import connection

        first = not self.memory
        seen: dict[int, int] = {}
        to_pg = _sockets_to(5432)
        stats = proc_stats()
        for name, pids in self.procs.groups(stats).items():
            if name not in SYSTEM:
                self.pg_connections.setdefault(name, []).append(sum(_connections(p, to_pg) for p in pids))
            read = [(pid, *_rss_and_ticks(stats[pid][1])) for pid in pids if pid in stats]
            rss = [r for _, r, _ in read if r]
            self.memory.setdefault(name, []).append((sum(rss), max(rss, default=0), len(rss)))
            self.names.setdefault(name, set()).update(stats[pid][0] for pid, r, _ in read if r)
            # CPU by process: one that began in the window counts whole, one that ended keeps what it
            # had used by the last sample (processes come and go: PostgreSQL's backends)
            used = sum(t - self.last_ticks.get(pid, 0) for pid, r, t in read if r)
            seen.update((pid, t) for pid, r, t in read if r)
            self.cpu[name] = 0.0 if first else self.cpu.get(name, 0.0) + used / TICK
        self.last_ticks = seen
        info = django_rq.get_connection().info()
        self.redis.append((time.monotonic(), info["total_commands_processed"], info["used_memory"]))
        with connection.cursor() as cur:
            cur.execute("SELECT xact_commit, xact_rollback, tup_returned, tup_fetched, tup_inserted, tup_updated, "
                        "tup_deleted, blks_read, blks_hit FROM pg_stat_database WHERE datname = current_database()")
            names = [c.name for c in cur.description]
            self.pg.append((time.monotonic(), dict(zip(names, cur.fetchone()))))

    def run(self, seconds: float) -> None:
        self.t0 = time.monotonic()
        self.wall0 = time.time()
        next_count = 0.0
        while time.monotonic() - self.t0 < seconds:
            dead = self.procs.dead()
            if dead:
                raise SystemExit("a portal process ended during the run:\n" + "\n".join(dead))
            tick = time.monotonic()
            self._sample()
            if tick >= next_count:
                self._counts()
                next_count = tick + self.count_every
            time.sleep(max(0.0, self.every - (time.monotonic() - tick)))
        self._counts()
        self._sample()
        self.window = time.monotonic() - self.t0

    def _rates(self, i: int) -> list[float]:
        return [(b[i] - a[i]) / (b[0] - a[0]) for a, b in zip(self.counts, self.counts[1:]) if b[0] > a[0]]

    def report(self) -> dict:
        cycles = []
        for line in Path(self.cycles_file).read_text().splitlines():
            at, seconds, _ = line.split()
            if float(at) >= self.wall0:
                cycles.append(float(seconds))
        Path(self.cycles_file).unlink(missing_ok=True)
        (t_a, c_a, _), (t_b, c_b, _) = self.redis[0], self.redis[-1]
        pg_a, pg_b = self.pg[0], self.pg[-1]
        span = pg_b[0] - pg_a[0]
        first, last = self.counts[0], self.counts[-1]
        return {
            "window_seconds": round(self.window, 1),
            "watcher_cycle_seconds": {**spread(cycles), "p95": p95(cycles)},
            "photos_done_a_second": {**spread(self._rates(1), digits=1),
                                     "whole_window": round((last[1] - first[1]) / (last[0] - first[0]), 1)},
            "outputs_fetched_a_second": {**spread(self._rates(2), digits=1),
                                         "whole_window": round((last[2] - first[2]) / (last[0] - first[0]), 1)},
            "photos_done_in_window": last[1] - first[1], "outputs_fetched_in_window": last[2] - first[2],
            "postgresql_a_second": {k: round((pg_b[1][k] - pg_a[1][k]) / span, 1) for k in pg_a[1]},
            "redis": {"commands_a_second": round((c_b - c_a) / (t_b - t_a), 1),
                      "used_memory_mib": spread([m / 2**20 for _, _, m in self.redis], digits=1)},
            "memory_mib": {name: {"sum": spread([s / 1024 for s, _, _ in rows], digits=1),
                                  "largest_process": spread([b / 1024 for _, b, _ in rows], digits=1),
                                  "processes": max(n for _, _, n in rows)}
                           for name, rows in self.memory.items()},
            "cpu_percent_of_one_core": {name: round(100 * seconds / self.window, 1)
                                        for name, seconds in self.cpu.items()},
            "postgresql_connections": {name: spread(n, digits=0) for name, n in self.pg_connections.items()},
            "process_names": {name: sorted(names) for name, names in self.names.items()},
        }


class WebUsers:
    """Users opening pages one after another (a pause of `pause` s between pages), each on its own
    keep-alive connection; every answer's seconds kept by page."""

    PAGES = ("job list", "job page", "job live.json", "list live.json")

    def __init__(self, server, users: list[tuple[str, str]], pause: float = 0.5) -> None:
        self.port, self.users, self.pause = server.port, users, pause
        self.seconds: dict[str, list[float]] = {p: [] for p in self.PAGES}
        self.errors: list[str] = []
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self._user, args=u, daemon=True) for u in users]

    def _user(self, cookie: str, job_id: str) -> None:
        paths = dict(zip(self.PAGES, ("/", f"/jobs/{job_id}", f"/jobs/{job_id}/live.json", "/jobs/live.json")))
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        while not self.stopping.is_set():
            for page, path in paths.items():
                t0 = time.perf_counter()
                try:
                    conn.request("GET", path, headers={"Cookie": cookie, "Accept": "*/*"})
                    r = conn.getresponse()
                    r.read()
                    if r.status != 200:
                        self.errors.append(f"{path}: HTTP {r.status}")
                except (OSError, http.client.HTTPException) as exc:
                    self.errors.append(f"{path}: {exc}")
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
                    continue
                self.seconds[page].append(time.perf_counter() - t0)
                self.stopping.wait(self.pause)

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def stop(self) -> None:
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=130)

    def report(self) -> dict:
        every = [s for v in self.seconds.values() for s in v]
        return {"all_pages": {**spread(every, digits=4), "p95": p95(every)}, "errors": self.errors[:5],
                "error_count": len(self.errors),
                **{page: {**spread(v, digits=4), "p95": p95(v)} for page, v in self.seconds.items()}}


class Sockets:
    """One real WebSocket per job (as a browser's job page opens it), in a thread of its own; every
    `job` event's arrival time and done count kept."""

    def __init__(self, server, cookies: dict[str, str]) -> None:
        self.server, self.cookies = server, cookies
        self.events: dict[str, list[tuple[float, int]]] = {job: [] for job in cookies}
        self.opened: dict[str, float] = {}
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    async def _watch(self, job_id: str) -> None:
        import websockets

        headers = {"Cookie": self.cookies[job_id]}
        async with websockets.connect(self.server.url(f"/ws/jobs/{job_id}/"), additional_headers=headers,
                                      origin=f"http://127.0.0.1:{self.server.port}", max_size=None) as ws:
            self.opened[job_id] = time.time()
            async for raw in ws:
                msg = json.loads(raw)
                if msg.get("type") in ("job", "snapshot") and "job" in msg:
                    self.events[job_id].append((time.time(), msg["job"]["progress"]["done"]))

    async def _all(self) -> None:
        self.quit = asyncio.Event()
        tasks = [asyncio.create_task(self._watch(j)) for j in self.cookies]
        await self.quit.wait()
        for t in tasks:
            t.cancel()
        for t in tasks:  # a socket that ended early (closed by the server) says why here
            try:
                await t
            except asyncio.CancelledError:
                pass

    def start(self) -> None:
        self.thread.start()
        self.running = asyncio.run_coroutine_threadsafe(self._all(), self.loop)

    def stop(self) -> None:
        self.stopped = time.time()
        self.loop.call_soon_threadsafe(self.quit.set)
        self.running.result(timeout=60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=30)

    @staticmethod
    def done_times(runner, jobs) -> dict[str, list[float]]:
        """When the stand-in recorded each photo done, per job (its `standin-times` files)."""
        out = {}
        for job in jobs:
            r = runner.run(["sh", "-c", 'cat -- "$1"/standin-times/*.txt 2>/dev/null || true', "sh", job.folder.root],
                           timeout=120)
            out[str(job.id)] = sorted(float(line.split()[2]) for line in r.stdout.splitlines()
                                      if line.startswith("done "))
        return out

    def latency(self, done_times: dict[str, list[float]]) -> dict:
        """For the k-th photo of a job recorded done (in time order): the wait until the first event
        whose count reaches k. Only changes after the socket opened and seen before it closed."""
        waits, unseen = [], 0
        for job, times in done_times.items():
            events = self.events[job]
            opened = self.opened.get(job)
            if opened is None:
                continue
            for k, at in enumerate(times, start=1):
                if at <= opened:
                    continue
                seen = next((t for t, done in events if done >= k and t >= at), None)
                if seen is None:
                    unseen += at < self.stopped - 10  # a change well before the end that never arrived
                    continue
                waits.append(seen - at)
        return {**(spread(waits) or {}), "p95": p95(waits), "never_arrived": unseen}
