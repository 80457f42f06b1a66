"""The web server `make up` runs, against clients that send too much: bodies over the limits (as
declared, or chunked, anonymous or logged in) and downloads the client stopped reading. Clients
that are slow or stop answering (idle connections, slow headers and bodies, WebSocket pings):
test_server_limits_timeouts.py.

One real server for the module (portal/server.py through the browser tests' `WebServer`: the same
command as scripts/up.sh), on the file-based test database, with short timeouts and small limits
set through its environment. The clients are raw sockets, so that what the server did is seen
from outside: when it answered, how much of a body it had been sent by then, when it closed, and
how its resident memory (/proc/<pid>/status) moved.
"""
from __future__ import annotations

import json
import select
import socket
import threading
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from jobs.models import ApiToken, Job, JobStatus, Target, Template
from tests.e2e.test_browser_live import WebServer

KIB = 1024
MIB = 1024 * KIB
#: the limits and timeouts the module's server runs with (seconds, bytes)
KEEP_ALIVE_S = 2
HEADERS_S = 2
BODY_S = 2
PING_S = 1
ANONYMOUS_MAX = 64 * KIB
LOGGED_IN_MAX = 1 * MIB
UPLOAD_MAX = 8 * MIB
SERVER_ENV = {
    "HTTP_KEEP_ALIVE_TIMEOUT": str(KEEP_ALIVE_S), "HTTP_HEADERS_TIMEOUT": str(HEADERS_S),
    "HTTP_BODY_TIMEOUT": str(BODY_S), "HTTP_BODY_MIN_RATE": "1024",
    "WS_PING_INTERVAL": str(PING_S), "WS_PING_TIMEOUT": str(PING_S),
    "REQUEST_MAX_BYTES_ANONYMOUS": str(ANONYMOUS_MAX), "REQUEST_MAX_BYTES": str(LOGGED_IN_MAX),
    "UPLOAD_REQUEST_MAX_BYTES": str(UPLOAD_MAX),
}
#: the margin a loaded 2-CPU machine gets on top of a timeout before "it did not close" is a failure
SLACK_S = 8
ZEROS = bytes(MIB)


@pytest.fixture(scope="module")
def server(django_db_setup, tmp_path_factory):
    media = tmp_path_factory.mktemp("media")
    web = WebServer(tmp_path_factory.mktemp("log") / "web-server.log", media, env=SERVER_ENV)
    web.media = media
    try:
        web.wait_ready(timeout=120)
        yield web
    finally:
        web.stop()


@pytest.fixture
def demo(local):
    return User.objects.get(username="demo")


# ---- raw HTTP, seen from the client ----

def connect(server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=30)


def request_head(server, method: str, path: str, headers: dict | None = None) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{server.port}"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def read_response(sock: socket.socket, timeout: float = 30) -> tuple[int, dict, bytes]:
    sock.setblocking(True)
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError(f"the server closed without answering (got {data[:200]!r})")
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, value in (line.split(":", 1) for line in lines[1:])}
    length = int(headers.get("content-length", 0))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(lines[0].split()[1]), headers, body[:length]


def send_until_answered(sock: socket.socket, pieces, cap: int) -> int | None:
    """Send `pieces` while the server has not answered; the bytes sent by the time its answer was
    there, or None when `cap` bytes went out (or the pieces ran out) without one."""
    sock.setblocking(False)
    sent = 0
    try:
        for piece in pieces:
            view = memoryview(piece)
            while view:
                readable, writable, _ = select.select([sock], [sock], [], 5)
                if readable:
                    return sent
                if not writable:
                    continue
                try:
                    n = sock.send(view)
                except BlockingIOError:
                    continue
                sent += n
                view = view[n:]
                if sent >= cap:
                    return None
        readable, _, _ = select.select([sock], [], [], 10)
        return sent if readable else None
    finally:
        sock.setblocking(True)


def zero_pieces(total: int):
    while total > 0:
        piece = ZEROS[:min(total, MIB)]
        total -= len(piece)
        yield piece


def seconds_until_closed(sock: socket.socket, within: float) -> tuple[float | None, bytes]:
    """Seconds until the server closed the connection (end of file or reset), None if it was still
    open after `within`; and everything it sent meanwhile. Reads, never writes."""
    sock.setblocking(True)
    sock.settimeout(0.2)
    got = b""
    t0 = time.monotonic()
    while time.monotonic() - t0 < within:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            continue
        except ConnectionError:
            return time.monotonic() - t0, got
        if not chunk:
            return time.monotonic() - t0, got
        got += chunk
    return None, got


class PeakRss(threading.Thread):
    """The server's resident memory, sampled every 20 ms while in a `with` block."""

    def __init__(self, server):
        super().__init__(daemon=True)
        self.path = Path(f"/proc/{server.proc.pid}/status")
        self.base = self.peak = self.rss_kib()
        self.halt = threading.Event()

    def rss_kib(self) -> int:
        line = next(line for line in self.path.read_text().splitlines() if line.startswith("VmRSS:"))
        return int(line.split()[1])

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.halt.set()
        self.join()

    def run(self) -> None:
        while not self.halt.is_set():
            self.peak = max(self.peak, self.rss_kib())
            time.sleep(0.02)

    @property
    def growth_mib(self) -> float:
        return (self.peak - self.base) / 1024


