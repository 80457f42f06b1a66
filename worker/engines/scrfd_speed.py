"""Two speed-ups of insightface's SCRFD detector (insightface 2.x) that change no result, bit for bit.

On a 1080p frame the detector's own Python and OpenCV work around the model cost more of the CPU
than anything else the worker does per frame (docs/worker.md):
- `DetectorBlob`: its input blob from the letterboxed frame, ~9x cheaper than `cv2.dnn.blobFromImage`;
- `positive_forward`: the boxes and keypoints decoded for the anchors over the score threshold only
  (a few dozen), not for all 16,800 of a 640x640 input before throwing nearly all of them away.

`install(det)` puts both on one SCRFD object where its insightface has the hooks (2.x); with any
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


def install(det) -> bool:
    """Both speed-ups on `det` (an insightface SCRFD); False where its layout is not the one they
    were checked against (then nothing is changed)."""
    needed = ("_prepare_input_blob", "_session_for_input_size", "center_cache", "_num_anchors", "fmc",
              "_feat_stride_fpn", "use_kps", "batched", "output_names", "input_name", "input_mean", "input_std")
    if not all(hasattr(det, name) for name in needed):
        return False
    det._prepare_input_blob = DetectorBlob(det.input_mean, det.input_std, getattr(det, "input_dtype", np.float32))
    det.forward = positive_forward(det)
    return True
