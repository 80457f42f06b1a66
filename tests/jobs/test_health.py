"""/healthz and /readyz (jobs/ops): what nginx and a monitor see, and that no answer gives away a
secret (cluster host, SSH key, Redis or database password). /readyz's details are the monitor's
(the metrics token); anyone else learns only ready or not.

The watcher's heartbeat goes to the real Redis (REDIS_URL, db 15) under a key of each test's own.
Cluster reachability comes from what the real `watch_cluster` command records on the profile;
only its SSH seam (`cluster.runner_for`) is replaced, as in test_watcher.py.
"""
from __future__ import annotations

import datetime
import time
import uuid

import pytest
import redis
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from jobs.models import ClusterProfile, Job, JobStatus
from jobs.ops import heartbeat

from .api_helpers import make_job

#: what must never appear in an answer: the profile's host, port, user and key, Redis' password
SECRET_BITS = ("127.0.0.1", "2222", "ffportal", "not-a-real-key", "connection refused", "sekret")
TOKEN = "monitor-token-" + "x" * 24


@pytest.fixture
def monitor(settings):
    """A client with the metrics token: what reads /readyz's details (no network is trusted here)."""
    from django.test import Client

    settings.METRICS_TOKEN, settings.METRICS_ALLOWED_NETWORKS = TOKEN, []
    return Client(HTTP_AUTHORIZATION=f"Bearer {TOKEN}")


@pytest.fixture(autouse=True)
def own_heartbeat_key(monkeypatch):
    """A heartbeat key of this test's own: a watcher run by another test on the same Redis never
    makes this one's watcher look alive."""
    key = f"test:watcher:{uuid.uuid4().hex}"
    real = heartbeat._redis()  # a test may replace it with a Redis that is down
    monkeypatch.setattr(heartbeat, "KEY", key)
    yield key
    real.delete(key)


@pytest.fixture
def watcher_runs(monkeypatch):
    """One real cycle of `manage.py watch_cluster --once` (its start-up check is for production)."""
    monkeypatch.setattr("jobs.management.commands.watch_cluster.refuse_insecure_start", lambda: None)
    return lambda: call_command("watch_cluster", "--once")


def assert_no_secret(body: str) -> None:
    for bit in SECRET_BITS:
        assert bit not in body, f"{bit!r} leaked in {body}"


def test_it_answers_healthz_without_touching_the_database(client):
    # No `db` fixture: any query here would raise pytest-django's "Database access not allowed".
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.content == b"ok\n"


def test_it_is_ready_after_a_watcher_cycle(monitor, profile, watcher_runs):
    watcher_runs()  # no active job: the cycle makes no SSH exec, but it ran
    response = monitor.get("/readyz")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["ready"] is True
    assert body["database"] == "ok" and body["redis"] == "ok"
    assert body["clusters"] == {"local": "ok"}
    assert body["watcher"]["status"] == "ok"
    assert 0 <= body["watcher"]["last_cycle_age_seconds"] < 120


def test_it_is_not_ready_when_the_watcher_never_ran(monitor, profile):
    response = monitor.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["ready"] is False
    assert body["watcher"]["status"] == "not running: no cycle recorded for local"
    assert body["watcher"]["last_cycle_age_seconds"] is None


def test_it_is_not_ready_when_the_watcher_stalled(monitor, profile, own_heartbeat_key, settings):
    settings.READY_WATCHER_MAX_AGE = 60
    heartbeat.record_cycle(["local"], now=time.time() - 600)
    response = monitor.get("/readyz")
    assert response.status_code == 503
    watcher = response.json()["watcher"]
    assert watcher["status"].startswith("stalled: its last cycle was ")
    assert watcher["last_cycle_age_seconds"] >= 600


def test_a_watcher_for_one_profile_leaves_the_other_profile_unwatched(monitor, profile, watcher_runs):
    ClusterProfile.objects.create(name="Second", slug="second", host="10.0.0.9", username="x",
                                  private_key="k", known_hosts="h", work_root="/w")
    watcher_runs()  # follows both active profiles: both recorded
    assert monitor.get("/readyz").status_code == 200
    heartbeat._redis().hdel(heartbeat.KEY, "second")  # as if only `--profile local` ran
    body = monitor.get("/readyz").json()
    assert body["watcher"]["status"] == "not running: no cycle recorded for second"


