"""worker.pipeline (the decode/face-work/encode threads and their bounded queues) on real OS pipes,
worker.hwcodec's choice of decoder and encoder, and the stage times a video reports."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from tests.waiting import settled, wait_until
from worker import ffmpeg as ff
from worker import hwcodec
from worker.errors import TargetError
from worker.pipeline import PIPE_BYTES, EncoderGone, FramePipe, Later, queue_depth, set_opencv_threads, widen_pipe
from worker.video import process_video

SHAPE = (128, 128, 3)  # 48 KiB a frame: a pipe's own buffer (64 KiB) holds about one


def _frame(i: int) -> np.ndarray:
    return np.full(SHAPE, i % 256, np.uint8)


class Source:
    """A real pipe fed by a thread with frames 0..n-1 (plus `tail` stray bytes); counts what it wrote."""

    def __init__(self, n: int, tail: bytes = b""):
        r, w = os.pipe()
        self.reader = os.fdopen(r, "rb")
        self._w = os.fdopen(w, "wb", buffering=0)
        self.written = 0
        self._t = threading.Thread(target=self._feed, args=(n, tail), daemon=True)
        self._t.start()

    def _feed(self, n: int, tail: bytes) -> None:
        try:
            for i in range(n):
                self._w.write(_frame(i).tobytes())
                self.written += 1
            self._w.write(tail)
        except (BrokenPipeError, ValueError, OSError):
            pass
        finally:
            try:
                self._w.close()
            except OSError:
                pass


class Sink:
    """A real pipe whose other end a thread reads frames from (or never reads, `drain=False`)."""

    def __init__(self, drain: bool = True):
        r, w = os.pipe()
        self._r = os.fdopen(r, "rb")
        self.writer = os.fdopen(w, "wb")
        self.frames: list[int] = []
        if drain:
            threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        size = int(np.prod(SHAPE))
        while chunk := self._r.read(size):
            self.frames.append(int(np.frombuffer(chunk, np.uint8)[0]))

    def close_reading_end(self) -> None:
        self._r.close()


def _drained(sink: Sink, n: int) -> list[int]:
    """The frames `sink` got, once it has `n` of them (its thread reads them on its own schedule)."""
    wait_until(lambda: len(sink.frames) >= n)
    return sink.frames


def test_frames_come_out_in_order_changed_by_the_caller():
    src, sink = Source(30), Sink()
    pipe = FramePipe(src.reader, sink.writer, SHAPE)
    try:
        for frame in pipe.frames():
            pipe.put(frame + 1)
        pipe.finish()
    finally:
        pipe.close()
    assert _drained(sink, 30) == [i + 1 for i in range(30)]
    assert pipe.times.frames == 30


def test_a_stalled_encoder_holds_back_the_decoder_memory_stays_at_a_few_frames():
    src, sink = Source(200), Sink(drain=False)
    pipe = FramePipe(src.reader, sink.writer, SHAPE, depth=2)
    taken = []

    def work():
        try:
            for frame in pipe.frames():
                taken.append(1)
                pipe.put(frame)
        except EncoderGone:
            pass

    t = threading.Thread(target=work, daemon=True)
    t.start()
    # Wait for the stall itself: frames flow until every stage is blocked, then the counts stop.
    written, took = settled(lambda: (src.written, len(taken)))
    assert t.is_alive()  # the caller is blocked in put(), not gone
    # The caller holds one frame and the writer one, with the encoder's queue full between them;
    # the reader holds one, with the decoder's queue full before the caller: at least that went by.
    assert took >= pipe.depth + 2, took
    assert written >= took + pipe.depth + 1, (written, took)
    # queues of 2, one frame in each thread's hands, ~1 in each pipe's buffer: nowhere near 200
    assert written <= 12, written
    assert took <= 8, took
    sink.close_reading_end()  # the encoder "dies": the writer's write fails, the caller hears of it
    t.join(30)
    assert not t.is_alive()
    pipe.close()
    src.reader.close()


def test_an_encoder_that_exits_is_reported_to_the_caller():
    src, sink = Source(50), Sink(drain=False)
    sink.close_reading_end()
    pipe = FramePipe(src.reader, sink.writer, SHAPE)
    with pytest.raises(EncoderGone):
        for frame in pipe.frames():
            pipe.put(frame)
        pipe.finish()
    pipe.close()


def test_half_a_frame_at_the_end_is_an_error_in_plain_words():
    src, sink = Source(3, tail=b"x" * 1000), Sink()
    pipe = FramePipe(src.reader, sink.writer, SHAPE)
    with pytest.raises(TargetError, match="stopped in the middle of a frame"):
        for frame in pipe.frames():
            pipe.put(frame)
    pipe.close()


def test_stage_times_show_where_the_time_went():
    src, sink = Source(10), Sink()
    pipe = FramePipe(src.reader, sink.writer, SHAPE)
    try:
        for frame in pipe.frames():
            t = time.perf_counter()
            # The "face work" takes real time: the times under test are measured, and the wall time
            # must cover it; nothing to wait for instead.
            time.sleep(0.02)
            pipe.add_work(time.perf_counter() - t, 0.01)
            pipe.put(frame)
        pipe.finish()
    finally:
        pipe.close()
    st = pipe.times
    assert st.frames == 10 and st.work_s >= 0.2 and st.inference_s == pytest.approx(0.1)
    assert st.wall_s >= st.work_s
    assert "10 frames in" in st.summary() and set(st.busy()) == {"decode", "face work", "encode"}


def test_queue_depth_follows_the_frame_size():
    assert queue_depth((1080, 1920, 3)) == 8
    assert queue_depth((2160, 3840, 3)) == 2
    assert queue_depth((240, 320, 3)) == 8


# -- where ffmpeg decodes and encodes -------------------------------------------------------------

def test_the_commands_use_the_gpu_only_when_asked():
    assert "-hwaccel" not in ff.decode_command("/in/a.mp4", 0, (6, 0))
    assert ff.decode_command("/in/a.mp4", 0, (6, 0), gpu=1)[4:8] == ["-hwaccel", "cuda", "-hwaccel_device", "1"]
    cpu = ff.encode_command(320, 240, 25, "/t/v.mp4")
    assert cpu[cpu.index("-c:v"):cpu.index("-c:v") + 2] == ["-c:v", "libx264"]
    gpu = ff.encode_command(320, 240, 25, "/t/v.mp4", nvenc_gpu=1, version=(6, 0))
    assert ["-c:v", "h264_nvenc", "-gpu", "1", "-preset", "p4"] == gpu[gpu.index("-c:v"):gpu.index("-c:v") + 6]
    assert "-crf" not in gpu and "-cq" in gpu
    assert ff.encoder_args(0, (4, 2))[4:6] == ["-preset", "slow"]  # before the SDK 10 presets


@pytest.fixture
def fresh_probes():
    hwcodec.forget()
    yield
    hwcodec.forget()


def test_without_a_gpu_everything_stays_on_the_cpu(fresh_probes):
    assert hwcodec.codecs_for(None) == hwcodec.CPU_ONLY
    assert hwcodec.codecs_for(0, env={"FFP_VIDEO_HARDWARE": "off"}) == hwcodec.CPU_ONLY
    # this machine's ffmpeg lists h264_nvenc, but there is no NVIDIA driver: both probes fail
    assert hwcodec.codecs_for(0) == hwcodec.CPU_ONLY


def test_working_probes_put_decode_and_encode_on_the_tasks_gpu(fresh_probes, tmp_path, monkeypatch):
    fake = tmp_path / "ffmpeg"
    fake.write_text("#!/bin/sh\necho \"$@\" >> \"$0.calls\"\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setattr(ff, "FFMPEG", str(fake))
    assert hwcodec.codecs_for(1) == hwcodec.Codecs(decode_gpu=1, encode_gpu=1)
    assert hwcodec.codecs_for(1).describe() == "decode on the GPU, encode with NVENC"
    calls = Path(f"{fake}.calls").read_text().splitlines()
    assert len(calls) == 2  # probed once per GPU and kind, then remembered
    hwcodec.nvenc_failed(1)
    assert hwcodec.codecs_for(1) == hwcodec.Codecs(decode_gpu=1, encode_gpu=None)


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    import subprocess

    out = tmp_path_factory.mktemp("pipeline") / "c.mp4"
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=2",
                    "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", str(out)], check=True)
    return out


def test_a_video_reports_its_stage_times_and_codecs(clip, tmp_path, fresh_probes):
    res = process_video(clip, tmp_path / "o.mp4", lambda f: (255 - f, 1, 1), inference_seconds=lambda: 0.0)
    assert res.frames == 50 and res.stages.frames == 50
    assert res.codecs == "decode on the CPU, encode with libx264"
    assert 0 < res.stages.work_s <= res.stages.wall_s


def test_an_encoder_failing_on_the_gpu_is_retried_on_the_cpu(clip, tmp_path, fresh_probes, monkeypatch, caplog):
    real = hwcodec.codecs_for

    def nvenc_first(gpu, env=os.environ):
        if gpu == 0 and 0 not in hwcodec._nvenc_failed:
            return hwcodec.Codecs(decode_gpu=None, encode_gpu=0)  # as if the probe had passed
        return real(None, env)

    monkeypatch.setattr(hwcodec, "codecs_for", nvenc_first)
    seen = []
    res = process_video(clip, tmp_path / "o.mp4", lambda f: (seen.append(1) or f, 0, 0), gpu=0)
    assert res.frames == 50 and res.codecs == "decode on the CPU, encode with libx264"
    assert len(seen) >= 50  # the frames were done again, none lost
    assert 0 in hwcodec._nvenc_failed and "NVENC failed on GPU 0" in caplog.text


def test_a_cancelled_video_stops_at_its_next_frame(clip, tmp_path):
    from worker.signals import Terminated

    cancel = threading.Event()

    n = []

    def work(frame):
        n.append(1)
        if len(n) == 5:
            cancel.set()
        return frame, 0, 0

    with pytest.raises(Terminated):
        process_video(clip, tmp_path / "o.mp4", work, cancel=cancel, tmp_root=tmp_path)
    assert not (tmp_path / "o.mp4").exists()
    assert [p.name for p in tmp_path.iterdir()] == []


def test_frame_pipes_are_widened_and_a_file_that_is_no_pipe_is_left_alone(tmp_path):
    """1 MiB pipes: a 1080p frame in 6 reads instead of ~100 (half the reader's CPU per frame)."""
    r, w = os.pipe()
    with os.fdopen(r, "rb") as reader, os.fdopen(w, "wb") as writer:
        assert widen_pipe(reader) == PIPE_BYTES
        # what was promised is there: a whole MiB written without a reader, no blocking
        os.set_blocking(writer.fileno(), False)
        assert os.write(writer.fileno(), bytes(PIPE_BYTES)) == PIPE_BYTES
    with open(tmp_path / "plain", "wb") as plain:
        assert widen_pipe(plain) is None


@pytest.fixture
def opencv_threads():
    import cv2

    before = cv2.getNumThreads()
    yield cv2
    cv2.setNumThreads(before)


def test_a_task_runs_opencv_on_one_thread_unless_told_otherwise(opencv_threads, caplog):
    cv2 = opencv_threads
    cv2.setNumThreads(-1)
    default = cv2.getNumThreads()
    assert set_opencv_threads({}) == 1 and cv2.getNumThreads() == 1
    assert set_opencv_threads({"FFP_OPENCV_THREADS": "0"}) == 0 and cv2.getNumThreads() == default
    assert set_opencv_threads({"FFP_OPENCV_THREADS": "3"}) == 3 and cv2.getNumThreads() == 3
    assert set_opencv_threads({"FFP_OPENCV_THREADS": "many"}) == 1 and cv2.getNumThreads() == 1
    assert "FFP_OPENCV_THREADS='many' is not a whole number; using 1" in caplog.text


def test_a_frames_last_step_runs_in_the_writer_while_the_caller_goes_on():
    """`put(frame, finish)`: the writer thread finishes frame N (the swap) while the caller works on
    frame N+1; the frames still reach the encoder in order, each finished once."""
    src, sink = Source(30), Sink()
    pipe = FramePipe(src.reader, sink.writer, SHAPE, clock=time.thread_time)
    threads = set()

    def finish(frame):
        threads.add(threading.current_thread().name)
        frame += 2  # in place, as the swap does
        return frame

    try:
        for i, frame in enumerate(pipe.frames()):
            pipe.put(frame, finish if i % 3 else None)  # mixed, as frames with and without faces are
        pipe.finish()
    finally:
        pipe.close()
    assert _drained(sink, 30) == [i + 2 if i % 3 else i for i in range(30)]
    assert threads == {"video-encode"}
    assert pipe.times.swap_s > 0 and "swap" in pipe.times.busy()


def test_what_a_frames_last_step_raises_reaches_the_caller_as_it_was():
    src, sink = Source(30), Sink()
    pipe = FramePipe(src.reader, sink.writer, SHAPE)

    def finish(frame):
        if frame[0, 0, 0] == 4:
            raise MemoryError("ran out of GPU memory")
        return frame

    with pytest.raises(MemoryError, match="ran out of GPU memory"):
        try:
            for frame in pipe.frames():
                pipe.put(frame, finish)
            pipe.finish()
        finally:
            pipe.close()
    assert _drained(sink, 4) == [0, 1, 2, 3]  # what came before it was written; nothing after it


def test_a_last_step_returning_the_wrong_frame_is_a_plain_error():
    src, sink = Source(3), Sink()
    pipe = FramePipe(src.reader, sink.writer, SHAPE)
    with pytest.raises(ValueError, match="must return a uint8 array of shape"):
        try:
            for frame in pipe.frames():
                pipe.put(frame, lambda f: f[:1])
            pipe.finish()
        finally:
            pipe.close()


def test_a_video_of_later_frames_is_the_same_video_and_its_poster_shows_the_finished_frame(clip, tmp_path):
    def now(frame):
        return 255 - frame, 1, 1

    def later(frame):
        return Later(frame, 1, 1, lambda f: np.subtract(255, f, out=f))

    a = process_video(clip, tmp_path / "a.mp4", now, poster=tmp_path / "a.jpg")
    b = process_video(clip, tmp_path / "b.mp4", later, poster=tmp_path / "b.jpg")
    assert a.frames == b.frames == 50 and a.faces_swapped == b.faces_swapped == 50
    assert b.stages.swap_s > 0
    assert _decoded(tmp_path / "a.mp4") == _decoded(tmp_path / "b.mp4")
    assert (tmp_path / "a.jpg").read_bytes() == (tmp_path / "b.jpg").read_bytes()


def _decoded(path: Path) -> bytes:
    import subprocess

    return subprocess.run(["ffmpeg", "-v", "error", "-i", str(path), "-f", "rawvideo", "-pix_fmt", "bgr24", "-"],
                          capture_output=True, check=True).stdout


def test_a_video_whose_swap_fails_in_the_writer_fails_with_that_error_and_leaves_nothing(clip, tmp_path):
    """The writer's error reaches the task as it was (the target's note says what happened, e.g.
    the GPU ran out of memory), both ffmpeg processes are stopped, and nothing is left behind."""
    n = []

    def later(frame):
        n.append(1)

        def finish(f):
            if len(n) >= 5:
                raise MemoryError("ran out of GPU memory")
            return f

        return Later(frame, 1, 1, finish)

    with pytest.raises(MemoryError, match="ran out of GPU memory"):
        process_video(clip, tmp_path / "o.mp4", later, tmp_root=tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == []
