"""`jobs.live.protocol.Publisher.flush()` as the watcher calls it: from plain sync code, every cycle, forever.

Each flush runs `async_to_sync`, i.e. a fresh event loop; channels_redis keeps one connection pool
per loop. These tests prove the pools die with their loops (no Redis connection, thread or file
descriptor piles up over many cycles) and that an unreachable Redis costs a warning, not the watcher.
"""
from __future__ import annotations

import asyncio
import copy
import gc
import json
import logging
import os
import socket
import threading
import time
import uuid
from types import SimpleNamespace

import pytest
import redis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

from jobs.live.protocol import Publisher, group_messages, user_group
from tests.waiting import wait_until

from .api_helpers import make_job

pytestmark = pytest.mark.django_db

CYCLES = 50


def _hosts_named(hosts, client_name: str) -> list[dict]:
    """The project's layer hosts, each connection tagged with CLIENT SETNAME (visible in CLIENT LIST)."""
    return [dict(h, client_name=client_name) if isinstance(h, dict) else {"address": h, "client_name": client_name}
            for h in hosts]


@pytest.fixture
def layer_name(settings):
    """The project's channel layer, with its connections named and its keys under a prefix of their own.

    Counting only the connections with this name keeps the count exact while other processes
    (another test run, `make up`) use the same Redis.
    """
    name = f"ffp-live-test-{uuid.uuid4().hex[:12]}"
    layers = copy.deepcopy(settings.CHANNEL_LAYERS)
    layers["default"]["CONFIG"]["hosts"] = _hosts_named(layers["default"]["CONFIG"]["hosts"], name)
    layers["default"]["CONFIG"]["prefix"] = name
    settings.CHANNEL_LAYERS = layers
    yield name
    async_to_sync(get_channel_layer().flush)()


@pytest.fixture
def redis_client():
    client = redis.Redis.from_url(settings.REDIS_URL)
    yield client
    client.close()


@pytest.fixture
def job(owner, template):
    return make_job(owner, template, status="running", targets=2, tasks=1)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_it_sends_every_cycle_without_piling_up_connections_threads_or_loops(job, layer_name, redis_client):
    def layer_connections() -> int:
        return sum(1 for c in redis_client.client_list() if c.get("name") == layer_name)

    layer = get_channel_layer()
    listener = async_to_sync(layer.new_channel)()
    # The owner's list feed gets one `job` event a cycle (well under the channel's capacity of 100).
    async_to_sync(layer.group_add)(user_group(job.owner_id), listener)

    async def connections_while_sending() -> int:
        await layer.group_send("probe", {"type": "live.event", "message": {}})
        return layer_connections()

    # The count can see the layer's connections: one is open while a loop sends...
    assert async_to_sync(connections_while_sending)() == 1
    # ...and none is left once that loop is gone.
    assert layer_connections() == 0

    threads, fds = threading.active_count(), open_fds()
    for cycle in range(CYCLES):
        job.name = f"cycle {cycle}"
        pub = Publisher()
        pub.job(job)
        pub.task(job, job.tasks.get(index=0))
        assert pub.flush() == 3  # job -> job.<id> + user.<id>, task -> job.<id>
        assert layer_connections() == 0, f"cycle {cycle} left a Redis connection open"
    assert threading.active_count() <= threads + 1
    assert open_fds() <= fds + 3  # an event loop leaked per cycle would show as 2-3 fds each

    async def receive_all() -> list[dict]:
        return [await asyncio.wait_for(layer.receive(listener), 30) for _ in range(CYCLES)]

    received = async_to_sync(receive_all)()
    assert {e["type"] for e in received} == {"live.event"}
    # every cycle delivered, in order (a cycle's events to one group travel as one message)
    assert [[ev["message"]["job"]["name"] for ev in e["events"]] for e in received] == [
        [f"cycle {n}"] for n in range(CYCLES)]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def unreachable_redis(settings):
    """The project's layer (its connection options kept) pointed at a port nothing listens on."""
    layers = copy.deepcopy(settings.CHANNEL_LAYERS)
    address = f"redis://127.0.0.1:{_closed_port()}/15"
    layers["default"]["CONFIG"]["hosts"] = [dict(h, address=address) if isinstance(h, dict) else address
                                            for h in layers["default"]["CONFIG"]["hosts"]]
    settings.CHANNEL_LAYERS = layers


