"""A video's frames in three overlapping stages: decode -> face work -> encode.

Reading raw frames off the decoder's pipe, the face work (detection and swap: the GPU on a GPU
node) and handing frames to the encoder's pipe each take a share of every frame. Done one after
another, the GPU waits while the CPU copies and encodes, and the other way round. Here a reader
thread and a writer thread move frames through two BOUNDED queues while the caller's thread does the
face work, so the slowest stage alone sets the pace, and memory stays at a few frames whatever the
video's length (`queue_depth`). The face work itself may be split in two (`Later`): the caller's
thread finds and decides the faces of frame N+1 while the writer swaps frame N.

`StageTimes` says where the time went: a stage that is busy all the time is the one to speed up
(`summary()` is logged per video and printed by bench/worker_gpu.sh).

The threads never outlive the video: `close()` stops them. A frame_fn (or a `Later.finish`) that
raises, an encoder that dies, or a SIGTERM (raised in the caller's thread) all end in `close()`, called by
`worker.video` after it has killed both ffmpeg processes, so a blocked read or write returns.
"""
from __future__ import annotations

import fcntl
import logging
import os
import queue
import threading
import time
from dataclasses import dataclass
from typing import IO, Callable, Iterator

import numpy as np

from .errors import TargetError

log = logging.getLogger("worker.pipeline")

#: bytes of raw frames each queue may hold: a 1080p frame is 6.2 MB (8 frames), a 4K one 25 MB (the minimum of 2)
QUEUE_BYTES = 48 * 1024 * 1024
MIN_DEPTH, MAX_DEPTH = 2, 8
#: how often a blocked thread looks at the stop flag (s); a frame usually arrives long before
POLL_S = 0.1


#: what a frame pipe is widened to (Linux's default limit for an unprivileged process): with the default
#: 64 KiB a 1080p frame takes ~100 reads and as many wake-ups of each side; 1 MiB halved the reader's
#: CPU time per frame (5 -> 2 ms, docs/worker.md)
PIPE_BYTES = 1024 * 1024


def widen_pipe(stream: IO[bytes] | None, size: int = PIPE_BYTES) -> int | None:
    """Make the pipe under `stream` hold `size` bytes; its new size, or None where the system says
    no (another OS, a lower /proc/sys/fs/pipe-max-size, the user's pipe quota): then it just stays
    slower."""
    try:
        return fcntl.fcntl(stream.fileno(), fcntl.F_SETPIPE_SZ, size)
    except (AttributeError, OSError, ValueError):
        return None


#: OpenCV's threads per worker process unless $FFP_OPENCV_THREADS says otherwise (0: OpenCV's own
#: choice, one per core)
OPENCV_THREADS = 1


def set_opencv_threads(env=os.environ) -> int:
    """Run OpenCV's functions on the calling thread alone (or $FFP_OPENCV_THREADS threads); returns
    the number set.

    A task's parallelism is its pipeline (decoder, face work and encoder side by side, one pipeline
    per GPU) and Slurm's array of tasks. OpenCV's own pool split each warp and resize over the cores
    the encoder needed and then waited on them: on the 1080p bench (2 cores, medians of 3 alternated
    runs), one thread took the worker's CPU from 19.8 to 16.2 ms a frame, ffmpeg's from 81.2 to 72.6
    (less contention), and frames/s from 17.2 to 19.5 (docs/worker.md). A single large photo on its
    own takes ~25 % longer.
    """
    import cv2

    raw = env.get("FFP_OPENCV_THREADS", "")
    threads = OPENCV_THREADS
    if raw.strip():
        try:
            threads = max(0, int(raw))
        except ValueError:
            log.warning("FFP_OPENCV_THREADS=%r is not a whole number; using %d", raw, OPENCV_THREADS)
    cv2.setNumThreads(threads if threads > 0 else -1)  # a negative number restores OpenCV's default
    return threads


