"""Stop and start the real local cluster's components (scripts/cluster) for the fault-injection tests.

Every `stop_*` kills one daemon by the pid in its pid file (never by name); `restore()` runs
scripts/cluster/up.sh, which is idempotent and starts whatever is missing in ~2 s, so a test
restores what it stopped in a `finally` with one call. `check()` runs scripts/cluster/check.sh.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STATE = Path(os.environ.get("FFP_STATE", "/var/lib/ffportal"))
SSHD_PID = STATE / "run" / "sshd.pid"
REDIS_PID = STATE / "redis" / "redis.pid"
REDIS_PORT = int(os.environ.get("FFP_REDIS_PORT", "6379"))
SLURMCTLD_PID = Path("/run/slurm/slurmctld.pid")
SLURMD_PID = Path("/run/slurm/slurmd.pid")


def _pid(path: Path) -> int:
    return int(path.read_text().strip())


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def children(pid: int) -> list[int]:
    r = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(p) for p in r.stdout.split()]


def kill_wait(pids: list[int], sig: int = signal.SIGTERM, timeout: float = 20) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while any(alive(p) for p in pids):
        if time.monotonic() > deadline:
            raise AssertionError(f"processes {pids} still alive {timeout}s after signal {sig}")
        time.sleep(0.1)


def restore() -> str:
    """Start whatever is not running (scripts/cluster/up.sh); returns its output."""
    r = subprocess.run(["bash", str(REPO / "scripts/cluster/up.sh")], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, "up.sh could not restore the cluster:\n" + r.stdout + r.stderr
    return r.stdout


def check() -> None:
    r = subprocess.run(["bash", str(REPO / "scripts/cluster/check.sh")], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, "cluster check failed after the fault tests:\n" + r.stdout + r.stderr


def stop_sshd() -> None:
    """The listener AND its per-connection children (open sessions survive the listener otherwise),
    and the portal's pooled SSH connections in this process: the cluster is really unreachable."""
    from cluster.ssh import close_all_runners

    master = _pid(SSHD_PID)
    kill_wait([master, *children(master)])
    close_all_runners()


def stop_redis() -> None:
    """A clean Redis shutdown (it saves its data first, like a service restart)."""
    kill_wait([_pid(REDIS_PID)])


def stop_slurmctld() -> None:
    kill_wait([_pid(SLURMCTLD_PID)])


def kill_slurmd() -> int:
    """SIGKILL slurmd (a crash): its slurmstepd processes are left alone. Returns the old pid."""
    pid = _pid(SLURMD_PID)
    kill_wait([pid], signal.SIGKILL)
    return pid


def slurmstepd_pids() -> list[int]:
    r = subprocess.run(["pgrep", "-x", "slurmstepd"], capture_output=True, text=True)
    return [int(p) for p in r.stdout.split() if alive(int(p))]


@contextmanager
def outage(stop):
    """`with outage(stop_sshd): ...` stops a component and always brings it back (up.sh)."""
    try:
        stop()
        yield
    finally:
        restore()
