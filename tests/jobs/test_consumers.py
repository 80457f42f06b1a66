"""Live status over WebSockets (jobs/live/consumers.py), through the real ASGI `application`.

Every socket goes through the whole stack: the origin validator, the session auth middleware
(a real session cookie from `Client.force_login`), the URL router, the consumer, and the real
channels_redis layer on REDIS_URL. Events are sent the way the watcher sends them: a
`jobs.live.protocol.Publisher` flushed from sync code. Here: what the owner's sockets are sent
(the snapshot, the events, a resync, a reconnect). Who may open one, from which origin, and until
when: test_consumers_access.py.
"""
from __future__ import annotations

import asyncio
import copy
import functools
import uuid

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from jobs.live import consumers
from jobs.live.consumers import CLOSE_NOT_FOUND
from jobs.live.protocol import Publisher, job_group
from jobs.models import Job, JobStatus, Target, TargetStatus, Task
from portal.asgi import application

from .api_helpers import make_job

ALLOWED_ORIGIN = "http://127.0.0.1:8000"
SNAPSHOT_KEYS = {"type", "job", "task_summary", "tasks", "targets", "view", "cluster"}
#: how long a socket may take to answer (channels' test default, 1 s, is a tight bound on a loaded
#: machine); a wait ends as soon as the answer is there, so a generous one costs nothing
ANSWER_S = 30

pytestmark = pytest.mark.django_db(transaction=True)


def run_async(test):
    """Run an async test body on its own event loop (the project has no pytest-asyncio).

    ORM calls inside go through `database_sync_to_async`, which runs them back on the test's
    thread, where the test database lives.
    """
    @functools.wraps(test)
    def wrapper(*args, **kwargs):
        return async_to_sync(test)(*args, **kwargs)
    return wrapper


@pytest.fixture(autouse=True)
def _own_layer_prefix(settings):
    # The project's layer (same backend, same Redis) under a prefix of its own, so that another
    # test run on the same Redis database can never deliver into these tests' groups.
    layers = copy.deepcopy(settings.CHANNEL_LAYERS)
    layers["default"]["CONFIG"]["prefix"] = f"test-{uuid.uuid4().hex[:12]}"
    settings.CHANNEL_LAYERS = layers
    yield
    async_to_sync(get_channel_layer().flush)()  # drop this test's keys (and pools)


@pytest.fixture
def job(owner, template):
    job = make_job(owner, template, status=JobStatus.RUNNING, name="Wedding shots", targets=3, tasks=2)
    job.slurm_job_id = "4242"
    job.save(update_fields=["slurm_job_id"])
    return job


@pytest.fixture
def stranger_job(stranger, template):
    return make_job(stranger, template, status=JobStatus.RUNNING, name="Not yours", targets=1, tasks=1)


def headers(user=None, origin: str | None = ALLOWED_ORIGIN, host: str = "127.0.0.1:8000",
            client: Client | None = None) -> list[tuple[bytes, bytes]]:
    """What a browser sends: the Host it reached, its Origin and, when logged in, the session cookie
    (of `client`'s login when given: the same browser's pages and sockets)."""
    out = [(b"host", host.encode())]
    if origin is not None:
        out.append((b"origin", origin.encode()))
    if user is not None:
        if client is None:
            client = Client()
            client.force_login(user)
        cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
        out.append((b"cookie", cookie.encode()))
    return out


class Communicator(WebsocketCommunicator):
    """channels' test socket, waiting up to ANSWER_S for each answer. (`disconnect` keeps its 1 s:
    it is how long the application gets to stop before it is cancelled, not an expectation.)"""

    async def connect(self, timeout=ANSWER_S):
        return await super().connect(timeout)

    async def receive_output(self, timeout=ANSWER_S):
        return await super().receive_output(timeout)

    async def receive_from(self, timeout=ANSWER_S):
        return await super().receive_from(timeout)

    async def receive_json_from(self, timeout=ANSWER_S):
        return await super().receive_json_from(timeout)


async def open_socket(path: str, user=None, origin: str | None = ALLOWED_ORIGIN, host: str = "127.0.0.1:8000"
                      ) -> Communicator:
    return Communicator(application, path, headers=await database_sync_to_async(headers)(user, origin, host))


async def connect(path: str, user) -> WebsocketCommunicator:
    comm = await open_socket(path, user)
    connected, _ = await comm.connect()
    assert connected
    return comm


async def refusal_code(path: str, user=None) -> int:
    """The close code a refused socket gets (refusals come after accept, so browsers see them)."""
    comm = await open_socket(path, user)
    connected, _ = await comm.connect()
    assert connected
    closed = await comm.receive_output()
    await comm.disconnect()
    assert closed["type"] == "websocket.close", closed
    return closed["code"]


