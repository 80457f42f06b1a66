"""The worker's video path on a 1080p single-face clip: frames/s end to end, where the time goes,
and what the CPU spends per frame besides the models.

    .venv/bin/python bench/worker_pipeline.py [--runs 3] [--frames 100] [--engine insightface|classic]

Runs the worker's own code (`worker.process.process_target`: the decoder, the face work and the
encoder overlapping in `worker.pipeline`) on a generated 1920x1080 clip of one face (ffmpeg
zoompan over scikit-image's astronaut photo scaled to the frame's height: a face about 230 pixels
wide, a medium shot; with a sound track), swapping in insightface's Tom_Hanks_54745.png, as a task
would. Printed per
run, then min/median/max over the runs:

- frames/s end to end (probe, decode, faces, encode, mux);
- each stage's busy share of the wall time (decode, face work, the swap in the writer thread,
  encode) and the models' own
  share (`session.run`, `worker.engines.timing`), and where ffmpeg ran (`worker.hwcodec`);
- CPU-side ms/frame: the CPU time of the worker process and its ffmpeg children over the video,
  minus the models' run time, per frame. ONNX Runtime may run a model on two threads, so this
  subtracts at most what the models cost: an overestimate of the CPU side, never an underestimate.
  It is split into the worker process's part (frames through pipes, pre/post-processing,
  alignment, paste-back) and ffmpeg's (decoding, colour conversion, libx264 or NVENC);
- the face work alone: the same worker code and pipeline over 40 of the clip's frames held in
  memory (three passes a run, the median one), with no decoder, encoder or OS pipe beside it:
  CPU ms per frame besides the models. This is what stays on the CPU of a GPU node where NVDEC
  and NVENC take the codecs (their own CPU share, the copy of each frame off the GPU and its
  colour conversion, cannot be measured here);
- with nvidia-smi: GPU busy % (utilization.gpu sampled every 50 ms) and peak GPU memory.

Models: the real insightface models when $FACEFUSION_MODELS_DIR holds them with the right SHA-256;
otherwise the synthetic test models (tests/worker/fake_models.py), and then it SAYS so: their
timings say nothing about the real models' speed, only about everything around them.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.video_steadiness import tom_hanks_path  # noqa: E402

WIDTH, HEIGHT, FPS = 1920, 1080, 25


def make_clip(out: Path, frames: int) -> Path:
    """1920x1080, `frames` frames at 25 fps, one face slowly zoomed into, with a 440 Hz tone."""
    import cv2
    from skimage import data

    photo = out.with_name("astronaut.png")
    cv2.imwrite(str(photo), np.asarray(data.astronaut())[:, :, ::-1])
    vf = (f"scale=-2:{HEIGHT},pad={WIDTH}:{HEIGHT}:(ow-iw)/2:0,"
          f"zoompan=z='min(zoom+0.002,1.2)':d={frames}:s={WIDTH}x{HEIGHT}:fps={FPS}")
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-loop", "1", "-i", str(photo),
                    "-f", "lavfi", "-i", f"sine=frequency=440:sample_rate=48000:duration={frames / FPS}",
                    "-vf", vf, "-frames:v", str(frames), "-map", "0:v", "-map", "1:a", "-c:v", "libx264",
                    "-crf", "18", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest", str(out)], check=True)
    return out


class GpuSampler:
    """utilization.gpu and memory.used of every GPU, every 50 ms, while the video runs."""

    def __init__(self) -> None:
        self.busy: list[float] = []
        self.memory: list[int] = []
        self.baseline: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def read() -> tuple[float, int] | None:
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu,memory.used",
                                  "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=5).stdout
            rows = [[float(v) for v in line.split(",")] for line in out.strip().splitlines()]
            return max(r[0] for r in rows), int(sum(r[1] for r in rows))
        except (OSError, ValueError, IndexError, subprocess.SubprocessError):
            return None

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            got = self.read()
            if got:
                self.busy.append(got[0])
                self.memory.append(got[1])

    def __enter__(self) -> "GpuSampler":
        first = self.read()
        self.baseline = first[1] if first else None
        if first is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def figures(self) -> dict:
        if not self.busy:
            return {"gpu": "none (no nvidia-smi answer)"}
        return {"gpu_busy_percent_mean": round(statistics.fmean(self.busy), 1),
                "gpu_memory_peak_mib_above_idle": max(self.memory) - (self.baseline or 0)}


def load_swapper(engine_name: str):
    from worker.engines import load_engine
    from worker.errors import ModelError
    from worker.manifest import EngineOptions
    from worker.process import build_swapper
    from worker.weights import INSIGHTFACE_MODELS, verify_models

    models_dir, registry, models = os.environ.get("FACEFUSION_MODELS_DIR"), None, "real"
    if engine_name == "insightface":
        try:
            verify_models(models_dir, INSIGHTFACE_MODELS)
        except ModelError as exc:
            from tests.worker.fake_models import build_fake_models

            print(f"real models not usable ({exc}); using the SYNTHETIC test models: their timings say "
                  "nothing about the real models, only about the work around them")
            models_dir = tempfile.mkdtemp(prefix="ffp-fake-models-")
            registry, models = build_fake_models(models_dir), "synthetic"
    else:
        models = "dlib (classic engine)"
    engine = load_engine(engine_name, models_dir, registry)
    swapper = build_swapper(engine, [str(tom_hanks_path())], EngineOptions(name=engine_name))
    return swapper, models


def cpu_seconds(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def run_once(swapper, clip: Path, out: Path) -> dict:
    from worker.process import process_target

    self0, kids0 = cpu_seconds(resource.RUSAGE_SELF), cpu_seconds(resource.RUSAGE_CHILDREN)
    with GpuSampler() as gpu:
        began = time.perf_counter()
        outcome = process_target(swapper, clip, out)
        wall = time.perf_counter() - began
    self1, kids1 = cpu_seconds(resource.RUSAGE_SELF), cpu_seconds(resource.RUSAGE_CHILDREN)
    if outcome.status != "done":
        raise SystemExit(f"the worker did not swap the clip: {outcome.status} {outcome.message}")
    st = outcome.stages
    n = st.frames
    worker_ms = (self1 - self0 - st.models_s) / n * 1000
    ffmpeg_ms = (kids1 - kids0) / n * 1000
    busy = st.busy()
    return {
        "frames": n,
        "frames_per_s": n / wall,
        "busy_decode": busy["decode"], "busy_face_work": busy["face work"], "busy_swap": busy.get("swap", 0.0),
        "busy_encode": busy["encode"],
        "models_share_of_face_work": st.models_s / (st.work_s + st.swap_s) if st.work_s else 0.0,
        "cpu_ms_per_frame": worker_ms + ffmpeg_ms,
        "cpu_ms_worker_process": worker_ms,
        "cpu_ms_ffmpeg": ffmpeg_ms,
        "codecs": outcome.codecs,
        **gpu.figures(),
    }


#: frames held in memory for the face-work-alone measure (6 MB each at 1080p)
ALONE_FRAMES = 40
#: passes over the held frames per run; the run reports the median pass (one 40-frame pass on this
#: 2-core VM varied by +-15 % from the next)
ALONE_PASSES = 3


def decoded_frames(clip: Path, count: int) -> bytes:
    return subprocess.run(["ffmpeg", "-v", "error", "-i", str(clip), "-frames:v", str(count), "-f", "rawvideo",
                           "-pix_fmt", "bgr24", "-"], capture_output=True, check=True).stdout


class NullSink:
    """An encoder that takes every frame at once."""

    def write(self, data) -> int:
        return len(data)

    def close(self) -> None:
        pass


def face_work_alone(swapper, raw: bytes) -> dict:
    """The face work of frames already decoded into memory, through the worker's own pipeline (its
    reader and writer threads, the swap of frame N in the writer while frame N+1's faces are
    found) with no decoder, encoder or OS pipes beside it: the worker's own CPU cost per frame
    besides the models, i.e. what stays on the CPU when a GPU node's NVDEC and NVENC take the codecs."""
    import io

    from worker.pipeline import FramePipe, handed_over

    clock = getattr(swapper.engine, "inference_seconds", lambda: 0.0)
    pipe = FramePipe(io.BytesIO(raw), NullSink(), (HEIGHT, WIDTH, 3), clock=clock)
    steady = swapper.video_state()
    c0, t0 = cpu_seconds(resource.RUSAGE_SELF), time.perf_counter()
    try:
        for frame in pipe.frames():
            t, m = time.perf_counter(), clock()
            result = swapper.plan_frame(frame, steady)
            pipe.add_work(time.perf_counter() - t, clock() - m)
            new, _, _, finish = handed_over(result)  # as worker.video does
            pipe.put(new, finish)
        pipe.finish()
    finally:
        pipe.close()
    wall = time.perf_counter() - t0
    cpu, st = cpu_seconds(resource.RUSAGE_SELF) - c0, pipe.times
    n = st.frames
    return {"cpu_ms_face_work_alone": (cpu - st.models_s) / n * 1000, "models_ms_alone": st.models_s / n * 1000,
            "wall_ms_face_work_alone": wall / n * 1000}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--frames", type=int, default=100)
    ap.add_argument("--engine", choices=("insightface", "classic"), default="insightface")
    args = ap.parse_args()

    from worker.pipeline import set_opencv_threads

    threads = set_opencv_threads()  # as `python -m worker run` does
    work = Path(tempfile.mkdtemp(prefix="ffp-pipeline-"))
    clip = make_clip(work / "one-face-1080p.mp4", args.frames)
    swapper, models = load_swapper(args.engine)
    print(f"engine {swapper.engine.name} on {swapper.engine.device}, models: {models}; "
          f"{os.cpu_count()} CPU core(s) visible, {len(os.sched_getaffinity(0))} usable; "
          f"OpenCV threads: {threads or 'its default'} ($FFP_OPENCV_THREADS)")
    held = decoded_frames(clip, ALONE_FRAMES)
    runs = []
    for i in range(args.runs):
        r = run_once(swapper, clip, work / f"out-{i}.mp4")
        passes = sorted((face_work_alone(swapper, held) for _ in range(ALONE_PASSES)),
                        key=lambda p: p["cpu_ms_face_work_alone"])
        r.update(passes[len(passes) // 2])
        runs.append(r)
        print(f"run {i + 1}: {r['frames_per_s']:.1f} frames/s; busy decode {r['busy_decode']:.0%}, "
              f"face work {r['busy_face_work']:.0%}, swap (writer thread) {r['busy_swap']:.0%} (models "
              f"{r['models_share_of_face_work']:.0%} of the two), "
              f"encode {r['busy_encode']:.0%}; CPU-side {r['cpu_ms_per_frame']:.1f} ms/frame "
              f"(worker {r['cpu_ms_worker_process']:.1f}, ffmpeg {r['cpu_ms_ffmpeg']:.1f}); {r['codecs']}; "
              f"face work alone {r['cpu_ms_face_work_alone']:.1f} ms CPU/frame besides the models "
              f"({r['models_ms_alone']:.1f} ms models, {r['wall_ms_face_work_alone']:.1f} ms wall)")
    summary = {}
    for key in ("frames_per_s", "cpu_ms_per_frame", "cpu_ms_worker_process", "cpu_ms_ffmpeg", "busy_decode",
                "busy_face_work", "busy_swap", "busy_encode", "cpu_ms_face_work_alone", "wall_ms_face_work_alone"):
        values = sorted(r[key] for r in runs)
        summary[key] = {"min": round(values[0], 3), "median": round(statistics.median(values), 3),
                        "max": round(values[-1], 3)}
    for key in ("gpu_busy_percent_mean", "gpu_memory_peak_mib_above_idle"):
        if key in runs[-1]:
            summary[key] = [r[key] for r in runs]
    print(json.dumps({"clip": f"{WIDTH}x{HEIGHT}, {args.frames} frames, one face", "models": models,
                      "codecs": runs[-1]["codecs"], "runs": args.runs, **summary}, indent=2))
    for p in work.iterdir():
        p.unlink()
    work.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
