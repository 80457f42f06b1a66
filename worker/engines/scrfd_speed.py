"""Two speed-ups of insightface's SCRFD detector (insightface 2.x) that change no result, bit for bit.

On a 1080p frame the detector's own Python and OpenCV work around the model cost more of the CPU
than anything else the worker does per frame (docs/worker.md):
- `DetectorBlob`: its input blob from the letterboxed frame, ~9x cheaper than `cv2.dnn.blobFromImage`;
- `positive_forward`: the boxes and keypoints decoded for the anchors over the score threshold only
  (a few dozen), not for all 16,800 of a 640x640 input before throwing nearly all of them away;
- `downscaling_candidates`: a frame an odd whole multiple of the detector's letterbox (1080p for
  640x360) scaled down by picking pixels, which is what bilinear scaling does there, at under half
  the cost.

`install(det)` puts them on one SCRFD object where its insightface has the hooks (2.x); with any
other layout it leaves the detector as it is (slower, same results). The tests compare every box,
score and keypoint against insightface's own code on real photos with the real SCRFD model.
"""
from __future__ import annotations

import threading

import cv2
import numpy as np


class DetectorBlob:
    """SCRFD's input blob (RGB, (v - mean) / std, NCHW float) from its letterboxed BGR frame, as
    `cv2.dnn.blobFromImage` makes it, bit for bit: one float32 look-up table per channel, written
    straight into a buffer kept per thread.

    The buffer is reused from frame to frame: ONNX Runtime's `run` has finished with its input when
    it returns, and each thread (one per GPU, `worker.gpus`) has its own.
    """

    def __init__(self, mean: float, std: float, dtype=np.float32):
        self.mean, self.std = float(mean), float(std)
        self.table = ((np.arange(256, dtype=np.float64) - mean) / std).astype(np.float32)
        self.dtype = np.dtype(dtype)
        self._local = threading.local()

    def __call__(self, img: np.ndarray, input_size) -> np.ndarray:
        width, height = int(input_size[0]), int(input_size[1])
        if img.shape[:2] != (height, width) or img.ndim != 3 or img.shape[2] != 3 or img.dtype != np.uint8 \
                or self.dtype != np.float32:
            # what insightface itself does, for anything but a uint8 BGR image already at the input size
            blob = cv2.dnn.blobFromImage(img, 1.0 / self.std, (width, height), (self.mean,) * 3, swapRB=True)
            return np.ascontiguousarray(blob, dtype=self.dtype)
        blob = getattr(self._local, "blob", None)
        if blob is None or blob.shape != (1, 3, height, width):
            blob = self._local.blob = np.empty((1, 3, height, width), np.float32)
        channels = cv2.split(img)
        for plane, channel in zip(blob[0], reversed(channels)):  # BGR in, RGB out
            cv2.LUT(channel, self.table, dst=plane)
        return blob


def anchor_centres(det, rows: int, cols: int, stride: int) -> np.ndarray:
    """The (x, y) of every anchor of one stride, in the order of the model's outputs (row by row,
    each place repeated once per anchor), float32; kept in the detector's own cache."""
    key = (rows, cols, stride)
    centres = det.center_cache.get(key)
    if centres is None:
        ys, xs = np.mgrid[:rows, :cols]
        centres = (np.stack([xs, ys], axis=-1).astype(np.float32) * stride).reshape(-1, 2)
        if det._num_anchors > 1:
            centres = np.repeat(centres, det._num_anchors, axis=0)
        if len(det.center_cache) < 100:
            det.center_cache[key] = centres
    return centres


