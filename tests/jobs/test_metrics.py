"""/metrics (jobs/ops): who may read it, and that its figures follow what really happened.

Figures are read back the way Prometheus reads them: the answer parsed by prometheus_client's own
text parser. Real database rows, the real Redis (db 15, queues and keys of each test's own), the
real `watch_cluster` command and submission code; only the SSH seam is replaced (test_watcher.py).
The multi-process test spawns real Python processes that record into one directory.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from datetime import date, datetime, timedelta
from datetime import timezone as dt_timezone

import pytest
from channels.db import database_sync_to_async as in_db_thread
from django.core.management import call_command
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from jobs.models import Booking, BookingState, Job, JobStatus, Target, TargetStatus, UsageRecord
from jobs.ops import heartbeat
from jobs.usage.accounting import month_of

from .api_helpers import make_job
from .test_consumers import _own_layer_prefix, connect, run_async  # noqa: F401 - fixtures and helpers
from .test_quotas_submit import cluster as fake_cluster  # noqa: F401 - fixture
from .test_quotas_submit import folder_job  # noqa: F401 - fixture

TOKEN = "metrics-token-" + "x" * 32


@pytest.fixture(autouse=True)
def metrics_settings(settings, monkeypatch):
    settings.METRICS_TOKEN = TOKEN
    settings.METRICS_ALLOWED_NETWORKS = []
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)  # this process: one-process mode
    key = f"test:watcher:{uuid.uuid4().hex}"
    real = heartbeat._redis()
    monkeypatch.setattr(heartbeat, "KEY", key)
    monkeypatch.setattr("jobs.management.commands.watch_cluster.refuse_insecure_start", lambda: None)
    yield settings
    real.delete(key)


def scrape(client, **headers) -> dict[tuple, float]:
    """`{(sample name, (label pairs...)): value}` as Prometheus would read it."""
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    figures = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            figures[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return figures


def value(figures: dict, name: str, **labels) -> float:
    return figures.get((name, tuple(sorted(labels.items()))), 0.0)


# ---- who may read it -----------------------------------------------------------------------------

def test_it_asks_for_a_token_without_one(client, db):
    response = client.get("/metrics", REMOTE_ADDR="203.0.113.7")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert b"ffportal_" not in response.content


def test_it_refuses_a_wrong_token(client, db):
    for header in ("Bearer wrong-token", f"Basic {TOKEN}", f"Bearer {TOKEN}x"):
        response = client.get("/metrics", HTTP_AUTHORIZATION=header)
        assert response.status_code == 403, header
        assert b"ffportal_" not in response.content


def test_it_is_off_when_neither_a_token_nor_networks_are_set(client, db, settings):
    settings.METRICS_TOKEN = ""
    response = client.get("/metrics")
    assert response.status_code == 403
    assert b"Metrics are turned off" in response.content
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 403


def test_it_answers_an_allowed_network_without_a_token(client, db, settings):
    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_NETWORKS = ["10.20.0.0/16", "127.0.0.1/32"]
    assert client.get("/metrics", REMOTE_ADDR="10.20.3.4").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="10.21.3.4").status_code == 403  # off for the rest: no token
    settings.METRICS_TOKEN = TOKEN
    assert client.get("/metrics", REMOTE_ADDR="10.21.3.4").status_code == 401


def test_a_request_through_the_proxy_needs_the_token_even_from_an_allowed_address(client, db, settings):
    settings.METRICS_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    # nginx connects from 127.0.0.1 whoever the client is; it says so in these headers
    for header in ("HTTP_X_FORWARDED_FOR", "HTTP_X_REAL_IP", "HTTP_FORWARDED"):
        assert client.get("/metrics", REMOTE_ADDR="127.0.0.1", **{header: "198.51.100.9"}).status_code == 401
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 200


# ---- figures from the database -------------------------------------------------------------------

def test_a_new_job_and_its_targets_are_counted_by_state(client, owner, template):
    before = scrape(client)
    make_job(owner, template, status=JobStatus.QUEUED, targets=3)
    make_job(owner, template, status=JobStatus.COMPLETED, targets=2)  # ended: its targets are not "in work"
    after = scrape(client)
    assert value(after, "ffportal_jobs", state="queued") == value(before, "ffportal_jobs", state="queued") + 1
    assert value(after, "ffportal_jobs", state="completed") == 1
    assert value(after, "ffportal_jobs", state="running") == 0
    assert value(after, "ffportal_targets", state="waiting") == 3
    assert value(after, "ffportal_scrape_error", collector="database") == 0


def test_gpu_hours_and_bookings_are_read_from_their_rows(client, owner, template):
    job = make_job(owner, template, status=JobStatus.COMPLETED, targets=1)
    UsageRecord.objects.create(job=job, user=owner, period=month_of(), gpu_seconds=5400)
    Booking.objects.create(user=owner, task_name="grading", duration_minutes=60, state=BookingState.CONFIRMED)
    Booking.objects.create(user=owner, task_name="render", duration_minutes=30)
    figures = scrape(client)
    assert value(figures, "ffportal_gpu_hours_charged", period="all") == 1.5
    assert value(figures, "ffportal_gpu_hours_charged", period="this_month") == 1.5
    assert value(figures, "ffportal_bookings", state="confirmed") == 1
    assert value(figures, "ffportal_bookings", state="requested") == 1
    assert value(figures, "ffportal_bookings", state="cancelled") == 0


def test_this_months_gpu_hours_are_the_sites_month(client, owner, template, settings, monkeypatch):
    # 1 January, 00:30 in Shanghai, still 31 December in UTC: the month the quotas count is January
    settings.TIME_ZONE = "Asia/Shanghai"
    monkeypatch.setattr(timezone, "now", lambda: datetime(2026, 12, 31, 16, 30, tzinfo=dt_timezone.utc))
    december = make_job(owner, template, status=JobStatus.COMPLETED, targets=1)
    UsageRecord.objects.create(job=december, user=owner, period=date(2026, 12, 1), gpu_seconds=3600)
    january = make_job(owner, template, status=JobStatus.COMPLETED, targets=1)
    UsageRecord.objects.create(job=january, user=owner, period=date(2027, 1, 1), gpu_seconds=1800)
    figures = scrape(client)
    assert value(figures, "ffportal_gpu_hours_charged", period="this_month") == 0.5
    assert value(figures, "ffportal_gpu_hours_charged", period="all") == 1.5


def test_images_per_second_per_template_come_from_the_workers_timings(client, owner, template):
    job = make_job(owner, template, status=JobStatus.RUNNING, targets=5)
    Target.objects.filter(job=job, index__lt=4).update(status=TargetStatus.DONE, seconds=2.0)
    # a video's time is per video, not per image: not in the images' pace
    Target.objects.filter(job=job, index=4).update(status=TargetStatus.DONE, seconds=90.0, frames_done=900,
                                                   frames_total=900)
    old = make_job(owner, template, status=JobStatus.COMPLETED, targets=1)  # ended long ago: outside the window
    Job.objects.filter(pk=old.pk).update(finished_at=timezone.now() - timedelta(days=2))
    Target.objects.filter(job=old).update(status=TargetStatus.DONE, seconds=100.0)
    figures = scrape(client)
    assert value(figures, "ffportal_template_images_per_second", template="quick-gpu") == 0.5
    assert value(figures, "ffportal_template_images_measured", template="quick-gpu") == 4


# ---- figures the processes record ----------------------------------------------------------------

def test_a_watcher_cycle_is_timed_counted_and_its_age_shown(client, profile):
    before = scrape(client)
    call_command("watch_cluster", "--once")
    after = scrape(client)
    name = "ffportal_watcher_cycle_seconds_count"
    assert value(after, name) == value(before, name) + 1
    assert value(after, "ffportal_watcher_ssh_execs_count") == value(before, "ffportal_watcher_ssh_execs_count") + 1
    assert ("ffportal_watcher_last_cycle_age_seconds", (("profile", "local"),)) not in before
    assert 0 <= value(after, "ffportal_watcher_last_cycle_age_seconds", profile="local") < 120
    assert value(after, "ffportal_cluster_unreachable", profile="local") == 0


def test_ssh_errors_are_counted_per_profile(client, owner, template, fake_ssh):
    job = make_job(owner, template, status=JobStatus.RUNNING, targets=1, tasks=1)
    Job.objects.filter(pk=job.pk).update(slurm_job_id="88")
    fake_ssh.unreachable("cannot reach the cluster: connection refused")
    before = scrape(client)
    call_command("watch_cluster", "--once")
    after = scrape(client)
    labels = {"profile": "local", "during": "watch"}
    assert value(after, "ffportal_ssh_errors_total", **labels) == value(before, "ffportal_ssh_errors_total", **labels) + 1
    assert value(after, "ffportal_cluster_unreachable", profile="local") == 1
    text = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()
    for secret in ("connection refused", "127.0.0.1", "not-a-real-key", "ffportal@"):  # no error text, host or key
        assert secret not in text


def test_start_to_slurm_id_latency_is_observed_when_the_id_is_stored(client, owner, fake_cluster, folder_job):
    from jobs.job.submit import submit_job

    fake_cluster(3)
    before = scrape(client)
    assert submit_job(str(folder_job.id)) == "4242"
    after = scrape(client)
    name = "ffportal_submit_latency_seconds_count"
    assert value(after, name) == value(before, name) + 1
    assert submit_job(str(folder_job.id)) == "4242"  # already submitted: nothing new to time
    assert value(scrape(client), name) == value(after, name)


def test_rq_queue_depth_and_failed_jobs_follow_a_real_worker(client, db, settings):
    import django_rq
    from rq import Queue, SimpleWorker

    name = f"ops-test-{uuid.uuid4().hex[:8]}"
    settings.RQ_QUEUES = {**settings.RQ_QUEUES, name: dict(settings.RQ_QUEUES["default"])}
    portal_queue = django_rq.get_queue(name)  # enqueues on commit: this test enqueues at once, in rq's own
    queue = Queue(name, connection=portal_queue.connection, serializer=portal_queue.serializer)
    try:
        queue.enqueue("builtins.int", "not a number")  # fails in the worker: ValueError
        figures = scrape(client)
        assert value(figures, "ffportal_rq_queue_depth", queue=name) == 1
        assert value(figures, "ffportal_rq_failed_jobs", queue=name) == 0
        SimpleWorker([queue], connection=queue.connection, serializer=queue.serializer).work(burst=True)
        figures = scrape(client)
        assert value(figures, "ffportal_rq_queue_depth", queue=name) == 0
        assert value(figures, "ffportal_rq_failed_jobs", queue=name) == 1
    finally:
        for job_id in queue.failed_job_registry.get_job_ids():
            queue.failed_job_registry.remove(job_id, delete_job=True)
        queue.delete(delete_jobs=True)


@pytest.mark.django_db(transaction=True)
@run_async
async def test_open_websockets_are_counted_and_uncounted(owner, template):
    from django.test import Client

    job = await in_db_thread(make_job)(owner, template, status=JobStatus.RUNNING, targets=1, tasks=1)
    client = Client()
    before = value(await in_db_thread(scrape)(client), "ffportal_websocket_connections")
    comm = await connect(f"/ws/jobs/{job.id}/", owner)
    await comm.receive_json_from()  # the snapshot: the consumer is in its group
    assert value(await in_db_thread(scrape)(client), "ffportal_websocket_connections") == before + 1
    await comm.disconnect()
    assert value(await in_db_thread(scrape)(client), "ffportal_websocket_connections") == before


# ---- several processes ---------------------------------------------------------------------------

RECORDER = textwrap.dedent("""
    import sys
    from jobs.ops import metrics
    for _ in range(int(sys.argv[1])):
        metrics.ssh_error("local", "watch")
    metrics.watcher_cycle(0.5, 1)
    metrics.websocket_opened()
    print("recorded", flush=True)
    sys.stdin.read()  # stays alive (its WebSocket open) until the test closes stdin
