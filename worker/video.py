"""Videos: probe, then stream frames decoder -> frame_fn -> encoder, then add the source's audio.

No frame ever touches the disk: ffmpeg decodes to raw BGR on a pipe, `frame_fn` changes each frame,
a second ffmpeg encodes from a pipe. The three overlap (`worker.pipeline`: a reader and a writer
thread, bounded queues), and on a GPU node ffmpeg decodes and encodes on the GPU where it can
(`worker.hwcodec`). Only the encoded temp files live in a private temporary folder
(under `tmp_root`, else $TMPDIR: Slurm nodes usually point that at local scratch), and the result
reaches `dst` only when everything succeeded (copied to a short temporary name next to it, then renamed over `dst`). Both
ffmpeg processes are killed and waited for, and the temp folder removed, on every way out,
including SIGTERM once `worker.signals.install_sigterm_handler()` is installed.

Command lines and format choices (odd sizes, colours, audio, .webm) are in `worker.ffmpeg`.
"""
from __future__ import annotations

import functools
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable

import numpy as np

from . import ffmpeg as ff
from . import hwcodec
from .errors import TargetError
from .ffmpeg import VideoInfo
from .imageio import part_path, pixel_limit_error, require_nonempty_file
from .pipeline import EncoderGone, FramePipe, StageTimes, check_frame, handed_over, widen_pipe
from .provenance import metadata_args
from .signals import Terminated

log = logging.getLogger("worker.video")

FrameFn = Callable[[np.ndarray], "tuple[np.ndarray, int, int]"]
ProgressFn = Callable[[int, "int | None"], None]

PROBE_TIMEOUT_S = 120
MUX_TIMEOUT_S = 600
#: frames a source may lack against its own header before a decode with errors counts as truncated
#: (edit lists legitimately hide a few frames of an intact MP4)
MISSING_FRAMES_TOLERATED = 2


@dataclass
class VideoResult:
    frames: int
    faces_found: int  # summed over all frames (detections x frames: not a number of people)
    faces_swapped: int
    audio: str = "none"  # "copied", "re-encoded to AAC" or "none"
    #: the most faces seen (and swapped) in any one frame: how many people the video shows at once
    most_faces_found: int = 0
    most_faces_swapped: int = 0
    #: where the time went (`worker.pipeline.StageTimes`)
    stages: StageTimes | None = None
    #: where it was decoded and encoded (`worker.hwcodec.Codecs.describe()`)
    codecs: str = ""