def positive_forward(det):
    """A replacement for `det.forward(img, threshold)`: the same (scores, boxes, keypoints) per
    stride, in the same order, decoded only where the score passes the threshold."""

    def forward(img: np.ndarray, threshold: float):
        input_size = (img.shape[1], img.shape[0])
        blob = det._prepare_input_blob(img, input_size)
        outs = det._session_for_input_size(input_size).run(det.output_names, {det.input_name: blob})
        rows, cols = blob.shape[2], blob.shape[3]
        fmc = det.fmc

        def out(k: int) -> np.ndarray:
            return outs[k][0] if det.batched else outs[k]

        scores_list, boxes_list, kps_list = [], [], []
        for idx, stride in enumerate(det._feat_stride_fpn):
            scores = out(idx)
            keep = np.where(scores >= threshold)[0]
            centres = anchor_centres(det, rows // stride, cols // stride, stride)[keep]
            dist = out(idx + fmc)[keep] * stride
            scores_list.append(scores[keep])
            boxes_list.append(np.stack([centres[:, 0] - dist[:, 0], centres[:, 1] - dist[:, 1],
                                        centres[:, 0] + dist[:, 2], centres[:, 1] + dist[:, 3]], axis=-1))
            if det.use_kps:
                kps = out(idx + 2 * fmc)[keep] * stride
                kps_list.append(kps.reshape(len(keep), kps.shape[1] // 2, 2) + centres[:, None, :])
        return scores_list, boxes_list, kps_list

    return forward


def letterbox_size(shape, input_size) -> tuple[int, int]:
    """(width, height) SCRFD scales a frame of `shape` to inside its `input_size` letterbox: insightface
    2.x's own arithmetic (`SCRFD._detect_candidates`)."""
    im_ratio = float(shape[0]) / shape[1]
    if im_ratio > float(input_size[1]) / input_size[0]:
        return int(input_size[1] / im_ratio), int(input_size[1])
    return int(input_size[0]), int(input_size[0] * im_ratio)


def exact_downscale(img: np.ndarray, size: tuple[int, int]) -> np.ndarray | None:
    """`cv2.resize(img, size)` (bilinear) bit for bit where `img` is an odd whole multiple k of `size`
    on both axes, else None. There output pixel x samples the input at (x + 0.5) * k - 0.5 =
    k * x + (k - 1) / 2, a pixel's centre, so bilinear scaling only picks pixels: OpenCV's
    nearest-exact scaling picks the same ones, 0.39 ms instead of 0.87 for 1080p to 640x360 (one core)."""
    width, height = size
    rows, cols = img.shape[:2]
    if width <= 0 or height <= 0 or cols % width or rows % height:
        return None
    kx, ky = cols // width, rows // height
    if kx % 2 == 0 or ky % 2 == 0 or kx == ky == 1:
        return None
    return cv2.resize(img, (width, height), interpolation=cv2.INTER_NEAREST_EXACT)


def downscaling_candidates(det):
    """A replacement for `det._detect_candidates(img, input_size, threshold)`: the same candidates,
    bit for bit, with the frame scaled to the letterbox by `exact_downscale` where it can be. The
    detector then gets the scaled frame (its own resize of it is a copy), and its boxes and
    keypoints are divided by the frame's scale as insightface divides them (float32 by a Python
    float), so that NMS and everything after it sees the very same numbers."""
    original = det._detect_candidates

    def candidates(img: np.ndarray, input_size, threshold: float):
        new_width, new_height = letterbox_size(img.shape, input_size)
        small = exact_downscale(img, (new_width, new_height))
        if small is None:
            return original(img, input_size, threshold)
        pre_det, kpss = original(small, input_size, threshold)  # at scale 1: divided by 1.0, unchanged
        det_scale = float(new_height) / img.shape[0]
        pre_det = np.hstack((pre_det[:, :4] / det_scale, pre_det[:, 4:]))
        if kpss is not None:
            kpss = kpss / det_scale
        return pre_det, kpss

    return candidates


def install(det) -> bool:
    """The speed-ups on `det` (an insightface SCRFD); False where its layout is not the one they
    were checked against (then nothing is changed)."""
    needed = ("_prepare_input_blob", "_session_for_input_size", "center_cache", "_num_anchors", "fmc",
              "_feat_stride_fpn", "use_kps", "batched", "output_names", "input_name", "input_mean", "input_std",
              "_detect_candidates")
    if not all(hasattr(det, name) for name in needed):
        return False
    det._prepare_input_blob = DetectorBlob(det.input_mean, det.input_std, getattr(det, "input_dtype", np.float32))
    det.forward = positive_forward(det)
    det._detect_candidates = downscaling_candidates(det)
    return True