def publish(*steps) -> int:
    """Flush a Publisher filled by `steps` (callables taking it), as a watcher cycle does."""
    pub = Publisher()
    for step in steps:
        step(pub)
    return pub.flush()


def db(fn):
    return database_sync_to_async(fn)


@run_async
async def test_it_sends_the_owner_a_snapshot_first(owner, job):
    comm = await connect(f"/ws/jobs/{job.id}/", owner)
    snap = await comm.receive_json_from()
    assert set(snap) == SNAPSHOT_KEYS and snap["type"] == "snapshot"
    assert snap["job"]["id"] == str(job.id)
    assert snap["job"]["name"] == "Wedding shots"
    assert snap["job"]["status"] == "running"
    assert snap["job"]["slurm_job_id"] == "4242"
    assert snap["job"]["progress"] == {"total": 3, "done": 0, "failed": 0, "needs_look": 0}
    assert snap["job"]["url"] == f"/jobs/{job.id}"
    assert [t["index"] for t in snap["tasks"]] == [0, 1]
    assert set(snap["tasks"][0]) == {"index", "status", "node", "exit_code", "reason", "elapsed_seconds"}
    assert [t["index"] for t in snap["targets"]] == [0, 1, 2]
    assert snap["targets"][0]["status"] == "waiting" and snap["targets"][0]["output_url"] is None
    assert snap["cluster"] == {"name": "Local", "unreachable_since": None, "message": ""}
    await comm.disconnect()


@run_async
async def test_it_forwards_job_task_and_output_events_of_this_job_only(owner, job, stranger_job):
    comm = await connect(f"/ws/jobs/{job.id}/", owner)
    await comm.receive_json_from()  # the snapshot

    def progress():
        Job.objects.filter(pk=job.pk).update(done=1)
        Task.objects.filter(job=job, index=0).update(state="RUNNING", node="gpu-node-1")
        Target.objects.filter(job=job, index=0).update(status=TargetStatus.DONE, faces_found=1, faces_swapped=1)
        fresh = Job.objects.get(pk=job.pk)
        return publish(
            lambda pub: pub.job(stranger_job),  # another job's group: must not reach this socket
            lambda pub: pub.job(fresh),
            lambda pub: pub.task(fresh, fresh.tasks.get(index=0)),
            lambda pub: pub.output(fresh, fresh.targets.get(index=0)),
        )

    assert await db(progress)() == 6  # each job event goes to 2 groups (job + user), then task, output

    first, second, third = [await comm.receive_json_from() for _ in range(3)]
    assert first["type"] == "job" and first["job"]["id"] == str(job.id)
    assert first["job"]["progress"] == {"total": 3, "done": 1, "failed": 0, "needs_look": 0}
    assert second == {"type": "task", "job_id": str(job.id), "task": {
        "index": 0, "status": "RUNNING", "node": "gpu-node-1", "exit_code": None, "reason": "",
        "elapsed_seconds": None}}
    assert third["type"] == "output" and third["job_id"] == str(job.id)
    assert third["target"]["index"] == 0 and third["target"]["status"] == "done"
    assert third["target"]["faces_swapped"] == 1
    assert await comm.receive_nothing()
    await comm.disconnect()


@run_async
async def test_it_forwards_an_event_without_a_trip_to_the_database_thread(owner, job, monkeypatch):
    # Channels' own dispatch closes old database connections (a hop to the one database thread)
    # before every handler: for an event fanned out to 500 sockets, most of its time.
    import channels.consumer

    hops = []

    async def counted():
        hops.append(1)
    monkeypatch.setattr(channels.consumer, "aclose_old_connections", counted)
    comm = await connect(f"/ws/jobs/{job.id}/", owner)
    await comm.receive_json_from()
    before = len(hops)
    fresh = await db(lambda: Job.objects.get(pk=job.pk))()
    await db(lambda: publish(lambda pub: pub.job(fresh)))()
    assert (await comm.receive_json_from())["type"] == "job"
    assert len(hops) == before
    await comm.disconnect()


@pytest.mark.slow
@run_async
async def test_it_keeps_an_idle_socket_open_longer_than_redis_py_read_timeout(owner, job):
    # redis-py 8 gives reads a 5 s socket timeout by default, as long as channels_redis's blocking
    # pop: without the longer one in settings.CHANNEL_LAYERS, an idle socket dies after 5 s.
    comm = await connect(f"/ws/jobs/{job.id}/", owner)
    await comm.receive_json_from()
    # A real 6 s of idleness, on purpose: what is tested is a real read timeout (5 s) not firing.
    await asyncio.sleep(6)
    assert not comm.future.done(), comm.future.done() and comm.future.exception()
    assert await db(publish)(lambda pub: pub.job(job)) == 2
    assert (await comm.receive_json_from())["type"] == "job"
    await comm.disconnect()


