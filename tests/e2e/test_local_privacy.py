"""What a local Unix user who is not the portal sees of the local clusters and the service user, as
the attack review looked (scripts/cluster/up.sh, scripts/web-user.sh; docs/deploy.md tells sites
the same): another user's jobs are private to Slurm's commands (PrivateData), the daemons' logs
are root's, and the portal's service user has a fixed private home that no run moves or deletes.
"""
from __future__ import annotations

import os
import pwd
import stat
import subprocess
from pathlib import Path

import pytest

from jobs.models import JobStatus
from tests.e2e.conftest import SAMPLES, fill, run_rq, watch_until
from tests.e2e.test_end_to_end import start

STATE = Path(os.environ.get("FFP_STATE", "/var/lib/ffportal"))
#: a local account that is neither root, Slurm, the portal's cluster user nor its service user
OUTSIDER = "nobody"


def as_outsider(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["runuser", "-u", OUTSIDER, "--", *argv], capture_output=True, text=True, timeout=60)


def test_another_local_user_sees_none_of_the_portals_jobs(api, local, folder, redis_queue):
    fill(folder, {"a.jpg": SAMPLES / "t1.jpg"})
    job = start(api, folder, template="cpu-small")
    run_rq(redis_queue)
    job = watch_until(job, {JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.PARTIALLY_FAILED})
    slurm_id = job.slurm_job_id
    # root (as the portal's Operator) sees it, in the queue's memory and in the accounting ...
    mine = subprocess.run(["sacct", "-a", "-X", "-n", "-P", "-S", "now-1hours", "-o", "JobIDRaw"],
                          capture_output=True, text=True, timeout=60).stdout.split()
    assert any(line.split("_")[0] == slurm_id for line in mine), mine
    # ... another user sees nothing of it (before PrivateData: `sacct -a` listed every portal job).
    outsider = as_outsider("sacct", "-a", "-X", "-n", "-P", "-S", "now-1hours", "-o", "JobIDRaw,JobName,User")
    assert outsider.returncode == 0, outsider.stderr
    assert slurm_id not in outsider.stdout and "ffp-" not in outsider.stdout, outsider.stdout
    queue = as_outsider("squeue", "-a", "-h", "-t", "all", "-o", "%i %j %u")
    assert "ffp-" not in queue.stdout, queue.stdout


def test_the_cluster_logs_are_not_readable_by_another_user():
    log_dir = STATE / "log"
    assert stat.S_IMODE(log_dir.stat().st_mode) & 0o004 == 0  # no one else lists it
    logs = sorted(log_dir.glob("*"))
    assert any(p.name == "sshd.log" for p in logs), logs
    for path in logs:
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, f"{path} is {oct(path.stat().st_mode)}"
    read = as_outsider("cat", str(log_dir / "sshd.log"))
    assert read.returncode != 0 and "Permission denied" in read.stderr


def test_the_service_user_has_a_fixed_private_home_of_its_own():
    web = pwd.getpwnam(os.environ.get("FFP_WEB_USER", "ffpweb"))
    home = Path(web.pw_dir)
    assert home == Path(os.environ.get("FFP_WEB_HOME", "/var/lib/ffpweb"))
    assert home.is_dir() and not home.is_symlink()
    st = home.stat()
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (web.pw_uid, 0o700)
    # Nowhere a test's temporary folder could be (the review found it under /var/tmp, deleted).
    assert not str(home).startswith(("/tmp", "/var/tmp"))


@pytest.fixture(autouse=True)
def _outsider_exists():
    pwd.getpwnam(OUTSIDER)  # fails loudly if the machine has no such account
