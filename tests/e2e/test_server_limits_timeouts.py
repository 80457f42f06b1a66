"""The web server `make up` runs, against clients that are slow or go quiet: an idle connection
closed after the keep-alive timeout, headers or a body sent too slowly cut off with 408, headers
over the size limit refused with 431, a WebSocket whose peer stops answering pings closed.

The same server, short timeouts and raw-socket clients as test_server_limits.py (bodies too big,
stalled downloads), with a server of this module's own."""
from __future__ import annotations

import base64
import json
import os
import select
import struct
import time

from tests.e2e.test_server_limits import (  # noqa: F401 - fixtures (server, demo) and helpers
    BODY_S,
    HEADERS_S,
    KEEP_ALIVE_S,
    PING_S,
    SLACK_S,
    connect,
    demo,
    read_response,
    request_head,
    seconds_until_closed,
    server,
    session_cookie,
)

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
