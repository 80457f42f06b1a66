"""How a face moved between two frames, measured on its pixels (Lucas-Kanade optical flow).

`worker.tracking` keeps one `FlowCrop` per tracked face: the grey pixels around the face in the
last frame, scaled so the face is at most FLOW_FACE_WIDTH wide. In the next frame the same place is
read (`same_place`), the face's corners are followed from one to the other (`motion_to`), and the
pixels just read become the next crop while the face is still well inside them (`moved_on`), so
most frames read one crop per face, not two.
"""
from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

#: a frame-to-frame motion of a face: z -> m * z + c on complex points (a 2-D similarity)
Motion = tuple[complex, complex]

#: optical flow: corners looked for per face, and the smallest number that makes a motion
FLOW_CORNERS = 48
FLOW_MIN_POINTS = 8


#: the face's width in the flow's crop, in pixels: a larger face is measured on a scaled-down crop,
#: so the cost per face stays the same however close the camera is (LK is accurate to a tenth of a
#: pixel, which this keeps well under a pixel of the full frame)
FLOW_FACE_WIDTH = 160


@dataclass
class FlowCrop:
    """The grey pixels around one face in one frame, kept for measuring its motion into the next.

    Kept instead of the frame itself: the frame is then free to be swapped in place (a 1080p frame
    is 6 MB, a crop a few dozen KB), and the flow still sees the faces as they were filmed."""

    #: the crop's rectangle in the frame (x1, y1, x2, y2)
    region: tuple[int, int, int, int]
    #: the crop's scale against the frame (1, or less for a face wider than FLOW_FACE_WIDTH)
    scale: float
    grey: np.ndarray
    #: where the face's box lies in `grey` (x1, y1, x2, y2, in crop pixels)
    inner: tuple[int, int, int, int]
    #: the frame's (height, width): a crop is only compared with a frame of the same size
    frame_size: tuple[int, int]
    #: the face's width (frame pixels) in the frame the crop is of
    box_width: float

    def same_place(self, frame: np.ndarray) -> np.ndarray | None:
        """`frame`'s grey pixels at this crop's place and scale; None for a frame of another size."""
        if frame.shape[:2] != self.frame_size:
            return None
        return _grey_crop(frame, *self.region, self.scale)

    def motion_to(self, grey: np.ndarray) -> Motion | None:
        """How the face moved from this crop to `grey` (`same_place` of the next frame)."""
        return _motion(self, grey)

    def moved_on(self, grey: np.ndarray, box) -> "FlowCrop | None":
        """This place's pixels of the next frame (`grey`) as the crop for the face now at `box`, or
        None when the face has moved too near the crop's edge or changed size too much (then a new
        crop is cut around it): the face keeps at least REUSE_ROOM of its size inside the crop on
        every side the frame goes on, and its width within REUSE_SIZE_CHANGE of the last frame's (a
        slow zoom soon fails the room instead: a face in the middle of its crop may grow by a ninth)."""
        x1, y1, x2, y2 = (float(v) for v in box)
        bw, bh = x2 - x1, y2 - y1
        if bw <= 0 or bh <= 0 or abs(bw / self.box_width - 1.0) > REUSE_SIZE_CHANGE:
            return None
        rx1, ry1, rx2, ry2 = self.region
        h, w = self.frame_size
        room_x, room_y = REUSE_ROOM * bw, REUSE_ROOM * bh
        if not ((x1 - rx1 >= room_x or rx1 == 0) and (y1 - ry1 >= room_y or ry1 == 0)
                and (rx2 - x2 >= room_x or rx2 == w) and (ry2 - y2 >= room_y or ry2 == h)):
            return None
        return FlowCrop(self.region, self.scale, grey, _inner(self.region, self.scale, box, grey.shape),
                        self.frame_size, bw)


#: a crop is used again for the next frame while the face keeps this much of its size as room on
#: every side (a new crop gives it half) ...
REUSE_ROOM = 0.4
#: ... and its width changes by less than this fraction from one frame to the next
REUSE_SIZE_CHANGE = 0.1


def _inner(region, scale: float, box, shape) -> tuple[int, int, int, int]:
    """Where `box` (frame pixels) lies in a crop of `region` at `scale` (crop pixels, clipped)."""
    rows, cols = shape[:2]
    x1, y1, x2, y2 = box
    cx1, cy1 = region[0], region[1]
    return (int(min(cols, max(0, (x1 - cx1) * scale))), int(min(rows, max(0, (y1 - cy1) * scale))),
            int(min(cols, max(0, (x2 - cx1) * scale))), int(min(rows, max(0, (y2 - cy1) * scale))))