def test_it_logs_and_carries_on_when_redis_is_unreachable(unreachable_redis, job, caplog):
    for _ in range(3):  # every watcher cycle while Redis is down
        pub = Publisher()
        pub.job(job)
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="jobs.live.protocol"):
            assert pub.flush() == 0
        assert time.monotonic() - started < 5  # connection refused fails fast: the cycle goes on
        assert pub.messages == []  # dropped: the next snapshot repairs the pages
    warnings = [r.getMessage() for r in caplog.records if r.name == "jobs.live.protocol" and r.levelno == logging.WARNING]
    assert len(warnings) == 3
    assert "live events not sent" in warnings[0] and "resync from the database" in warnings[0]


def test_it_leaves_no_thread_behind_when_redis_is_unreachable(unreachable_redis, job, monkeypatch):
    # A failed async_to_sync leaves its one-thread executor in a reference cycle (the exception's
    # traceback holds the frame that holds the executor): the thread idles until the cyclic GC
    # frees it. Churn, not a leak: no thread outlives a collection. (The logger is replaced because
    # pytest's log capture keeps each record, and with it the exception and the thread.)
    said = []
    monkeypatch.setattr("jobs.live.protocol.log", SimpleNamespace(warning=lambda msg, *args: said.append(msg % args)))
    threads = threading.active_count()
    for _ in range(10):
        pub = Publisher()
        pub.job(job)
        assert pub.flush() == 0
    assert len(said) == 10
    gc.collect()
    # the threads of a collected executor exit on their own schedule
    wait_until(lambda: threading.active_count() <= threads + 1)


def test_it_sends_nothing_when_nothing_changed(layer_name, redis_client):
    assert Publisher().flush() == 0
    assert not any(c.get("name") == layer_name for c in redis_client.client_list())


def test_many_pages_each_get_their_events_in_order(layer_name, redis_client):
    """A cycle's events for many pages: every group gets all of its own, in the order they were
    made, in ONE channel-layer message (a send costs Redis round trips per group, not per event),
    and no connection outlives the flush."""
    layer = get_channel_layer()
    listeners = {}
    for _ in range(12):
        group = f"job.{uuid.uuid4()}"
        listeners[group] = async_to_sync(layer.new_channel)()
        async_to_sync(layer.group_add)(group, listeners[group])
    pub = Publisher()
    for n in range(5):
        for group in listeners:
            pub.messages.append((group, {"type": "task", "job_id": group, "task": {"index": n, "status": "RUNNING"}}))
    assert pub.flush() == 60

    async def indexes(channel) -> list[int]:
        message = await asyncio.wait_for(layer.receive(channel), 30)
        return [event["message"]["task"]["index"] for event in message["events"]]

    for group, channel in listeners.items():
        assert async_to_sync(indexes)(channel) == [0, 1, 2, 3, 4], group
    assert not any(c.get("name") == layer_name for c in redis_client.client_list())


def test_a_big_cycle_for_one_page_goes_in_a_few_messages_each_event_encoded_once():
    """500 photos of one job finished in one cycle: five messages of EVENTS_PER_MESSAGE events, in
    order; a `job` event for the page and the owner's list is encoded once for both."""
    job_event = {"type": "job", "job": {"id": "j1", "name": "shoot"}}
    messages = [("job.j1", {"type": "output", "job_id": "j1", "target": {"index": n}}) for n in range(500)]
    messages += [("job.j1", job_event), ("user.7", job_event)]
    sent = group_messages(messages)
    assert [(group, len(m["events"])) for group, m in sent] == [("job.j1", 100)] * 5 + [("job.j1", 1), ("user.7", 1)]
    events = [e for group, m in sent if group == "job.j1" for e in m["events"]]
    assert [e["message"]["target"]["index"] for e in events[:500]] == list(range(500))
    assert json.loads(events[0]["text"]) == messages[0][1]
    assert sent[-1][1]["events"][0] is sent[-2][1]["events"][0]  # the same encoded event, not encoded twice