def queue_depth(shape: tuple[int, ...]) -> int:
    """Frames per queue for frames of `shape`: as many as QUEUE_BYTES holds, within [MIN_DEPTH, MAX_DEPTH]."""
    frame_bytes = int(np.prod(shape))
    return max(MIN_DEPTH, min(MAX_DEPTH, QUEUE_BYTES // max(1, frame_bytes)))


@dataclass
class StageTimes:
    """Seconds per stage over one video. The stages run side by side, so they add up to more
    than `wall_s`."""

    frames: int = 0
    wall_s: float = 0.0
    #: the reader: waiting for the decoder and copying frames off its pipe
    decode_s: float = 0.0
    #: the face work (frame_fn), in the caller's thread
    work_s: float = 0.0
    #: of `work_s`, the models' own run time, where the engine measures it (else 0)
    inference_s: float = 0.0
    #: the writer: handing frames to the encoder (waiting while it encodes)
    encode_s: float = 0.0
    #: the writer: the last step of frames handed over as `Later` (the swap and paste-back)
    swap_s: float = 0.0
    #: of `swap_s`, the models' own run time
    swap_inference_s: float = 0.0

    @property
    def models_s(self) -> float:
        """The models' run time in all the video's threads."""
        return self.inference_s + self.swap_inference_s

    def busy(self) -> dict[str, float]:
        """Each stage's busy share of the wall time (0..1); "swap" only where frames were `Later`."""
        wall = self.wall_s or 1.0
        busy = {"decode": self.decode_s / wall, "face work": self.work_s / wall}
        if self.swap_s:
            busy["swap"] = self.swap_s / wall
        busy["encode"] = self.encode_s / wall
        return busy

    def bottleneck(self) -> str:
        busy = self.busy()
        return max(busy, key=busy.get)

    def summary(self) -> str:
        fps = self.frames / self.wall_s if self.wall_s else 0.0
        shares = ", ".join(f"{k} {v:.0%}" for k, v in self.busy().items())
        return (f"{self.frames} frames in {self.wall_s:.1f} s ({fps:.1f} frames/s); busy: {shares}; "
                f"slowest stage: {self.bottleneck()}")


@dataclass
class Later:
    """What a frame function returns to leave a frame's last step to the pipe's writer thread: the
    frame's faces are found and decided (`found`, `swapped`), and `finish(frame)` -> the finished
    frame (the swap and paste-back, in place) runs while the caller's thread already works on the
    next frame. On a GPU node the detector then runs on frame N+1 while frame N is swapped, so
    neither the GPU nor the CPU waits for the other. `finish` must not need the caller's thread."""

    frame: np.ndarray
    found: int
    swapped: int
    finish: Callable[[np.ndarray], np.ndarray]


def handed_over(result: "tuple[np.ndarray, int, int] | Later") -> tuple[np.ndarray, int, int, Callable | None]:
    """(frame, faces found, faces swapped, the `finish` the writer runs on it or None) of what a frame
    function returned: a plain (frame, found, swapped) or a `Later`."""
    if isinstance(result, Later):
        return result.frame, result.found, result.swapped, result.finish
    new, found, swapped = result
    return new, found, swapped, None


def check_frame(frame, shape: tuple[int, int, int], what: str) -> np.ndarray:
    """`frame` when it is a uint8 array of `shape` (a frame the encoder can take); else ValueError
    naming `what` returned it."""
    if not (isinstance(frame, np.ndarray) and frame.shape == shape and frame.dtype == np.uint8):
        raise ValueError(f"{what} must return a uint8 array of shape {shape}, got "
                         f"{getattr(frame, 'dtype', type(frame))} {getattr(frame, 'shape', '')}")
    return frame


class _End:
    """The reader's last item: the end of the stream, or what went wrong reading it."""

    def __init__(self, error: BaseException | None = None):
        self.error = error


class EncoderGone(Exception):
    """The writer could not hand a frame to the encoder (it exited): the caller asks ffmpeg why."""


class FramePipe:
    """Frames from `source` (raw frames of `shape`) to the caller, and the caller's results to `sink`.

        pipe = FramePipe(dec.stdout, enc.stdin, shape)
        try:
            for frame in pipe.frames():
                pipe.put(work(frame))  # or pipe.put(frame, finish): `finish` runs in the writer
            pipe.finish()          # every frame written, the encoder's input closed
        finally:
            ... kill the ffmpeg processes ...
            pipe.close()           # the threads are gone
    """

    def __init__(self, source: IO[bytes], sink: IO[bytes], shape: tuple[int, int, int], depth: int | None = None,
                 clock: Callable[[], float] | None = None):
        """`clock()`: the engine's model time so far in the calling thread (`worker.engines.timing`),
        for the model share of the writer's `Later` work."""
        self.shape = shape
        self._clock = clock or (lambda: 0.0)
        #: what a `Later.finish` raised in the writer: raised again in the caller's thread
        self._finish_error: BaseException | None = None
        self.depth = depth or queue_depth(shape)
        self.times = StageTimes()
        self._source, self._sink = source, sink
        self._decoded: queue.Queue = queue.Queue(self.depth)
        self._encoded: queue.Queue = queue.Queue(self.depth)
        self._stop = threading.Event()
        self._write_error: BaseException | None = None
        self._started = time.perf_counter()
        self._reader = threading.Thread(target=self._read_all, name="video-decode", daemon=True)
        self._writer = threading.Thread(target=self._write_all, name="video-encode", daemon=True)
        self._reader.start()
        self._writer.start()

    # -- the caller's side -----------------------------------------------------------------

    def frames(self) -> Iterator[np.ndarray]:
        """The decoded frames in order. Raises what the reader met (a frame cut short: TargetError)."""
        while True:
            item = self._decoded.get()
            if isinstance(item, _End):
                if item.error is not None:
                    raise item.error
                return
            yield item

    def put(self, frame: np.ndarray, finish: Callable[[np.ndarray], np.ndarray] | None = None) -> None:
        """Queue a frame for the encoder, with `finish` to run on it first in the writer thread (see
        `Later`). EncoderGone once the encoder stopped taking frames; what a `finish` raised, as
        it was, once one did."""
        while True:
            if self._finish_error is not None or self._write_error is not None or not self._writer.is_alive():
                # a finish that raised ended the writer too: that error, never "the encoder stopped"
                # (the encoder is alive then, and waiting on it would wait for ever)
                self._raise_finish_error()
                raise EncoderGone(str(self._write_error or "the encoder stopped"))
            try:
                self._encoded.put((frame, finish), timeout=POLL_S)
                break
            except queue.Full:
                continue
        self.times.frames += 1

    def add_work(self, seconds: float, inference_seconds: float = 0.0) -> None:
        self.times.work_s += seconds
        self.times.inference_s += inference_seconds

    def finish(self) -> None:
        """Wait until the writer has handed every frame over, then close the encoder's input."""
        self._put_end()
        self._writer.join()
        self._raise_finish_error()
        if self._write_error is not None:
            raise EncoderGone(str(self._write_error))
        try:
            self._sink.close()
        except BrokenPipeError:
            raise EncoderGone("the encoder stopped") from None
        self.times.wall_s = time.perf_counter() - self._started

    def close(self) -> None:
        """Stop both threads (after the ffmpeg processes were killed: nothing blocks then)."""
        self._stop.set()
        self._put_end()
        self._reader.join()
        self._writer.join()
        if not self.times.wall_s:
            self.times.wall_s = time.perf_counter() - self._started

    def _raise_finish_error(self) -> None:
        if self._finish_error is not None:
            error, self._finish_error = self._finish_error, None
            raise error

    def _put_end(self) -> None:
        """The writer's last item; given up when the writer is gone (it died, or close() stopped it)."""
        while self._writer.is_alive():
            try:
                self._encoded.put(None, timeout=POLL_S)
                return
            except queue.Full:
                continue

    # -- the threads -------------------------------------------------------------------------

    def _read_all(self) -> None:
        end = _End()
        try:
            while not self._stop.is_set():
                t = time.perf_counter()
                frame = read_frame(self._source, self.shape)
                self.times.decode_s += time.perf_counter() - t
                if frame is None:
                    break
                if not self._offer(self._decoded, frame):
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, raised there
            end = _End(exc)
        self._offer(self._decoded, end)

    def _write_all(self) -> None:
        while True:
            try:
                item = self._encoded.get(timeout=POLL_S)
            except queue.Empty:
                if self._stop.is_set():
                    return
                continue
            if item is None:
                return
            frame, finish = item
            if finish is not None:
                t, model_t = time.perf_counter(), self._clock()
                try:
                    frame = check_frame(finish(frame), self.shape, "a frame's finish")
                except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, raised there
                    self._finish_error = exc
                    return
                finally:
                    self.times.swap_s += time.perf_counter() - t
                    self.times.swap_inference_s += self._clock() - model_t
            t = time.perf_counter()
            try:
                self._sink.write(memoryview(np.ascontiguousarray(frame)).cast("B"))
            except (OSError, ValueError) as exc:  # BrokenPipeError: the encoder exited; ValueError: pipe closed
                self._write_error = exc
                return
            finally:
                self.times.encode_s += time.perf_counter() - t

    def _offer(self, q: queue.Queue, item) -> bool:
        """Put `item` on `q`, giving up (False) once the pipe is being closed."""
        while not self._stop.is_set():
            try:
                q.put(item, timeout=POLL_S)
                return True
            except queue.Full:
                continue
        return False


def read_frame(stream: IO[bytes], shape: tuple[int, int, int]) -> np.ndarray | None:
    """The next whole frame, None at a clean end of stream; TargetError for half a frame."""
    frame = np.empty(shape, np.uint8)
    view = memoryview(frame).cast("B")
    got = 0
    while got < len(view):
        n = stream.readinto(view[got:])
        if not n:
            break
        got += n
    if got == 0:
        return None
    if got < len(view):
        raise TargetError("the video decoder stopped in the middle of a frame")
    return frame