def flow_crop(frame: np.ndarray, box) -> FlowCrop | None:
    """The crop of `frame` (BGR or grey) that `face_motion` measures the face in `box` on: the box
    with half its size of room on every side, so the flow's search stays inside it. None when the
    face is (nearly) off the frame."""
    h, w = frame.shape[:2]
    x1, y1, x2, y2 = box
    bw, bh = x2 - x1, y2 - y1
    cx1, cy1 = int(max(0, x1 - bw / 2)), int(max(0, y1 - bh / 2))
    cx2, cy2 = int(min(w, x2 + bw / 2)), int(min(h, y2 + bh / 2))
    if cx2 - cx1 < 16 or cy2 - cy1 < 16:
        return None
    scale = min(1.0, FLOW_FACE_WIDTH / max(bw, 1.0))
    grey = _grey_crop(frame, cx1, cy1, cx2, cy2, scale)
    return FlowCrop((cx1, cy1, cx2, cy2), scale, grey, _inner((cx1, cy1), scale, box, grey.shape), (h, w), float(bw))


def face_motion(prev: np.ndarray | FlowCrop, cur: np.ndarray, box=None) -> Motion | None:
    """How the face moved from the previous frame to `cur` (BGR or grey), as a similarity, measured
    by Lucas-Kanade flow of corners inside its box (RANSAC drops the ones that slid or hid).
    `prev`: the previous frame's `flow_crop` around the face (or the previous frame itself, with
    the face's `box`). None when too little texture or agreement to say."""
    a = prev if isinstance(prev, FlowCrop) else flow_crop(prev, box)
    grey = a.same_place(cur) if a is not None else None
    return a.motion_to(grey) if grey is not None else None


def _motion(a: FlowCrop, b: np.ndarray) -> Motion | None:
    pts = _corners(a)
    if pts is None or len(pts) < FLOW_MIN_POINTS:
        return None
    nxt, status, _ = cv2.calcOpticalFlowPyrLK(a.grey, b, pts, None, winSize=(21, 21), maxLevel=3)
    ok = status.ravel() == 1
    if ok.sum() < FLOW_MIN_POINTS:
        return None
    m, inliers = cv2.estimateAffinePartial2D(pts[ok], nxt[ok], method=cv2.RANSAC, ransacReprojThreshold=1.0)
    if m is None or inliers is None or inliers.sum() < FLOW_MIN_POINTS:
        return None
    scale_rot = complex(m[0, 0], m[1, 0])
    shift = complex(m[0, 2], m[1, 2]) / a.scale  # a shift of the scaled crop, in frame pixels
    # back to frame coordinates: z -> s * (z - o) + t + o, o the crop's corner
    o = complex(a.region[0], a.region[1])
    return scale_rot, shift + o - scale_rot * o


#: pixels of room kept around the face's box when looking for corners: a pixel's corner measure
#: reads two pixels around it (3x3 gradients summed over a 3x3 block), and keeping only local maxima
#: one more; with this room the result is the same as over the whole crop (checked frame for frame)
CORNER_ROOM = 3


def _corners(a: FlowCrop) -> np.ndarray | None:
    """Up to FLOW_CORNERS good corners inside the face's box in crop `a` (crop coordinates): the
    same as looking over the whole crop with the box as a mask, on a quarter of the pixels."""
    ix1, iy1, ix2, iy2 = a.inner
    rows, cols = a.grey.shape[:2]
    ox, oy = max(0, ix1 - CORNER_ROOM), max(0, iy1 - CORNER_ROOM)
    roi = a.grey[oy:min(rows, iy2 + CORNER_ROOM), ox:min(cols, ix2 + CORNER_ROOM)]
    mask = np.zeros_like(roi)
    mask[iy1 - oy:iy2 - oy, ix1 - ox:ix2 - ox] = 255
    pts = cv2.goodFeaturesToTrack(roi, FLOW_CORNERS, 0.01, max(3.0, a.box_width * a.scale / 16), mask=mask)
    if pts is not None:
        pts += np.float32([ox, oy])
    return pts


def _grey_crop(frame: np.ndarray, x1: int, y1: int, x2: int, y2: int, scale: float) -> np.ndarray:
    crop = frame[y1:y2, x1:x2]
    if crop.ndim == 3:
        crop = cv2.cvtColor(crop, cv2.COLOR_BGR2GRAY)
    if scale < 1.0:
        size = (max(1, int(round((x2 - x1) * scale))), max(1, int(round((y2 - y1) * scale))))
        # halved (Gaussian pyramid) while over twice the size, then bilinear: bilinear down to half
        # size still reads every pixel, so nothing aliases; 4 to 5 times cheaper than INTER_AREA
        # at the odd ratios face sizes give (0.8 -> 0.18 ms for a 360-pixel face)
        while crop.shape[1] > 2 * size[0] and crop.shape[0] > 2 * size[1]:
            crop = cv2.pyrDown(crop)
        crop = cv2.resize(crop, size, interpolation=cv2.INTER_LINEAR)
    return crop
