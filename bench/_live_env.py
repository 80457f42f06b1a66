"""Shared set-up of the live-status benches: the portal's real web server (portal/server.py, the
one `make up` runs) on a free port, against the bench's SQLite file, plus logged-in session
cookies for real WebSocket clients."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WebServer:
    """`processes`: the server's --processes (None: the server's default, as `make up` starts it)."""

    def __init__(self, env: dict[str, str] | None = None, processes: int | None = 1) -> None:
        from portal.server import command

        self.port = free_port()
        env = {**os.environ, "ALLOWED_HOSTS": "127.0.0.1,localhost", "LOG_LEVEL": "WARNING", **(env or {})}
        # The server's log goes to a file, never a pipe nobody reads: uvicorn logs a line or two per
        # WebSocket, and 500 sockets fill a 64 KiB pipe, which stops the server mid-bench.
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(command(self.port, processes=processes), cwd=ROOT, env=env,
                                     stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    sys.exit("the web server died: " + self.log_tail())
                time.sleep(0.2)
        sys.exit("the web server did not start in 30 s")

    def pids(self) -> list[int]:
        """The server's process and all its descendants (the workers of a multi-process server)."""
        return process_tree(self.proc.pid)

    def rss_kib(self) -> int:
        """Resident memory of the whole server: its process and every worker, summed."""
        return sum(_status_kib(pid, "VmRSS:") for pid in self.pids())

    def log_tail(self, n: int = 2000) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-n:]

    def url(self, path: str) -> str:
        return f"ws://127.0.0.1:{self.port}{path}"

    def stop(self) -> None:
        workers = [pid for pid in self.pids() if pid != self.proc.pid]
        self.proc.terminate()  # a multi-process server stops its workers itself
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            for pid in workers:  # what the killed supervisor could not stop (ours: its children)
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.log.close()


def proc_stats() -> dict[int, tuple[str, list[str]]]:
    """{pid: (command name, the fields of /proc/<pid>/stat after it)} of every process, each file
    read once (field 1 is the parent pid, 11 and 12 the CPU ticks, 21 the resident pages)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                head, _, rest = (entry / "stat").read_text().rpartition(")")
            except OSError:  # the process ended meanwhile
                continue
            out[int(entry.name)] = (head.split("(", 1)[1], rest.split())
    return out


def process_tree(root: int, stats: dict[int, tuple[str, list[str]]] | None = None) -> list[int]:
    """`root` and all its descendants, from `stats` (proc_stats(); read now when None)."""
    children: dict[int, list[int]] = {}
    for pid, (_, fields) in (proc_stats() if stats is None else stats).items():
        children.setdefault(int(fields[1]), []).append(pid)
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def _status_kib(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1])
    except OSError:  # the process ended meanwhile
        pass
    return 0


def session_cookie(user) -> str:
    """`sessionid=...` of a fresh login session for `user` (the database the web server reads)."""
    from django.test import Client

    c = Client()
    c.force_login(user)
    return f"sessionid={c.cookies['sessionid'].value}"