@functools.lru_cache(maxsize=1)
def ffmpeg_version() -> tuple[int, int] | None:
    try:
        out = subprocess.run([ff.FFMPEG, "-version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return ff.parse_version(out)


def stderr_tail(text: str | bytes, max_lines: int = 4, max_chars: int = 400) -> str:
    """The last lines ffmpeg wrote, without its `[mov,mp4 @ 0x55d...]` pointer noise, on one line."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    lines = [re.sub(r"\s*@ 0x[0-9a-f]+\]", "]", ln).strip() for ln in text.splitlines()]
    tail = " | ".join([ln for ln in lines if ln][-max_lines:])
    return tail[-max_chars:]


def _run(cmd: list[str], timeout: float) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    except FileNotFoundError:
        raise TargetError(f"{cmd[0]} is not installed on this node; videos cannot be processed") from None
    except subprocess.TimeoutExpired:
        raise TargetError(f"{cmd[0]} took longer than {timeout:.0f} s and was stopped") from None


def probe_video(path: str | os.PathLike, name: str | None = None, max_pixels: int | None = None) -> VideoInfo:
    """Read a video's size, rate, frame count, audio and rotation; TargetError in plain words for
    missing, empty, truncated or non-video files. `name`: the video's name in messages (default:
    `path`'s own; see `worker.targetfile`). `max_pixels`: TargetError `too_many_pixels` when any
    video stream's picture is bigger (nothing over it is decoded, not even by ffprobe)."""
    path = require_nonempty_file(path, name)
    name = name or path.name
    proc = _run(ff.probe_command(path.absolute(), max_pixels), PROBE_TIMEOUT_S)
    err = proc.stderr.decode("utf-8", "replace").replace(ff.file_url(path.absolute()) + ": ", "")
    if max_pixels is not None:
        try:
            data = json.loads(proc.stdout or b"{}")
        except json.JSONDecodeError:
            data = {}
        width, height = ff.largest_picture(data, err)
        if width * height > max_pixels:
            raise pixel_limit_error(name, width, height, max_pixels)
    if proc.returncode != 0:
        if "moov atom not found" in err and _looks_like_mp4(path):
            raise TargetError(f"{name} is truncated or damaged (its index is missing, typical of an "
                              "interrupted upload or recording); upload the complete file again", "damaged_video", name=name)
        raise TargetError(f"{name} is not a video this worker can read ({stderr_tail(err, 1)}); "
                          "upload an MP4, MOV, MKV or WebM file", "not_a_video", name=name)
    try:
        data = json.loads(proc.stdout or b"{}")
    except json.JSONDecodeError:
        raise TargetError(f"{name}: ffprobe gave an unreadable answer") from None
    return ff.parse_probe(data, name)


def _looks_like_mp4(path: Path) -> bool:
    """An MP4/MOV starts with a box such as `ftyp`; a text or other file that ffmpeg only tried as
    MP4 because of its name does not (then it is "not a video", not "truncated")."""
    with open(path, "rb") as fh:
        head = fh.read(8)
    return head[4:8] in (b"ftyp", b"moov", b"mdat", b"free", b"wide", b"skip", b"pnot", b"uuid")


def process_video(src: str | os.PathLike, dst: str | os.PathLike, frame_fn: FrameFn, *,
                  tmp_root: str | os.PathLike | None = None, progress_every: int = 25,
                  on_progress: ProgressFn | None = None, name: str | None = None,
                  poster: str | os.PathLike | None = None, label: dict | None = None, gpu: int | None = None,
                  inference_seconds: Callable[[], float] | None = None,
                  cancel: threading.Event | None = None, max_pixels: int | None = None) -> VideoResult:
    """Write `src` with every frame replaced by `frame_fn(frame)[0]` to `dst` (.mp4/.mov/.mkv).

    `frame_fn(bgr)` gets a writable uint8 (H, W, 3) BGR array, upright, and returns (frame of the
    same shape, faces_found, faces_swapped), or a `worker.pipeline.Later` whose `finish` the writer
    thread runs. `on_progress(frames_done, frames_total)` is called every
    `progress_every` frames and at the end (the last call has frames_total == frames_done); frames_total is
    the container's count or an estimate from the duration, None if neither is known.
    The output has the source's frame count, rate, display size and audio streams. Raises
    TargetError (with ffmpeg's last words) when the source cannot be read or ffmpeg fails;
    `dst` is then left untouched. `name`: the source's name in messages (default: `src`'s own).
    `poster`: where to write, once, a small JPEG of the first changed frame that had a face swapped
    (else of the frame of the first progress report), before the video is done: the job page shows
    it while the video runs. A poster that cannot be written is only logged.
    `label`: the provenance label, written into the container's metadata (`worker.provenance`).
    `gpu`: the CUDA device the faces run on: ffmpeg decodes and encodes there too where it can
    (`worker.hwcodec`). `inference_seconds()`: the engine's running total of model time, for the
    stage times (`VideoResult.stages`). `cancel`: once set, the video stops at its next frame with
    `worker.signals.Terminated` (a task's other GPU threads, `worker.gpus`). `max_pixels`: a
    video with a bigger picture in any stream is refused before a frame is decoded, and a frame
    bigger than its header said stops the decoder (`worker.ffmpeg.max_pixels_args`).
    """
    src, dst = Path(src), Path(dst)
    name = name or src.name
    container = ff.container_for(dst.name)  # before any work: a wrong name is the caller's bug
    info = probe_video(src, name, max_pixels)
    part = part_path(dst)
    with tempfile.TemporaryDirectory(prefix="video-", dir=tmp_root) as tmp:
        try:
            video = Path(tmp) / "video.mp4"
            codecs = hwcodec.codecs_for(gpu)
            run = functools.partial(_transcode, src.absolute(), video, info, frame_fn, Path(tmp),
                                    max(1, int(progress_every)), on_progress, name, Path(poster) if poster else None,
                                    inference_seconds=inference_seconds, cancel=cancel, max_pixels=max_pixels)
            try:
                frames, counts, stages = run(codecs)
            except TargetError:
                if codecs.encode_gpu is None:
                    raise
                # NVENC passed its probe but failed on this video (its sessions all taken, say): the
                # video is done again on the CPU encoder rather than lost.
                log.warning("NVENC failed on GPU %s for %s; encoding on the CPU instead", codecs.encode_gpu, name)
                hwcodec.nvenc_failed(codecs.encode_gpu)
                codecs = hwcodec.codecs_for(gpu)
                frames, counts, stages = run(codecs)
            log.info("video %s (%s): %s", name, codecs.describe(), stages.summary())
            muxed = Path(tmp) / f"out{dst.suffix.lower()}"
            audio = _mux(video, src.absolute(), muxed, container, info, label)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(muxed), part)  # a copy when TMPDIR is another file system
            os.replace(part, dst)
        finally:
            part.unlink(missing_ok=True)
    return VideoResult(frames=frames, faces_found=counts.found, faces_swapped=counts.swapped, audio=audio,
                       most_faces_found=counts.most_found, most_faces_swapped=counts.most_swapped,
                       stages=stages, codecs=codecs.describe())


def _kill(proc: subprocess.Popen | None) -> None:
    """Kill (if still running) and reap a child: its pipes then end, so no thread stays blocked on them."""
    if proc is None:
        return
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def _close_pipes(proc: subprocess.Popen | None) -> None:
    for pipe in (proc.stdin, proc.stdout) if proc is not None else ():
        if pipe:
            try:
                pipe.close()
            except OSError:  # BrokenPipeError flushing a dead encoder's stdin
                pass


@dataclass
class FaceCounts:
    """Faces over a video's frames: summed, and the most in any one frame."""

    found: int = 0
    swapped: int = 0
    most_found: int = 0
    most_swapped: int = 0

    def add(self, found: int, swapped: int) -> None:
        self.found, self.swapped = self.found + found, self.swapped + swapped
        self.most_found, self.most_swapped = max(self.most_found, found), max(self.most_swapped, swapped)


def _transcode(src: Path, out: Path, info: VideoInfo, frame_fn: FrameFn, tmp: Path,
               progress_every: int, on_progress: ProgressFn | None, name: str,
               poster: Path | None, codecs: hwcodec.Codecs, *,
               inference_seconds: Callable[[], float] | None = None,
               cancel: threading.Event | None = None,
               max_pixels: int | None = None) -> tuple[int, FaceCounts, StageTimes]:
    version = ffmpeg_version()
    shape = (info.height, info.width, 3)
    total = info.estimated_frames
    done = 0
    counts = FaceCounts()
    reported: tuple[int, int | None] = (0, 0)
    dec = enc = pipe = None
    clock = inference_seconds or (lambda: 0.0)
    # stderr goes to files, not pipes: nobody has to drain it, so it can never block ffmpeg
    with open(tmp / "decode.log", "w+b") as dec_log, open(tmp / "encode.log", "w+b") as enc_log:
        try:
            try:
                dec = subprocess.Popen(ff.decode_command(src, info.stream_index, version, gpu=codecs.decode_gpu,
                                                         max_pixels=max_pixels),
                                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=dec_log)
                enc = subprocess.Popen(ff.encode_command(info.width, info.height, info.fps, out, sar=info.sar,
                                                         version=version, nvenc_gpu=codecs.encode_gpu),
                                       stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=enc_log)
            except FileNotFoundError:
                raise TargetError("ffmpeg is not installed on this node; videos cannot be processed") from None
            widen_pipe(dec.stdout)
            widen_pipe(enc.stdin)
            pipe = FramePipe(dec.stdout, enc.stdin, shape, clock=clock)
            try:
                for frame in pipe.frames():
                    if cancel is not None and cancel.is_set():
                        raise Terminated()
                    t, model_t = time.perf_counter(), clock()
                    result = frame_fn(frame)
                    pipe.add_work(time.perf_counter() - t, clock() - model_t)
                    # with a `finish`, the frame's swap is left to the writer thread (worker.pipeline.Later)
                    new, f, s, finish = handed_over(result)
                    check_frame(new, shape, "frame_fn")
                    done += 1
                    counts.add(int(f), int(s))
                    if poster is not None and (int(s) > 0 or done == progress_every):
                        if finish is None:
                            write_poster(poster, new)
                        else:
                            finish = _then_poster(finish, poster)
                        poster = None  # once
                    pipe.put(new, finish)
                    if on_progress and done % progress_every == 0:
                        reported = (done, max(total, done) if total else None)
                        on_progress(*reported)
                dec_rc = dec.wait()
                dec_err = _log_tail(dec_log)
                if dec_rc != 0 or done == 0:
                    raise TargetError(f"the video cannot be decoded{f' after {done} frames' if done else ''} "
                                      f"({dec_err or f'ffmpeg exit status {dec_rc}'})")
                if dec_err and total and done + MISSING_FRAMES_TOLERATED < total:
                    raise TargetError(f"{name} is truncated or damaged: only {done} of {total} frames could be "
                                      f"decoded ({dec_err}); upload the complete file again")
                pipe.finish()
            except EncoderGone:
                enc.wait()
                raise TargetError(f"video encoding failed ({_log_tail(enc_log) or f'exit status {enc.returncode}'})") from None
            if enc.wait() != 0:
                raise TargetError(f"video encoding failed ({_log_tail(enc_log) or f'exit status {enc.returncode}'})")
        finally:
            _kill(dec)
            _kill(enc)
            if pipe is not None:
                pipe.close()
            _close_pipes(dec)
            _close_pipes(enc)
    if on_progress and reported != (done, done):  # the last call always says "all frames done"
        on_progress(done, done)
    return done, counts, pipe.times


#: a poster's longest side, in pixels (the job page's thumbnails are as big)
POSTER_SIDE = 320


def write_poster(path: Path, bgr: np.ndarray) -> bool:
    """A small JPEG of the frame `bgr` at `path`, written aside and renamed (a reader never sees
    half of it). False (and logged) when it cannot be written: a poster is never worth a video."""
    from PIL import Image

    part = part_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        picture = Image.fromarray(np.ascontiguousarray(bgr[..., ::-1]))
        picture.thumbnail((POSTER_SIDE, POSTER_SIDE))
        picture.save(part, "JPEG", quality=82)
        os.replace(part, path)
        return True
    except (OSError, ValueError) as exc:
        log.warning("no poster at %s: %s", path, exc)
        return False
    finally:
        part.unlink(missing_ok=True)


def _then_poster(finish: Callable[[np.ndarray], np.ndarray], poster: Path) -> Callable[[np.ndarray], np.ndarray]:
    """`finish`, then the poster written from the finished frame (in the writer thread)."""

    def run(frame: np.ndarray) -> np.ndarray:
        out = finish(frame)
        write_poster(poster, out)
        return out

    return run


def _log_tail(log: IO[bytes]) -> str:
    log.flush()
    log.seek(0)
    return stderr_tail(log.read()[-8192:])


def _mux(video: Path, src: Path, out: Path, container: str, info: VideoInfo, label: dict | None = None) -> str:
    """Add the source's audio (and the provenance label) to the encoded video; returns what
    happened to the audio."""
    meta = metadata_args(label)
    audio = ff.audio_args(container, info.audio_codecs)
    proc = _run(ff.mux_command(video, src, out, container, audio, meta), MUX_TIMEOUT_S)
    if proc.returncode != 0 and audio is not None and audio != ff.AAC_ARGS:
        # stream copy refused (a codec the container does not take): re-encode only the audio
        audio = list(ff.AAC_ARGS)
        proc = _run(ff.mux_command(video, src, out, container, audio, meta), MUX_TIMEOUT_S)
    if proc.returncode != 0:
        raise TargetError(f"adding the audio to the video failed ({stderr_tail(proc.stderr)})")
    if audio is None:
        return "none"
    return "copied" if audio == ["-c:a", "copy"] else "re-encoded to AAC"