@run_async
async def test_it_resends_a_fresh_snapshot_on_reconnect(owner, job):
    comm = await connect(f"/ws/jobs/{job.id}/", owner)
    assert (await comm.receive_json_from())["job"]["status"] == "running"
    await comm.disconnect()

    # The consumer left the job's group (channels_redis keeps a group as a sorted set).
    layer = get_channel_layer()
    assert await layer.connection(0).zcard(layer._group_key(job_group(job.id))) == 0

    def finish_while_away():  # no event is published: only the database knows
        Job.objects.filter(pk=job.pk).update(status=JobStatus.COMPLETED, done=3)
        Task.objects.filter(job=job).update(state="COMPLETED", exit_code=0)

    await db(finish_while_away)()
    comm = await connect(f"/ws/jobs/{job.id}/", owner)
    snap = await comm.receive_json_from()
    assert snap["type"] == "snapshot"
    assert snap["job"]["status"] == "completed" and snap["job"]["progress"]["done"] == 3
    assert {t["status"] for t in snap["tasks"]} == {"COMPLETED"}
    await comm.disconnect()


@run_async
async def test_it_answers_resync_with_a_fresh_snapshot_and_ignores_anything_else(owner, job):
    comm = await connect(f"/ws/jobs/{job.id}/", owner)
    await comm.receive_json_from()

    await comm.send_to(text_data="not json")
    await comm.send_to(bytes_data=b"\x00\x01")
    await comm.send_json_to({"type": "cancel"})
    await comm.send_json_to(["resync"])
    assert await comm.receive_nothing()

    await db(lambda: Job.objects.filter(pk=job.pk).update(failed=2, error="Two images had no face."))()
    await comm.send_json_to({"type": "resync"})
    snap = await comm.receive_json_from()
    assert set(snap) == SNAPSHOT_KEYS
    assert snap["job"]["progress"]["failed"] == 2 and snap["job"]["error"] == "Two images had no face."
    await comm.disconnect()


@run_async
async def test_a_socket_asking_for_snapshots_in_a_burst_gets_one_now_and_one_current_at_the_windows_end(
        owner, job, monkeypatch):
    monkeypatch.setattr(consumers, "RESYNC_EVERY_S", 3.0)  # seconds of slack for the change below, even loaded
    comm = await connect(f"/ws/jobs/{job.id}/", owner)
    await comm.receive_json_from()
    for _ in range(5):  # a tab asking over and over
        await comm.send_json_to({"type": "resync"})
    assert (await comm.receive_json_from())["type"] == "snapshot"
    assert await comm.receive_nothing(timeout=0.2)  # the other four wait for the window's end
    await db(lambda: Job.objects.filter(pk=job.pk).update(failed=2))()
    late = await comm.receive_json_from(timeout=5)  # one answer for all four, read after the change
    assert late["type"] == "snapshot" and late["job"]["progress"]["failed"] == 2
    assert await comm.receive_nothing(timeout=0.5)
    await comm.disconnect()


@run_async
async def test_it_closes_on_resync_once_the_job_is_gone(owner, job):
    comm = await connect(f"/ws/jobs/{job.id}/", owner)
    await comm.receive_json_from()
    await db(lambda: Job.objects.filter(pk=job.pk).delete())()
    await comm.send_json_to({"type": "resync"})
    closed = await comm.receive_output()
    assert closed == {"type": "websocket.close", "code": CLOSE_NOT_FOUND}
    await comm.disconnect()


@run_async
async def test_it_feeds_the_list_with_the_users_own_jobs_only(owner, job, stranger_job):
    comm = await connect("/ws/jobs/", owner)
    snap = await comm.receive_json_from()
    assert snap["type"] == "snapshot"
    assert [j["id"] for j in snap["jobs"]] == [str(job.id)]

    def two_jobs_change():
        return publish(lambda pub: pub.job(stranger_job),
                       lambda pub: pub.task(job, job.tasks.get(index=0)),  # job page only, not the list
                       lambda pub: pub.job(Job.objects.get(pk=job.pk)))

    assert await db(two_jobs_change)() == 5  # 2 job events x 2 groups, 1 task
    # Deliveries to one socket keep their order: the stranger's event, sent first, would be first.
    event = await comm.receive_json_from()
    assert event["type"] == "job" and event["job"]["id"] == str(job.id)
    assert await comm.receive_nothing()

    await comm.send_json_to({"type": "resync"})
    assert (await comm.receive_json_from())["type"] == "snapshot"
    await comm.disconnect()
