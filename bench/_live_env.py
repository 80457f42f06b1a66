"""Shared set-up of the live-status benches: the portal's real web server (portal/server.py, the
one `make up` runs) on a free port, against the bench's SQLite file, plus logged-in session
cookies for real WebSocket clients."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WebServer:
    def __init__(self, env: dict[str, str] | None = None) -> None:
        from portal.server import command

        self.port = free_port()
        env = {**os.environ, "ALLOWED_HOSTS": "127.0.0.1,localhost", "LOG_LEVEL": "WARNING", **(env or {})}
        self.proc = subprocess.Popen(command(self.port), cwd=ROOT, env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    sys.exit("the web server died: " + self.proc.stderr.read().decode()[-2000:])
                time.sleep(0.2)
        sys.exit("the web server did not start in 30 s")

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def url(self, path: str) -> str:
        return f"ws://127.0.0.1:{self.port}{path}"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def session_cookie(user) -> str:
    """`sessionid=...` of a fresh login session for `user` (the database the web server reads)."""
    from django.test import Client

    c = Client()
    c.force_login(user)
    return f"sessionid={c.cookies['sessionid'].value}"
