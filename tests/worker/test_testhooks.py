"""TESTS ONLY hooks: the memory hook grows until something kills it, and never hangs."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from worker.testhooks import MemoryHookNotKilled, hold_memory_until_killed

ROOT = Path(__file__).resolve().parents[2]


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _hook(mb: int, **kw) -> subprocess.Popen:
    code = ("import logging, sys; logging.basicConfig(level=logging.INFO); "
            "from worker.testhooks import hold_memory_until_killed; "
            f"hold_memory_until_killed({mb}, **{kw!r})")
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))})


def test_it_grows_until_a_memory_sampler_kills_it():
    # The test plays Slurm's accounting sampler: read the resident memory, kill once it is over --mem.
    limit_mb = 200
    proc = _hook(1024)
    readings = []
    try:
        deadline = time.monotonic() + 120  # generous: the hook gives up itself at 120 s
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                readings.append(_rss_mb(proc.pid))
            except OSError:
                break
            if readings[-1] > limit_mb:
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.05)  # a sampler's period is the behaviour played (Slurm samples every few seconds)
        rc = proc.wait(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert rc == -signal.SIGKILL, proc.stderr.read()  # killed by the sampler, not ended by itself
    assert readings[-1] > limit_mb
    rising = [r for r in readings if 60 < r <= limit_mb]  # above the interpreter's own size
    assert len(rising) >= 2, readings  # grown in steps the sampler saw, not in one jump
    assert "growing to 1024 MB" in proc.stderr.read()


def test_it_holds_then_gives_up_with_a_reason_instead_of_hanging():
    proc = _hook(64, give_up_seconds=2.0)
    try:
        rc = proc.wait(timeout=120)
        err = proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()
    assert rc == 1 and "MemoryHookNotKilled" in err
    assert "held 64 MB" in err and "was not killed" in err
    assert err.index("holding 64 MB") < err.index("was not killed")


def test_it_holds_what_it_got_when_the_address_space_runs_out():
    # An address-space limit (ulimit -v) refuses the allocation instead of killing the process:
    # the hook keeps what it has and goes on waiting to be killed.
    code = ("import logging, resource; logging.basicConfig(level=logging.INFO); "
            "from worker.testhooks import hold_memory_until_killed; "
            "size = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize(); "
            "resource.setrlimit(resource.RLIMIT_AS, (size + (300 << 20), size + (300 << 20))); "
            "hold_memory_until_killed(4096, step_mb=64, step_seconds=0)")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))})
    try:
        lines = []
        for line in proc.stderr:  # ends when the process does; the hook's own bound is 120 s
            lines.append(line)
            if "test hook: holding" in line:
                break
        assert proc.poll() is None, "".join(lines)  # still alive, holding, not crashed
    finally:
        proc.kill()
        proc.wait()
    assert "no more memory could be allocated" in lines[-2] and "test hook: holding" in lines[-1], lines
    held = int(lines[-1].split("holding ")[1].split()[0])
    assert 0 < held < 4096


def test_it_never_returns():
    with pytest.raises(MemoryHookNotKilled, match="held 1 MB .* was not killed"):
        hold_memory_until_killed(1, give_up_seconds=0.5)
