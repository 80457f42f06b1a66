"""Steady faces in video: track each person across frames and smooth their landmarks over time.

A detector looks at every frame afresh, so a still face's landmarks wobble by a pixel or two and
the box around it jumps between pyramid scales; a swap that follows those landmarks shimmers, and a
selection made per frame can change its mind mid-clip. Here each face gets a track that lasts as
long as the person is on screen, and the track keeps:

- one decision (swap this person or not), made the first time they are seen;
- one alignment, smoothed by two One-Euro filters (Casiez et al., CHI 2012): the face's rigid
  motion (similarity: position, scale, rotation, fitted on the landmarks that do not move with the
  expression), and its shape in its own frame (expression: where single-point noise lives).
  A One-Euro filter smooths hard while the signal is still and opens up as it moves. The rigid
  motion from one frame to the next is also measured on the pixels (Lucas-Kanade flow of corners
  in the face box): the filter then compares each detection with the last steady pose carried
  along by that motion, so a hand-held shake or a sudden jump is followed at once while the
  detector's own wobble (its box jumping between pyramid scales) is smoothed away.

Plain numpy, no engine and no Django: `worker.process` feeds it detections and swaps what it
returns. Units are frames (not seconds): a filter's cut-offs are in cycles per frame.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .engines.base import Face
from .flow import FlowCrop, Motion, face_motion, flow_crop  # noqa: F401  (face_motion, flow_crop: this module's API)


class OneEuro:
    """A One-Euro low-pass filter over an array of values sampled once per frame.

    cut-off = min_cutoff + beta * speed, per element, where speed is the (low-passed) change per
    frame divided by `scale` (so the same settings fit a small and a large face).
    """

    def __init__(self, min_cutoff: float, beta: float, d_cutoff: float = 0.1):
        self.min_cutoff, self.beta, self.d_cutoff = min_cutoff, beta, d_cutoff
        self.value: np.ndarray | None = None
        self.slope: np.ndarray | None = None

    @staticmethod
    def _alpha(cutoff):
        tau = 1.0 / (2 * math.pi * cutoff)
        return 1.0 / (1.0 + tau)  # one frame per sample

    def __call__(self, x: np.ndarray, scale: float = 1.0, prior: np.ndarray | None = None) -> np.ndarray:
        """The filtered value for sample `x`. `prior`: where the last value has moved to since (motion
        measured otherwise, e.g. optical flow); the filter then only smooths what the motion does not
        explain, so following known motion costs no lag."""
        x = np.asarray(x, dtype=np.float64)
        if self.value is None:
            self.value, self.slope = x.copy(), np.zeros_like(x)
            return self.value.copy()
        base = self.value if prior is None else np.asarray(prior, dtype=np.float64)
        a_d = self._alpha(self.d_cutoff)
        self.slope = a_d * (x - base) + (1 - a_d) * self.slope
        cutoff = self.min_cutoff + self.beta * np.abs(self.slope) / max(scale, 1e-9)
        a = self._alpha(cutoff)
        self.value = a * x + (1 - a) * base
        return self.value.copy()


@dataclass(frozen=True)
class SteadyParams:
    """Tuning, in frames and fractions of the face size (see `bench/video_steadiness.py`)."""

    #: rigid motion (position, scale, rotation). With frames, the filter compares each detection
    #: with the last steady pose carried along by optical flow, so it can smooth hard; the values
    #: were picked on a shaken photo whose true motion is known (detector wobble left: 0.04 -> 0.004
    #: of the inter-ocular distance per frame^2). Without frames (`update(faces)` alone) they would lag
    #: behind real motion: `worker.process` always passes the frame.
    pose_min_cutoff: float = 0.03
    pose_beta: float = 2.0
    #: shape in the face's own frame (expression): opens up as the mouth or brows move
    shape_min_cutoff: float = 0.02
    shape_beta: float = 2.0
    #: a detection belongs to a track when their boxes overlap at least this much (IoU) ...
    min_iou: float = 0.3
    #: ... or, failing that, when its centre is within this fraction of the track's box width
    max_centre_shift: float = 0.5
    #: frames a person may go undetected and still be swapped where they were (a detector that
    #: misses a face for a frame would otherwise make the swap blink), and kept for matching
    hold_frames: int = 2
    forget_frames: int = 8


def _complex(points: np.ndarray) -> np.ndarray:
    pts = np.asarray(points, dtype=np.float64)
    return pts[:, 0] + 1j * pts[:, 1]


def _points(z: np.ndarray) -> np.ndarray:
    return np.stack([z.real, z.imag], axis=1)


def rigid_points(n: int) -> np.ndarray | slice:
    """The landmarks that move with the head but not with the expression, to fit its motion on:
    brows, nose and eyes of dlib's 68 points; eyes and nose of the 5-point layout; else all.
    (A mouth opening must change the face's shape, not its position.)"""
    if n == 68:
        return np.r_[17:48]
    if n == 5:
        return np.r_[0:3]
    return slice(None)


def fit_similarity(src: np.ndarray, dst: np.ndarray) -> tuple[complex, complex]:
    """(a, b) with dst ~ a * src + b for complex point arrays: a 2-D similarity in least squares."""
    ms, md = src.mean(), dst.mean()
    s = src - ms
    a = np.vdot(s, dst - md) / max(np.vdot(s, s).real, 1e-12)
    return complex(a), complex(md - a * ms)


def iou(a, b) -> float:
    ax1, ay1, ax2, ay2 = a
    bx1, by1, bx2, by2 = b
    w, h = min(ax2, bx2) - max(ax1, bx1), min(ay2, by2) - max(ay1, by1)
    if w <= 0 or h <= 0:
        return 0.0
    inter = w * h
    return inter / ((ax2 - ax1) * (ay2 - ay1) + (bx2 - bx1) * (by2 - by1) - inter)


@dataclass
class Track:
    """One person across frames. `decision`: swap them or not (None until decided)."""

    id: int
    shape: np.ndarray  # reference shape: complex, centred, unit size; the frame the shape filter works in
    pose_filter: OneEuro
    shape_filter: OneEuro
    box: np.ndarray
    face: Face  # the last steady face
    missed: int = 0
    decision: bool | None = None
    #: left as is in the last frame, turned toward profile (the engine's rule, with hysteresis)
    turned: bool = False
    motion: complex = 0j  # last frame-to-frame shift of the steady face, for the frames it is missed

    @property
    def width(self) -> float:
        return float(self.box[2] - self.box[0]) or 1.0


@dataclass
class Steady:
    """One face to (maybe) swap in this frame: `face` is the steady one, `detected` the detector's
    own (None while the person is held through a missed frame)."""

    track: Track
    face: Face
    detected: Face | None


@dataclass
class SteadyFaces:
    """Per-video state: the tracks alive so far. `update(faces)` once per frame, in order."""

    params: SteadyParams = field(default_factory=SteadyParams)
    tracks: list[Track] = field(default_factory=list)
    next_id: int = 1
    #: the people (track ids) left as they are in some frame, turned toward profile, and in how many
    #: frames someone was: for the video's note (`worker.process.Swapper._not_turned` keeps them)
    left_as_is: set[int] = field(default_factory=set)
    frames_left_as_is: int = 0
    #: the previous frame's crop around each track's face (`flow_crop`), by track id
    _crops: dict[int, FlowCrop] = field(default_factory=dict, repr=False)

    def update(self, faces: list[Face], image: np.ndarray | None = None) -> list[Steady]:
        """The faces of this frame, tracked and steadied. `image` (BGR, the frame the faces were
        found in): with it, each face's motion since the last frame is measured on the pixels
        (optical flow), so the smoothing removes the detector's wobble but not the real motion.
        Only crops of `image` are kept: once this returns, the frame may be changed in place."""
        p = self.params
        motions: dict[int, Motion] = {}
        now: dict[int, np.ndarray] = {}  # this frame's grey pixels where each face was
        if image is not None:
            for t in self.tracks:
                crop = self._crops.get(t.id)
                grey = crop.same_place(image) if crop is not None else None
                if grey is None:
                    continue
                now[t.id] = grey
                m = crop.motion_to(grey)
                if m is not None:
                    motions[id(t)] = m
        pairs = self._match(faces, motions)
        matched_tracks = {id(t) for t, _ in pairs}
        matched_faces = {id(f) for _, f in pairs}
        out = [Steady(t, self._follow(t, f, motions.get(id(t))), f) for t, f in pairs]
        for t in self.tracks:
            if id(t) in matched_tracks:
                continue
            t.missed += 1
            if t.missed <= p.hold_frames:
                _hold(t, motions.get(id(t)))
                out.append(Steady(t, t.face, None))
        self.tracks = [t for t in self.tracks if t.missed <= p.forget_frames]
        for f in faces:
            if id(f) not in matched_faces:
                t = self._start(f)
                self.tracks.append(t)
                out.append(Steady(t, t.face, f))
        # where each face is now, for measuring its motion into the next frame: the pixels just read
        # where it was, while the face is still well inside them (`FlowCrop.moved_on`), else a new crop
        crops, self._crops = self._crops, {}
        if image is not None:
            for t in self.tracks:
                old, grey = crops.get(t.id), now.get(t.id)
                crop = old.moved_on(grey, t.box) if old is not None and grey is not None else None
                crop = crop or flow_crop(image, t.box)
                if crop is not None:
                    self._crops[t.id] = crop
        return out

    def _match(self, faces: list[Face], motions: dict[int, Motion]) -> list[tuple[Track, Face]]:
        """Greedy: best overlaps first, then nearest centres for what overlapped too little. A track's
        box is first moved by its measured motion, if any."""
        p = self.params
        cand = []
        for t in self.tracks:
            box = _moved_box(t.box, motions.get(id(t)))
            tc = _centre(box)
            for f in faces:
                o = iou(box, f.bbox)
                d = abs(_centre(f.bbox) - tc) / t.width
                if o >= p.min_iou or d <= p.max_centre_shift:
                    cand.append((-o, d, t, f))
        cand.sort(key=lambda c: (c[0], c[1]))
        used_t, used_f, pairs = set(), set(), []
        for _, _, t, f in cand:
            if id(t) in used_t or id(f) in used_f:
                continue
            used_t.add(id(t))
            used_f.add(id(f))
            pairs.append((t, f))
        return pairs

    def _start(self, f: Face) -> Track:
        p = self.params
        z = _complex(f.landmarks)
        ref = z - z.mean()
        ref /= math.sqrt(np.vdot(ref, ref).real / len(ref)) or 1.0
        t = Track(id=self.next_id, shape=ref, pose_filter=OneEuro(p.pose_min_cutoff, p.pose_beta),
                  shape_filter=OneEuro(p.shape_min_cutoff, p.shape_beta), box=np.asarray(f.bbox, np.float64),
                  face=f)
        self.next_id += 1
        t.face = self._follow(t, f, new=True)
        return t

    def _follow(self, t: Track, f: Face, motion: Motion | None = None, new: bool = False) -> Face:
        """The steady version of detection `f` of track `t`; updates the track."""
        z = _complex(f.landmarks)
        rigid = rigid_points(len(z))
        a, b = fit_similarity(t.shape[rigid], z[rigid])
        if abs(a) < 1e-9:  # all points on one spot: no shape to follow, keep the size as it was
            v = t.pose_filter.value
            a = complex(v[0], v[1]) if v is not None else 1 + 0j
        size = abs(a) or 1.0
        # pose: (a, b) as four numbers in pixels; speed relative to the face's size. The last
        # steady pose, carried along by the measured motion, is what the detection is compared to.
        prior = None if motion is None or new else _moved_pose(t.pose_filter.value, motion)
        pose = t.pose_filter(np.array([a.real, a.imag, b.real, b.imag]), scale=size, prior=prior)
        a_s, b_s = complex(pose[0], pose[1]), complex(pose[2], pose[3])
        # shape in the face's own frame (unit size): what is left once the rigid motion is removed
        own = (z - b) / a
        shape = t.shape_filter(np.concatenate([own.real, own.imag]), scale=1.0)
        steady = a_s * (shape[: len(z)] + 1j * shape[len(z):]) + b_s
        box = np.asarray(f.bbox, np.float64)
        # the box moves with the steady face, keeping the detector's size around it
        shift = (steady - z).mean()
        box = box + np.array([shift.real, shift.imag] * 2)
        if not new:
            t.motion = (steady.mean() - _complex(t.face.landmarks).mean())
            t.missed = 0
        t.box = box
        # the head-turn points are the detection's own: only the swap's landmarks need to be steady
        t.face = Face(bbox=tuple(float(v) for v in box), landmarks=_points(steady), score=f.score,
                      pose_landmarks=f.pose_landmarks)
        return t.face


def _centre(box) -> complex:
    return complex((box[0] + box[2]) / 2, (box[1] + box[3]) / 2)


def _moved_box(box: np.ndarray, motion: Motion | None) -> np.ndarray:
    if motion is None:
        return box
    m, c = motion
    z = m * np.array([box[0] + 1j * box[1], box[2] + 1j * box[3]]) + c
    return np.array([z[0].real, z[0].imag, z[1].real, z[1].imag])


def _moved_pose(pose: np.ndarray, motion: Motion) -> np.ndarray:
    """A pose (a, b) (points = a * shape + b) after the points moved by z -> m * z + c."""
    m, c = motion
    a, b = m * complex(pose[0], pose[1]), m * complex(pose[2], pose[3]) + c
    return np.array([a.real, a.imag, b.real, b.imag])


def _hold(t: Track, motion: Motion | None) -> None:
    """Carry a missed track one frame on: by its measured motion, else by its last shift."""
    if motion is None:
        motion = (1 + 0j, t.motion)
    m, c = motion
    z = m * _complex(t.face.landmarks) + c
    t.box = _moved_box(t.box, motion)
    # a held face keeps its last head-turn points: a turn is measured, not guessed
    t.face = Face(bbox=tuple(float(v) for v in t.box), landmarks=_points(z), score=t.face.score,
                  pose_landmarks=t.face.pose_landmarks)
    if t.pose_filter.value is not None:
        t.pose_filter.value = _moved_pose(t.pose_filter.value, motion)


def decide(items: list[Steady], mode: str, choose: Callable[[list[Face]], list[Face]]) -> list[Face]:
    """The steady faces to swap in this frame, each person decided once, the first time seen.

    `choose(detected_faces)`: the selector's choice among newly seen faces (`worker.selection`).
    With mode "one", a new person is only chosen while nobody chosen is on screen, so the swap
    does not jump to whoever is largest in this frame.
    """
    fresh = [it for it in items if it.track.decision is None and it.detected is not None]
    if fresh:
        taken = mode == "one" and any(it.track.decision for it in items)
        picked = [] if taken else choose([it.detected for it in fresh])
        ids = {id(f) for f in picked}
        for it in fresh:
            it.track.decision = id(it.detected) in ids
    # in the order the people were first seen, the same from frame to frame
    return [it.face for it in sorted(items, key=lambda it: it.track.id) if it.track.decision]
