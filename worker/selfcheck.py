"""Did the swap take? Each face swapped in a photo, looked at again by the engine's own recogniser.

A swap can run without error and still not do what the user wanted: the new face came out too weak
to change who the person looks like, or the blend smeared the face so that no face is found there
any more. Nobody should have to open 10,000 results to find those. After a photo is swapped, each
swapped face is found again in the result (in a window around where it was, so the check costs a
small fraction of a whole-photo detection) and its identity vector compared with two others:
  - the face photo's (`Identity.embedding`), and
  - the face it replaced (the original, in the target photo).
A face that is still closer to the original than to the face photo "still looks like the person in
the photo"; one that cannot be found again is "lost". The result is kept either way: the check only
flags it for a look ("needs a look" on the job page), the user decides.

The engine's recogniser is the one that steered the swap, so it is a lenient judge (an independent
one, as in bench/quality.py, would be stricter): a face it flags did not take even by its own
measure. Videos are not checked here: their faces are tracked and decided once per person
(worker.tracking), and the frames of a clip would need a judge of their own.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: the codes a target's record carries (`TargetRecord.check`); "" when every swapped face took
NOT_TAKEN = "not_taken"  # params: faces (how many did not take), of (how many were swapped)
FACE_LOST = "face_lost"  # params: faces, of: no face found again where it was swapped
CODES = frozenset({NOT_TAKEN, FACE_LOST})

#: how far around a swapped face the result is searched, as a fraction of the face's size
WINDOW_MARGIN = 0.5
#: a face found again must overlap the one swapped this much (intersection over union)
SAME_PLACE_IOU = 0.3


@dataclass(frozen=True)
class SwapCheck:
    code: str = ""
    params: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.code


def window(box, shape, margin: float = WINDOW_MARGIN) -> tuple[int, int, int, int]:
    """`box` (x1, y1, x2, y2) grown by `margin` of its size on every side, kept inside an image of `shape`."""
    x1, y1, x2, y2 = box
    dx, dy = (x2 - x1) * margin, (y2 - y1) * margin
    h, w = shape[:2]
    return max(0, int(x1 - dx)), max(0, int(y1 - dy)), min(w, int(x2 + dx)), min(h, int(y2 + dy))


def overlap(a, b) -> float:
    """Intersection over union of two (x1, y1, x2, y2) boxes."""
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def check_swap(engine, identity, before: np.ndarray, after: np.ndarray, faces: list) -> SwapCheck:
    """Whether each of `faces` (found in `before`, swapped into `after`) took: see the module."""
    lost = not_taken = 0
    for face in faces:
        x1, y1, x2, y2 = window(face.bbox, after.shape)
        part = np.ascontiguousarray(after[y1:y2, x1:x2])
        here = (face.bbox[0] - x1, face.bbox[1] - y1, face.bbox[2] - x1, face.bbox[3] - y1)
        found = [f for f in engine.detect(part) if overlap(f.bbox, here) >= SAME_PLACE_IOU]
        if not found:
            lost += 1
            continue
        now = engine.embed(part, max(found, key=lambda f: overlap(f.bbox, here)))
        original = face.embedding if face.embedding is not None else engine.embed(before, face)
        if float(np.dot(now, original)) >= float(np.dot(now, identity.embedding)):
            not_taken += 1
    if lost and not not_taken:
        return SwapCheck(FACE_LOST, {"faces": lost, "of": len(faces)})
    if lost or not_taken:
        return SwapCheck(NOT_TAKEN, {"faces": lost + not_taken, "of": len(faces)})
    return SwapCheck()
