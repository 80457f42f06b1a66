"""SIGTERM as an exception, so every `finally` block (temp files, ffmpeg children) runs.

Slurm sends SIGTERM on `scancel`, on pre-emption and at the time limit, then SIGKILL after its
KillWait (30 s by default). Python's default for SIGTERM is to die at once, skipping cleanup.
"""
from __future__ import annotations

import signal
from typing import Any


class Terminated(SystemExit):
    """Raised in the main thread on SIGTERM. A SystemExit, so `except Exception` does not swallow it
    and an uncaught one ends the process quietly with exit status 128 + signal number (143)."""

    def __init__(self, signum: int = signal.SIGTERM):
        super().__init__(128 + int(signum))
        self.signum = int(signum)


def install_sigterm_handler() -> Any:
    """Make SIGTERM raise `Terminated` in the main thread; returns the previous handler.

    Only the first signal raises: a second SIGTERM arriving while `finally` blocks clean up must not
    interrupt that cleanup. Must be called from the main thread (a Python rule for signal handlers).
    """
    raised = False

    def handler(signum: int, frame: Any) -> None:
        nonlocal raised
        if raised:
            return
        raised = True
        raise Terminated(signum)

    return signal.signal(signal.SIGTERM, handler)
