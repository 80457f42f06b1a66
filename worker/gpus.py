"""The GPUs a task may use, and running a chunk's targets on all of them at once.

Slurm hands a task its GPUs (`--gres=gpu:N`) through CUDA_VISIBLE_DEVICES, and CUDA numbers the
visible ones from 0: a task given GPUs 2 and 5 sees devices 0 and 1. A task with several GPUs
builds one engine per GPU and runs one pipeline per GPU, each taking the chunk's next target as
it finishes one (a long video does not hold up the others' photos); one GPU or none: the chunk
runs in order, in the main thread, as always.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Callable, Iterable

#: how long a stopped task waits for its GPU threads to clean up (Slurm's KillWait is 30 s by default)
STOP_WAIT_S = 20


def visible_gpus(env=os.environ) -> list[int]:
    """CUDA device indices this process may use ([] when CUDA_VISIBLE_DEVICES hides every GPU or
    is unset: then the engine takes its default device, and one pipeline runs)."""
    raw = (env.get("CUDA_VISIBLE_DEVICES") or "").strip()
    entries = [e.strip() for e in raw.split(",") if e.strip()]
    if not entries or entries[0] in ("-1", "NoDevFiles"):
        return []
    return list(range(len(entries)))


def run_on_each(items: Iterable, workers: list, work: Callable[[object, object], None],
                stop: threading.Event) -> None:
    """`work(item, worker)` for every item, on one thread per worker, each taking the next item
    when it is free. Stops handing out items once `stop` is set. The first exception raised by
    any `work` (after every thread has ended) is raised here."""
    pending = iter(items)
    lock = threading.Lock()
    errors: list[BaseException] = []

    def loop(worker) -> None:
        while not stop.is_set():
            with lock:
                item = next(pending, _DONE)
            if item is _DONE:
                return
            try:
                work(item, worker)
            except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread below
                errors.append(exc)
                stop.set()
                return

    threads = [threading.Thread(target=loop, args=(w,), name=f"gpu-{i}", daemon=True) for i, w in enumerate(workers)]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.5)  # with a timeout: SIGTERM's exception reaches this thread while it waits
    except BaseException:
        # SIGTERM (raised in this thread): the other threads stop at their next frame and clean up
        # (ffmpeg killed, temp files removed) within Slurm's 30 s between SIGTERM and SIGKILL
        stop.set()
        deadline = time.monotonic() + STOP_WAIT_S
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        raise
    if errors:
        raise errors[0]


_DONE = object()