def post(server, path: str, size: int, headers: dict | None = None) -> int:
    """POST `size` bytes the way most HTTP libraries do (the whole body, then read); the status."""
    sock = connect(server)
    try:
        sock.sendall(request_head(server, "POST", path, {"Content-Type": "application/octet-stream",
                                                         "Content-Length": size, **(headers or {})}))
        for piece in zero_pieces(size):
            sock.sendall(piece)
        return read_response(sock)[0]
    finally:
        sock.close()


def session_cookie(user) -> str:
    c = Client()
    c.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={c.cookies[settings.SESSION_COOKIE_NAME].value}"


# ---- body size ----

def test_it_answers_413_to_an_anonymous_body_over_the_limit_before_reading_it(server, local):
    declared = 1024 * MIB
    sock = connect(server)
    try:
        sock.sendall(request_head(server, "POST", "/api/v1/jobs",
                                  {"Content-Type": "application/octet-stream", "Content-Length": declared}))
        with PeakRss(server) as rss:
            sent = send_until_answered(sock, zero_pieces(declared), cap=256 * MIB)
            assert sent is not None, "no answer after 256 MiB of body: the server is reading it"
            status, headers, body = read_response(sock)
        closed, _ = seconds_until_closed(sock, within=15)
    finally:
        sock.close()
    assert status == 413
    assert "error" in json.loads(body)  # the API's error shape
    # Answered from the Content-Length: the client still held all but what the socket buffers took.
    assert sent < 32 * MIB, f"{sent} bytes of the body were sent before the answer"
    assert rss.growth_mib < 16, f"the server grew by {rss.growth_mib:.1f} MiB"
    # ... and the server ends the connection: the rest of the body is never read into anything.
    assert headers["connection"] == "close" and closed is not None


def test_it_cuts_off_a_chunked_anonymous_body_as_it_passes_the_limit(server, local):
    sock = connect(server)
    chunk = b"10000\r\n" + bytes(64 * KIB) + b"\r\n"
    try:
        sock.sendall(request_head(server, "POST", "/login/",
                                  {"Content-Type": "application/octet-stream", "Transfer-Encoding": "chunked"}))
        sent = send_until_answered(sock, (chunk for _ in range(1024)), cap=64 * MIB)
        assert sent is not None, "no answer after 64 MiB of chunked body"
        status, _, body = read_response(sock)
    finally:
        sock.close()
    assert status == 413 and b"too large" in body
    assert ANONYMOUS_MAX < sent < 16 * MIB, f"{sent} bytes sent before the answer"


def test_a_logged_in_caller_may_send_more_than_an_anonymous_one_and_a_forged_credential_may_not(server, demo):
    _, token = ApiToken.issue(demo)
    cookie = session_cookie(demo)
    size = 256 * KIB  # over the anonymous limit, under the logged-in one
    assert post(server, "/api/v1/jobs", size) == 413
    assert post(server, "/api/v1/jobs", size, {"Cookie": f"{settings.SESSION_COOKIE_NAME}=forged"}) == 413
    assert post(server, "/api/v1/jobs", size, {"Authorization": "Token not-a-token"}) == 413
    # Logged in, the body reaches the view, which has its own say (not multipart: 400; no CSRF: 403).
    assert post(server, "/api/v1/jobs", size, {"Authorization": f"Token {token}"}) == 400
    assert post(server, "/api/v1/jobs", size, {"Cookie": cookie}) == 403
    # Logged in, but over the limit of the place: Start takes UPLOAD_MAX, other forms LOGGED_IN_MAX.
    assert post(server, "/usage/email", 2 * LOGGED_IN_MAX, {"Cookie": cookie}) == 413
    assert post(server, "/usage/email", LOGGED_IN_MAX // 2, {"Cookie": cookie}) == 403
    sock = connect(server)
    try:
        sock.sendall(request_head(server, "POST", "/api/v1/jobs", {"Authorization": f"Token {token}",
                                                                    "Content-Length": 64 * UPLOAD_MAX}))
        sent = send_until_answered(sock, zero_pieces(64 * UPLOAD_MAX), cap=32 * UPLOAD_MAX)
        assert sent is not None and sent < UPLOAD_MAX
        assert read_response(sock)[0] == 413
    finally:
        sock.close()


# ---- downloads ----

def test_a_download_waits_for_a_client_that_stopped_reading(server, demo):
    template = Template.objects.select_related("cluster").get(slug="gpu-batch")
    job = Job.objects.create(owner=demo, template=template, template_snapshot=template.snapshot().to_json(),
                             cluster=template.cluster, status=JobStatus.COMPLETED, total=1)
    output = server.media / f"{job.id}.mp4"
    with open(output, "wb") as f:
        f.truncate(256 * MIB)  # sparse: costs no disk, reads as zeros
    Target.objects.create(job=job, index=0, name="big.mp4", output_name="big.mp4", output_file=str(output))
    cookie = session_cookie(demo)
    clients = [connect(server) for _ in range(2)]
    try:
        with PeakRss(server) as rss:
            for sock in clients:
                sock.sendall(request_head(server, "GET", f"/jobs/{job.id}/outputs/0", {"Cookie": cookie}))
                assert sock.recv(64 * KIB).startswith(b"HTTP/1.1 200")
            time.sleep(3)  # the clients read nothing more
    finally:
        for sock in clients:
            sock.close()
        output.unlink()
    assert rss.growth_mib < 32, f"the server grew by {rss.growth_mib:.1f} MiB for two stalled downloads"