""")


def test_the_scrape_adds_up_what_several_processes_recorded(client, db, tmp_path, monkeypatch):
    shared = tmp_path / "metrics"
    shared.mkdir(mode=0o700)
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(shared)}
    procs = [subprocess.Popen([sys.executable, "-c", RECORDER, str(n)], env=env, cwd=os.getcwd(), text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE) for n in (1, 2)]
    try:
        for proc in procs:
            assert proc.stdout.readline().strip() == "recorded"
        monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(shared))
        figures = scrape(client)
        assert value(figures, "ffportal_ssh_errors_total", profile="local", during="watch") == 3
        assert value(figures, "ffportal_watcher_cycle_seconds_count") == 2
        assert value(figures, "ffportal_websocket_connections") == 2
        # and the figures from the database still come once, not once per process
        assert value(figures, "ffportal_jobs", state="queued") == 0
        assert value(figures, "ffportal_scrape_error", collector="database") == 0

        procs[0].communicate("")  # one process ends (as a killed ASGI process would, without closing)
        figures = scrape(client)
        assert value(figures, "ffportal_websocket_connections") == 1  # its open sockets are gone with it
        assert value(figures, "ffportal_ssh_errors_total", profile="local", during="watch") == 3  # totals stay
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.communicate("")


# ---- the Grafana dashboard -----------------------------------------------------------------------

def test_the_grafana_dashboard_is_json_and_uses_only_metrics_the_portal_exports(client, db):
    import json
    import re
    from pathlib import Path

    from django.conf import settings

    dashboard = json.loads((Path(settings.BASE_DIR) / "deploy" / "grafana" / "facefusion-portal.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    used = {re.sub(r"_(total|bucket|sum|count)$", "", m) for e in exprs for m in re.findall(r"ffportal_[a-z_]+", e)}
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    exported = {f.name for f in text_string_to_metric_families(response.content.decode())}
    assert len(used) >= 15
    assert used <= exported, used - exported
