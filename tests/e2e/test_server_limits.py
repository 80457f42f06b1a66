"""The web server `make up` runs, against clients that send too much, too slowly, or stop answering.

One real server for the module (portal/server.py through the browser tests' `WebServer`: the same
command as scripts/up.sh), on the file-based test database, with short timeouts and small limits
set through its environment. The clients are raw sockets, so that what the server did is seen
from outside: when it answered, how much of a body it had been sent by then, when it closed, and
how its resident memory (/proc/<pid>/status) moved.
"""
from __future__ import annotations

import base64
import json
import os
import select
import socket
import struct
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


# ---- slow and idle connections ----

def test_an_idle_connection_is_closed_after_the_keep_alive_timeout(server, local):
    sock = connect(server)
    silent = connect(server)  # connects and never sends a byte
    try:
        sock.sendall(request_head(server, "GET", "/login/"))
        status, headers, _ = read_response(sock)
        assert status == 200 and headers.get("connection") != "close"
        after_answer, _ = seconds_until_closed(sock, within=KEEP_ALIVE_S + SLACK_S)
        after_connect, _ = seconds_until_closed(silent, within=KEEP_ALIVE_S + SLACK_S)
    finally:
        sock.close()
        silent.close()
    assert after_answer is not None and after_answer >= KEEP_ALIVE_S - 0.5, after_answer
    assert after_connect is not None, "a connection that never sent a request stayed open"


def test_headers_sent_too_slowly_are_cut_off_with_408(server, local):
    sock = connect(server)
    answer = b""
    try:
        sock.sendall(b"GET /login/ HTTP/1.1\r\n")
        t0 = time.monotonic()
        while time.monotonic() - t0 < HEADERS_S + SLACK_S:
            # one more header line every 0.3 s: never a pause as long as the keep-alive timeout
            if select.select([sock], [], [], 0.3)[0]:
                answer = sock.recv(65536)
                break
            sock.sendall(b"X-Slow: a\r\n")
        elapsed = time.monotonic() - t0
    except ConnectionError:
        elapsed = time.monotonic() - t0
    finally:
        sock.close()
    assert answer.startswith(b"HTTP/1.1 408"), (answer[:100], elapsed)
    assert HEADERS_S - 0.5 <= elapsed <= HEADERS_S + SLACK_S


def test_headers_over_the_size_limit_are_refused_with_431(server, local):
    sock = connect(server)
    try:
        sock.sendall(request_head(server, "GET", "/login/", {f"X-Big-{i}": "a" * 1000 for i in range(100)}))
        status, _, _ = read_response(sock)
    finally:
        sock.close()
    assert status == 431


def test_a_body_that_stalls_or_trickles_is_cut_off_with_408(server, local):
    stalled = connect(server)
    trickling = None
    try:
        stalled.sendall(request_head(server, "POST", "/login/", {"Content-Length": 1000}) + b"x" * 10)
        t0 = time.monotonic()
        status, _, body = read_response(stalled, timeout=BODY_S + SLACK_S)
        stalled_s = time.monotonic() - t0
        assert status == 408 and b"too slowly" in body
        assert stalled_s >= BODY_S - 0.5

        # 100 bytes every 0.5 s: never a pause of BODY_S, but 200 bytes/s, under HTTP_BODY_MIN_RATE
        trickling = connect(server)
        trickling.sendall(request_head(server, "POST", "/login/", {"Content-Length": 60_000}))
        t0 = time.monotonic()
        while time.monotonic() - t0 < 30 and not select.select([trickling], [], [], 0.5)[0]:
            trickling.sendall(b"y" * 100)
        status, _, _ = read_response(trickling, timeout=5)
        assert status == 408
        assert time.monotonic() - t0 < 30 * 0.5, "cut off only by the pause rule, not by the rate"
    finally:
        stalled.close()
        if trickling is not None:
            trickling.close()


# ---- WebSockets ----

def ws_frames(data: bytes) -> list[tuple[int, bytes]]:
    """(opcode, payload) of the unmasked frames a server sent (as far as they are complete)."""
    frames = []
    while len(data) >= 2:
        opcode, length, at = data[0] & 0x0F, data[1] & 0x7F, 2
        if length == 126:
            length, at = struct.unpack(">H", data[2:4])[0], 4
        elif length == 127:
            length, at = struct.unpack(">Q", data[2:10])[0], 10
        if len(data) < at + length:
            break
        frames.append((opcode, data[at:at + length]))
        data = data[at + length:]
    return frames


def test_a_websocket_whose_peer_stops_answering_pings_is_closed(server, demo):
    from websockets.sync.client import connect as ws_connect

    cookie = session_cookie(demo)
    origin = f"http://127.0.0.1:{server.port}"
    # A well-behaved client on the same server (its library answers pings): it must stay.
    with ws_connect(f"ws://127.0.0.1:{server.port}/ws/jobs/", origin=origin,
                    additional_headers={"Cookie": cookie}) as alive:
        assert json.loads(alive.recv(timeout=30))["type"] == "snapshot"
        raw = connect(server)
        try:
            key = base64.b64encode(os.urandom(16)).decode()
            raw.sendall(request_head(server, "GET", "/ws/jobs/", {
                "Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Key": key,
                "Sec-WebSocket-Version": "13", "Origin": origin, "Cookie": cookie}))
            handshake = b""
            while b"\r\n\r\n" not in handshake:
                handshake += raw.recv(4096)
            assert handshake.startswith(b"HTTP/1.1 101"), handshake[:200]
            # From here the raw peer reads what comes, and never answers a ping.
            closed, rest = seconds_until_closed(raw, within=2 * PING_S + SLACK_S)
        finally:
            raw.close()
        frames = ws_frames(handshake.split(b"\r\n\r\n", 1)[1] + rest)
        opcodes = [op for op, _ in frames]
        assert closed is not None, f"still open after {2 * PING_S + SLACK_S}s; frames: {opcodes}"
        assert 0x9 in opcodes  # it was pinged
        close = next(payload for op, payload in frames if op == 0x8)
        assert struct.unpack(">H", close[:2])[0] == 1011  # "keepalive ping timeout"

        alive.send(json.dumps({"type": "resync"}))
        assert json.loads(alive.recv(timeout=30))["type"] == "snapshot"
