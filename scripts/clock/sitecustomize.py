"""Loaded by every Python process of `make test-clock` (scripts/test-clock.sh puts this folder on
PYTHONPATH): time.sleep without clock_nanosleep.

The run fakes the wall clock only (FAKETIME_DONT_FAKE_MONOTONIC=1): with a faked monotonic clock,
Python's timed lock waits (sem_clockwait, which libfaketime 0.9.10 does not intercept) wait for
decades. But with the real monotonic clock, libfaketime 0.9.10 still shifts the absolute deadline
Python's time.sleep hands clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) by the fake offset, and
the sleep fails with EINVAL. select() takes a relative timeout, which libfaketime leaves alone.
"""
import select
import time


def _sleep(seconds: float) -> None:
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    # select() is retried with the time left after a signal (PEP 475), as time.sleep is
    select.select([], [], [], seconds)


time.sleep = _sleep
