"""The RQ worker process exactly as `make up` starts it (`manage.py portal_rqworker`, burst mode):
its jobs share the SSH connection pool, a job that hangs is stopped by its time limit without
stopping the worker, and the worker refuses an insecure configuration like every portal process.
Real processes and real Redis; no cluster (the probes never connect)."""
import os
import subprocess
import uuid
from pathlib import Path

import django_rq
import pytest
from django.conf import settings
from rq.job import JobStatus

from jobs.background.rq_worker import command

REPO = Path(__file__).resolve().parents[2]
#: far above a probe's run time: only a worker that never stops would reach it
WORKER_LIMIT_S = 120


@pytest.fixture
def queue():
    q = django_rq.get_queue("default")
    q.empty()
    yield q
    q.empty()


def work_off(tmp_path, *extra_env) -> subprocess.CompletedProcess:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings", "REDIS_URL": settings.REDIS_URL,
           "DATABASE_URL": f"sqlite:///{tmp_path}/worker.sqlite3", **dict(extra_env)}
    r = subprocess.run(command("--burst"), cwd=REPO, env=env, capture_output=True, text=True, timeout=WORKER_LIMIT_S)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    return r


def test_it_keeps_the_ssh_pool_from_one_job_to_the_next(queue, tmp_path):
    token = uuid.uuid4().hex
    queue.enqueue("tests.jobs.rq_probes.mark_pool", token)
    later = queue.enqueue("tests.jobs.rq_probes.pool_mark")
    work_off(tmp_path)
    later.refresh()
    # A worker that forks a child per job hands each job an empty pool: a new SSH handshake per Start.
    assert later.get_status() == JobStatus.FINISHED and later.return_value() == token


def test_a_job_that_hangs_is_stopped_by_its_time_limit_and_the_next_one_runs_on_fresh_connections(queue, tmp_path):
    hung = queue.enqueue("tests.jobs.rq_probes.hang", uuid.uuid4().hex, 3600, job_timeout=2)
    later = queue.enqueue("tests.jobs.rq_probes.pool_mark")
    work_off(tmp_path)
    hung.refresh()
    later.refresh()
    assert hung.get_status() == JobStatus.FAILED and "JobTimeoutException" in hung.latest_result().exc_string
    # The stopped job may have left a command half-sent: its connection is not handed on.
    assert later.get_status() == JobStatus.FINISHED and later.return_value() is None


def test_it_refuses_to_start_with_an_insecure_configuration(tmp_path):
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path}/worker.sqlite3", "DEBUG": "false",
           "SECRET_KEY": "dev-only-insecure-key", "ALLOWED_HOSTS": "*",
           "FIELD_ENCRYPTION_KEY": "Xh5n0rY9m2c6kZ1bq3Wf8a7Tt4Ls0Vd2Jp9Ue5Gy1HI="}
    r = subprocess.run(command("--burst"), cwd=REPO, env=env, capture_output=True, text=True, timeout=WORKER_LIMIT_S)
    assert r.returncode != 0 and "jobs.E001" in r.stderr, r.stderr[-2000:]


def test_make_up_starts_the_worker_these_tests_start():
    assert " ".join(command()[1:]) in (REPO / "scripts" / "up.sh").read_text()
