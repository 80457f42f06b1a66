"""Starts through the RQ worker process as `make up` runs it (`manage.py portal_rqworker`, the
command scripts/up.sh starts), on the real cluster:
- two Starts get their Slurm ids over ONE SSH connection, opened by the first and still open for
  the second (a worker forking a child per job opened one per Start: a TCP connection, key
  exchange and authentication each time);
- when that connection dies while the worker waits (here: its socket is destroyed, as a firewall
  or a restarted sshd would), the next Start still gets its Slurm id, over a new connection.
"""
import os
import re
import subprocess
import time
from pathlib import Path

import pytest
from django.conf import settings

from jobs.background.rq_worker import command
from jobs.models import Job
from tests.e2e.conftest import SAMPLES, fill
from tests.e2e.test_browser_live import _test_database_url
from tests.e2e.test_end_to_end import start

REPO = Path(__file__).resolve().parents[2]
SSH_PORT = os.environ.get("FFP_SSH_PORT", "2222")
#: how long a Start may wait for its Slurm id on the shared test cluster (it ends as soon as it has one)
SUBMIT_WAIT_S = 120


class Worker:
    def __init__(self, log: Path):
        self.log = log
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings", "DATABASE_URL": _test_database_url(),
               "MEDIA_ROOT": str(settings.MEDIA_ROOT), "REDIS_URL": settings.REDIS_URL, "LOG_LEVEL": "INFO",
               "PYTHONUNBUFFERED": "1"}
        with log.open("w") as out:
            self.proc = subprocess.Popen(command(), cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
        self.slurm_ids: list[str] = []

    def submit(self, api, folder) -> Job:
        """Start a job through the API; wait until the worker has submitted it."""
        job = start(api, folder, template="cpu-small")
        deadline = time.monotonic() + SUBMIT_WAIT_S
        while time.monotonic() < deadline:
            job.refresh_from_db()
            if job.slurm_job_id:
                self.slurm_ids.append(job.slurm_job_id)
                return job
            if self.proc.poll() is not None:
                pytest.fail(f"the RQ worker exited with {self.proc.returncode}:\n{self.tail()}", pytrace=False)
            time.sleep(0.2)
        pytest.fail(f"job {job.id} got no Slurm id within {SUBMIT_WAIT_S}s ({job.error}):\n{self.tail()}", pytrace=False)

    def connections(self) -> list[str]:
        """The SSH connections the worker opened, from its log."""
        return re.findall(r"connected to \S+ \(connection #\d+\)", self.log.read_text())

    def drop_connection(self) -> None:
        """Destroy the worker's TCP connection to sshd (`ss -K`), as a firewall dropping it would."""
        listing = subprocess.run(["ss", "-tnpH", "state", "established", "dport", "=", f":{SSH_PORT}"],
                                 capture_output=True, text=True, timeout=30).stdout
        ports = [m.group(1) for line in listing.splitlines() if f"pid={self.proc.pid}," in line
                 for m in [re.search(r"\S+:(\d+)\s+\S+:%s\b" % SSH_PORT, line)] if m]
        assert len(ports) == 1, listing
        subprocess.run(["ss", "-K", "dport", "=", f":{SSH_PORT}", "sport", "=", f":{ports[0]}"],
                       capture_output=True, timeout=30, check=True)

    def stop(self) -> None:
        self.proc.terminate()  # a warm shutdown: it is idle by now
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        for slurm_id in self.slurm_ids:
            subprocess.run(["scancel", slurm_id], capture_output=True, timeout=60)

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


@pytest.fixture
def worker(local, redis_queue, tmp_path):
    w = Worker(tmp_path / "rqworker.log")
    yield w
    w.stop()


def test_two_starts_through_the_worker_use_one_ssh_connection(api, folder, worker):
    fill(folder, {"a.jpg": SAMPLES / "t1.jpg"})
    first, second = worker.submit(api, folder), worker.submit(api, folder)
    assert first.slurm_job_id != second.slurm_job_id
    assert len(worker.connections()) == 1, worker.tail()


def test_a_start_after_the_connection_dropped_gets_its_slurm_id_on_a_new_one(api, folder, worker):
    fill(folder, {"a.jpg": SAMPLES / "t1.jpg"})
    worker.submit(api, folder)
    worker.drop_connection()
    job = worker.submit(api, folder)
    assert job.slurm_job_id and not job.error, job.error
    assert len(worker.connections()) == 2, worker.tail()
