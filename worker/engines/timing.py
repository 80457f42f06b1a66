"""How long the models themselves ran: ONNX Runtime sessions wrapped to add up their run time.

A video's stage times (`worker.pipeline.StageTimes`) split the face work into the models' own time
and the rest (pre- and post-processing, alignment, paste-back: the CPU's share on a GPU node). Per
thread, since each GPU of a task runs its own pipeline in its own thread (`worker.gpus`).
"""
from __future__ import annotations

import threading
import time


class InferenceClock:
    """The seconds spent in `session.run` by the sessions `wrap`ped with this clock, per thread."""

    def __init__(self) -> None:
        self._local = threading.local()

    @property
    def seconds(self) -> float:
        return getattr(self._local, "seconds", 0.0)

    def add(self, seconds: float) -> None:
        self._local.seconds = self.seconds + seconds

    def wrap(self, session):
        """`session`, with its `run` timed; everything else passes through."""
        return _TimedSession(session, self)


class _TimedSession:
    def __init__(self, session, clock: InferenceClock):
        self._session = session
        self._clock = clock

    def run(self, *args, **kwargs):
        t = time.perf_counter()
        try:
            return self._session.run(*args, **kwargs)
        finally:
            self._clock.add(time.perf_counter() - t)

    def __getattr__(self, name: str):
        return getattr(self._session, name)