def test_it_says_in_words_since_when_a_cluster_is_unreachable_and_names_no_host(
        monitor, owner, template, fake_ssh, watcher_runs):
    job = make_job(owner, template, status=JobStatus.RUNNING, targets=1, tasks=1)
    Job.objects.filter(pk=job.pk).update(slurm_job_id="77")  # followed by the watcher
    fake_ssh.unreachable("cannot reach the cluster at 127.0.0.1:2222 as ffportal: connection refused")
    watcher_runs()
    profile = ClusterProfile.objects.get(slug="local")
    assert profile.unreachable_since is not None  # what the watcher recorded, the page shows too
    response = monitor.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["clusters"]["local"] == "unreachable since " + profile.unreachable_since.astimezone(
        datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    assert body["watcher"]["status"] == "ok"  # the loop itself is alive
    assert_no_secret(response.content.decode())


def test_an_inactive_profile_is_not_asked_about(monitor, profile, watcher_runs):
    ClusterProfile.objects.filter(pk=profile.pk).update(is_active=False, unreachable_since=timezone.now())
    response = monitor.get("/readyz")
    assert response.status_code == 200
    assert response.json()["clusters"] == {}


def test_redis_down_is_reported_without_its_password(monitor, profile, monkeypatch):
    down = redis.Redis.from_url("redis://:sekret-pass@127.0.0.1:1/0", socket_connect_timeout=2)
    monkeypatch.setattr(heartbeat, "_redis", lambda: down)
    response = monitor.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["redis"] == "cannot be reached"
    assert body["watcher"]["status"] == "unknown: Redis cannot be read"
    assert body["database"] == "ok"
    assert_no_secret(response.content.decode())


def test_database_down_is_reported_without_its_address(monitor, profile, monkeypatch):
    from django.db import OperationalError

    def refused(*args, **kwargs):
        raise OperationalError('connection to server at "db.internal" (10.1.2.3), port 5432 failed: '
                               'password authentication failed for user "portal" sekret')

    with monkeypatch.context() as patched:  # undone before the test database is torn down
        patched.setattr(connection, "cursor", refused)
        response = monitor.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["database"] == "cannot be reached"
    assert body["watcher"]["status"] == "unknown: the database cannot be read"
    text = response.content.decode()
    assert "db.internal" not in text and "10.1.2.3" not in text
    assert_no_secret(text)


def test_readyz_in_chinese(monitor, profile):
    response = monitor.get("/readyz", HTTP_ACCEPT_LANGUAGE="zh-CN")
    assert response.status_code == 503
    status = response.json()["watcher"]["status"]
    assert "local" in status and "not running" not in status


def test_anyone_else_learns_only_ready_or_not(client, monitor, profile, watcher_runs):
    """The cluster profiles' names and the watcher's age are the monitor's: without the token (or with
    a wrong one, or from an address the metrics do not trust) one word and the status code."""
    response = client.get("/readyz")
    assert (response.status_code, response.content) == (503, b"unready\n")
    assert response["Content-Type"].startswith("text/plain")
    watcher_runs()
    for headers in ({}, {"HTTP_AUTHORIZATION": "Bearer wrong"}, {"HTTP_ACCEPT_LANGUAGE": "zh-hans"}):
        response = client.get("/readyz", **headers)
        assert (response.status_code, response.content) == (200, b"ready\n")
    detailed = monitor.get("/readyz")
    assert detailed.status_code == 200 and detailed.json()["clusters"] == {"local": "ok"}


def test_the_networks_that_read_the_metrics_get_the_details(client, settings, profile):
    settings.METRICS_TOKEN, settings.METRICS_ALLOWED_NETWORKS = "", ["127.0.0.0/8"]
    assert client.get("/readyz").json()["watcher"]["status"] == "not running: no cycle recorded for local"
    proxied = client.get("/readyz", HTTP_X_FORWARDED_FOR="203.0.113.9")  # nginx's address is no credential
    assert proxied.content == b"unready\n"
