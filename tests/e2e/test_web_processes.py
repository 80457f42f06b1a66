"""The web server with more than one process, as `make up` starts it (portal/server.py --processes).

The real server (the browser tests' `WebServer`, on the file-based test database), with two
processes behind one port. Seen from outside: every process accepts WebSockets (which sockets a
process holds is read from /proc), an event published once reaches the pages on every process
(channels_redis carries it to each), a process that dies is replaced, and stopping the server
stops all of them. Also the WebSocket message-size guard (portal.server.WS_MAX_MESSAGE_BYTES).
"""
from __future__ import annotations

import functools
import json
import os
import signal
import time
from contextlib import ExitStack
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as ws_connect

from jobs.live.protocol import publish_job
from jobs.models import Job, JobStatus, Template
from portal.server import WS_MAX_MESSAGE_BYTES, command
from tests.e2e import test_browser_live
from tests.e2e.test_browser_live import WebServer
from tests.e2e.test_server_limits import session_cookie

PROCESSES = 2
#: sockets held open at once: the kernel gives each to whichever process accepts first, so enough
#: that every process gets some (a process left out of 40 would be a real imbalance, not chance)
SOCKETS = 40
#: seconds given to things that happen on their own (a worker restarting, a server stopping) on a
#: loaded 2-core machine; a wait that ends early is not a failure, only one that never ends
WAIT_S = 120


def start(tmp_path_factory) -> WebServer:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(test_browser_live, "server_command", functools.partial(command, processes=PROCESSES))
        web = WebServer(tmp_path_factory.mktemp("log") / "web-server.log", tmp_path_factory.mktemp("media"))
    web.wait_ready(timeout=WAIT_S)
    return web


@pytest.fixture(scope="module")
def server(django_db_setup, tmp_path_factory):
    web = start(tmp_path_factory)
    try:
        yield web
    finally:
        web.stop()


@pytest.fixture
def job(local):
    demo = User.objects.get(username="demo")
    template = Template.objects.select_related("cluster").get(slug="gpu-batch")
    return Job.objects.create(owner=demo, template=template, template_snapshot=template.snapshot().to_json(),
                              cluster=template.cluster, status=JobStatus.RUNNING, total=1)


def workers(parent: int) -> list[int]:
    """The serving processes of the server `parent`: its children started by multiprocessing (not
    its resource tracker)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == parent \
                    and b"spawn_main" in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:  # ended meanwhile
            continue
    return sorted(found)


def all_serving(server: WebServer, not_among: tuple[int, ...] = ()) -> list[int] | None:
    """The PROCESSES serving processes once they are all there (none of `not_among`), else None."""
    found = workers(server.proc.pid)
    return found if len(found) == PROCESSES and not set(found) & set(not_among) else None


def client_sockets(port: int, pid: int) -> int:
    """Established connections to `port` that process `pid` accepted (matched by socket inode)."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].split(":")[1], 16) == port and fields[3] == "01":  # local port; ESTABLISHED
            inodes.add(fields[9])
    held = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            held += os.readlink(fd).removeprefix("socket:[").removesuffix("]") in inodes
        except OSError:
            continue
    return held


def open_pages(pages: ExitStack, server: WebServer, job: Job, n: int) -> list:
    """`n` job pages' sockets (closed with `pages`), each past its snapshot."""
    cookie = session_cookie(job.owner)
    opened = []
    for _ in range(n):
        ws = pages.enter_context(ws_connect(f"ws://127.0.0.1:{server.port}/ws/jobs/{job.id}/", origin=server.url,
                                            additional_headers={"Cookie": cookie}, open_timeout=60))
        assert json.loads(ws.recv(timeout=60))["type"] == "snapshot"
        opened.append(ws)
    return opened


def wait_until(condition, what: str):
    deadline = time.monotonic() + WAIT_S
    while not (result := condition()):
        assert time.monotonic() < deadline, f"{what}: not within {WAIT_S}s"
        time.sleep(0.2)
    return result


def test_every_process_serves_websockets_and_an_event_reaches_the_pages_on_all_of_them(server, job):
    pids = wait_until(lambda: all_serving(server), f"{PROCESSES} serving processes")
    with ExitStack() as stack:
        pages = open_pages(stack, server, job, SOCKETS)
        held = {pid: client_sockets(server.port, pid) for pid in pids}
        assert sum(held.values()) == SOCKETS and all(held.values()), held
        job.name = "seen-everywhere"
        job.save(update_fields=["name"])
        publish_job(job)
        for ws in pages:
            msg = json.loads(ws.recv(timeout=60))
            assert msg["type"] == "job" and msg["job"]["name"] == "seen-everywhere", msg


def test_a_message_over_the_size_limit_closes_the_socket_with_1009(server, job):
    with ExitStack() as stack:
        ws, = open_pages(stack, server, job, 1)
        ws.send(json.dumps({"type": "resync"}))  # a page's own message: answered
        assert json.loads(ws.recv(timeout=60))["type"] == "snapshot"
        ws.send("x" * (WS_MAX_MESSAGE_BYTES + 1))
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=60)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009, closed.value


def test_a_process_that_dies_is_replaced_and_stopping_the_server_stops_every_process(tmp_path_factory, job):
    web = start(tmp_path_factory)
    try:
        before = wait_until(lambda: all_serving(web), f"{PROCESSES} serving processes")
        os.kill(before[0], signal.SIGKILL)
        after = wait_until(lambda: all_serving(web, not_among=(before[0],)), "a replacement for the killed process")
        with ExitStack() as stack:
            open_pages(stack, web, job, 4)  # served again, whichever process takes them
        web.proc.terminate()
        web.proc.wait(timeout=WAIT_S)
        wait_until(lambda: not any(Path(f"/proc/{pid}").exists() for pid in after), "every process stopped")
    finally:
        web.stop()
