"""Stop and start the real local cluster's components (scripts/cluster) for the fault-injection tests.

Every `stop_*` kills one daemon by the pid in its pid file (never by name); `restore()` runs
scripts/cluster/up.sh, which is idempotent and starts whatever is missing in ~2 s, so a test
restores what it stopped in a `finally` with one call. `check()` runs scripts/cluster/check.sh.
`a_task_paused_mid_work` holds one task of a job still (SIGSTOP) around a fault, so that "mid-task"
does not depend on how fast the task runs.
"""
from __future__ import annotations

import os
import re
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


def running_batch_steps(slurm_job_id: str) -> dict[str, int]:
    """{raw Slurm job id: pid of its batch step's slurmstepd} for the tasks of this (array) job
    running now. Only this job's: other jobs on the machine (other test runs) come and go."""
    r = subprocess.run(["squeue", "-j", slurm_job_id, "-h", "-t", "R", "-o", "%A"], capture_output=True, text=True,
                       timeout=60)
    running = set(r.stdout.split()) if r.returncode == 0 else set()
    steps = {}
    for pid in slurmstepd_pids():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        match = re.search(rb"\[(\d+)\.batch\]", cmdline)  # "slurmstepd: [118.batch]"
        if match and match.group(1).decode() in running:
            steps[match.group(1).decode()] = pid
    return steps


def descendants(pid: int) -> list[int]:
    out, todo = [], children(pid)
    while todo:
        child = todo.pop()
        out.append(child)
        todo.extend(children(child))
    return out


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _all_stopped(pids: list[int], timeout: float = 10) -> bool:
    """True once every one of `pids` is stopped (state T); False if one exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = []
        for pid in pids:
            try:
                states.append(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0])
            except OSError:
                return False
        if "Z" in states:
            return False
        if all(st == "T" for st in states):
            return True
        time.sleep(0.05)
    return False


@contextmanager
def a_task_paused_mid_work(slurm_job_id: str, timeout: float = 300):
    """Wait for one of this job's tasks to run, then pause its processes (SIGSTOP): the task stays
    mid-work, with its slurmstepd, however little it had left to do, until the block ends and
    they are continued (SIGCONT, always). Yields the paused task's slurmstepd pid."""
    deadline = time.monotonic() + timeout
    paused: list[int] = []
    try:
        while not paused:
            for stepd in running_batch_steps(slurm_job_id).values():
                paused = [p for p in descendants(stepd) if alive(p)]
                _signal_all(paused, signal.SIGSTOP)
                if paused and _all_stopped(paused) and alive(stepd):
                    break
                _signal_all(paused, signal.SIGCONT)  # it was ending anyway: try another, or later
                paused = []
            else:
                if time.monotonic() > deadline:
                    raise AssertionError(f"no task of Slurm job {slurm_job_id} was seen running within {timeout}s")
                time.sleep(0.2)
        yield stepd
    finally:
        _signal_all(paused, signal.SIGCONT)


@contextmanager
def outage(stop):
    """`with outage(stop_sshd): ...` stops a component and always brings it back (up.sh)."""
    try:
        stop()
        yield
    finally:
        restore()
