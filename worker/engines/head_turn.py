"""The insightface engine's optional head-turn measure: buffalo_l's 3-D landmark model (1k3d68).

A swap of a face turned toward profile comes out smeared (the swapper was trained on faces that look
at the camera; the classic engine's warp has the same limit). The classic engine reads the turn from
dlib's 68 landmarks (`worker.pose`). SCRFD's 5 keypoints cannot tell it: on insightface's t1.jpg the two
profile faces read -44 and -22 degrees from them, and the -22 is no different from the frontal faces.
1k3d68 gives the same 68 points as dlib (the hidden side of a turned head included, from its 3-D fit),
so the same rule with the same limits applies to both engines.

It is on when the file `1k3d68.onnx` is in the models folder (`worker.weights.POSE_MODEL`, hash-checked
like the others; `python -m worker models fetch` fetches it). Without it, every face is swapped, as
before, and the log says so.

The crop and the decoding follow insightface's `model_zoo.Landmark.get`: the detection box's centre,
1.5 times its longer side scaled to the model's 192 pixels, no rotation; the last 68 of the output's
points, x and y in [-1, 1] of the crop. Done here rather than through `Landmark.get` because that call
also fits a 3-D pose (unused here) through scikit-image on every face.
"""
from __future__ import annotations

import cv2
import numpy as np

from ..errors import ModelError

#: insightface's crop: the model sees the box's longer side times this
BOX_SCALE = 1.5
POINTS = 68


class HeadTurnLandmarks:
    """dlib-layout 68 points of a detected face, from a loaded insightface `Landmark` model."""

    def __init__(self, model, path: str):
        # insightface routes any 192x192-input graph to Landmark; only the 3-D 68-point kind is this model
        if type(model).__name__ != "Landmark" or getattr(model, "taskname", "") != "landmark_3d_68":
            raise ModelError(
                f"model file {path} loaded as {type(model).__name__} {getattr(model, 'taskname', '')}, not "
                f"insightface's 3-D 68-point landmark model (1k3d68); check the model registry")
        self.model = model
        self.size = int(model.input_size[0])

    @property
    def session(self):
        return self.model.session

    @session.setter
    def session(self, value) -> None:
        self.model.session = value  # wrapped by the engine's inference clock

    def points(self, image: np.ndarray, bbox) -> np.ndarray:
        """(68, 2) float64 image coordinates of the face in `bbox` (x1, y1, x2, y2)."""
        x1, y1, x2, y2 = (float(v) for v in bbox)
        scale = self.size / (max(x2 - x1, y2 - y1) * BOX_SCALE)
        half = self.size / 2
        cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
        matrix = np.array([[scale, 0.0, half - cx * scale], [0.0, scale, half - cy * scale]])
        crop = cv2.warpAffine(image, matrix, (self.size, self.size), borderValue=0.0)
        m = self.model
        blob = cv2.dnn.blobFromImage(crop, 1.0 / m.input_std, (self.size, self.size), (m.input_mean,) * 3, swapRB=True)
        pred = m.session.run(m.output_names, {m.input_name: blob})[0][0]
        pred = pred.reshape((-1, 3))[-POINTS:, :2].astype(np.float64)
        # [-1, 1] of the crop -> crop pixels (insightface: (p + 1) * (size // 2)) -> image pixels
        crop_xy = (pred + 1.0) * (self.size // 2)
        return (crop_xy - matrix[:, 2]) / scale
