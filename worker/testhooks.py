"""TESTS ONLY: make a task do what end-to-end tests need the cluster to react to.

`$FFP_TEST_ALLOCATE_MB` (or the hidden `--test-allocate-mb`) makes `python -m worker run` grow its
resident memory up to that many MB before loading anything, then hold it until the process is
killed, so that a test can watch Slurm end the task OUT_OF_MEMORY. Nothing in production sets it.

Slurm notices memory in two ways: the cgroup limit (the kernel kills at once) and the accounting
sampler (it reads resident memory every JobAcctGatherFrequency and kills a task over its `--mem`). Growing in
small steps and holding the memory, with its pages kept written, leaves each of them as long as it
needs; a task that is still alive after `GIVE_UP_SECONDS` stops waiting and fails instead of
hanging (the memory limit was not enforced, or was higher than the test thought).
"""
from __future__ import annotations

import logging
import time

from .errors import WorkerError

log = logging.getLogger("worker.testhooks")

#: growth per step and the pause between steps: 32 MB every 0.1 s (320 MB/s), so a sampler that
#: reads once a second sees the memory rise over several readings rather than in one jump
STEP_MB = 32
STEP_SECONDS = 0.1
#: how long the memory is held at most; read when the hook starts (tests may shorten it)
GIVE_UP_SECONDS = 120.0
#: how often held pages are written again, so that none of them is left out of the resident set
REWRITE_SECONDS = 1.0

PAGE = 4096


class MemoryHookNotKilled(WorkerError):
    """The memory hook held its memory for its whole bound and the task was not killed."""


def _written_block(nbytes: int, value: int) -> bytearray:
    block = bytearray(nbytes)  # zero pages from the kernel are not resident until written
    _rewrite(block, value)
    return block


def _rewrite(block: bytearray, value: int) -> None:
    """Write one byte in every page of `block` (C speed: one extended-slice assignment)."""
    n = len(range(0, len(block), PAGE))
    block[::PAGE] = bytes([value]) * n


def hold_memory_until_killed(mb: int, *, step_mb: int | None = None, step_seconds: float | None = None,
                             give_up_seconds: float | None = None) -> None:
    """Grow resident memory to `mb` MB in steps, then hold it until the process is killed.

    Never returns: raises `MemoryHookNotKilled` when still alive after `give_up_seconds` (counted
    from the start). A MemoryError (an address-space limit) ends the growth early; what was
    allocated is held the same way. Terminated (SIGTERM) passes through as usual.
    """
    step_mb = STEP_MB if step_mb is None else step_mb
    step_seconds = STEP_SECONDS if step_seconds is None else step_seconds
    give_up_seconds = GIVE_UP_SECONDS if give_up_seconds is None else give_up_seconds
    log.warning("test hook: growing to %d MB and holding it until this task is killed (FFP_TEST_ALLOCATE_MB)", mb)
    start = time.monotonic()
    deadline = start + give_up_seconds
    blocks: list[bytearray] = []
    held = 0
    while held < mb and time.monotonic() < deadline:
        size = min(step_mb, mb - held)
        try:
            blocks.append(_written_block(size << 20, 1))
        except MemoryError:
            log.warning("test hook: no more memory could be allocated at %d MB; holding that", held)
            break
        held += size
        time.sleep(step_seconds)
    log.warning("test hook: holding %d MB", held)
    value = 1
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(REWRITE_SECONDS, left))
        value = 3 - value  # alternate 1 and 2: every rewrite really changes each page
        for block in blocks:
            _rewrite(block, value)
    raise MemoryHookNotKilled(
        f"test hook FFP_TEST_ALLOCATE_MB: held {held} MB for {time.monotonic() - start:.0f} s and the task "
        f"was not killed; the memory limit is not enforced or is above {held} MB"
    )
