"""Waiting in tests for a condition, never for a fixed time: a fixed sleep is either too short on a
busy machine (a flaky test) or longer than needed everywhere else, and the assertions after it
often hold whether or not anything happened."""
from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float = 30.0, every: float = 0.01) -> T:
    """`condition()`'s first true value, asked every `every` s; AssertionError after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout:g} s: {getattr(condition, '__name__', condition)}")
        time.sleep(every)
    return value


def settled(read: Callable[[], T], quiet: float = 0.5, timeout: float = 30.0, every: float = 0.01) -> T:
    """`read()` once it has stopped changing: the same value for `quiet` s on end. For threads that
    block once they can go no further (a stalled pipeline): their counters stop, and no single
    moment says so. AssertionError when it still changes after `timeout` s."""
    deadline = time.monotonic() + timeout
    value, since = read(), time.monotonic()
    while time.monotonic() - since < quiet:
        if time.monotonic() > deadline:
            raise AssertionError(f"still changing after {timeout:g} s: {value!r}")
        time.sleep(every)
        now = read()
        if now != value:
            value, since = now, time.monotonic()
    return value
