"""What every face engine provides. Engines are plain classes; `worker.engines.load_engine` builds one.

An engine is built ONCE per task (models loaded once) and then used for every target of the chunk.
Images are numpy uint8 arrays in OpenCV's BGR order, shape (H, W, 3), C-contiguous.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ..choices import ENGINE_NAMES, EngineName  # noqa: F401 - re-exported for the engines


@dataclass
class Face:
    """One detected face in one image.

    bbox: (x1, y1, x2, y2) in pixels. landmarks: (N, 2) float array, engine specific (68 points for
    classic, 5 for insightface). embedding: identity vector used by `reference` selection and by
    the identity judge; engines fill it on demand via `Engine.embed`. `native` keeps the engine's
    own object (e.g. an insightface Face) so the engine need not recompute it. pose_landmarks: dlib's
    68-point layout for the head-turn rule (`worker.pose`) where `landmarks` are fewer (insightface,
    from its optional 3-D landmark model); None where the engine has none.
    """

    bbox: tuple[float, float, float, float]
    landmarks: np.ndarray
    score: float = 1.0
    embedding: np.ndarray | None = None
    native: object | None = field(default=None, repr=False)
    pose_landmarks: np.ndarray | None = field(default=None, repr=False)

    @property
    def area(self) -> float:
        x1, y1, x2, y2 = self.bbox
        return max(0.0, x2 - x1) * max(0.0, y2 - y1)


@dataclass
class Identity:
    """The source person, built once per task from one or more source images.

    embedding: the normalised mean of the sources' embeddings (several photos of the same person
    are averaged into one identity). `native` is engine-specific material (e.g. the classic
    engine keeps the best source face crop and landmarks to warp from).
    """

    embedding: np.ndarray
    sources_used: int
    native: object | None = field(default=None, repr=False)


class Engine(Protocol):
    name: str
    #: what actually runs inference, for the log: e.g. "CUDAExecutionProvider" or "dlib (CPU)"
    device: str
    #: cosine distance under which a face counts as the reference person (engine's embedding space)
    default_reference_distance: float

    def detect(self, image: np.ndarray) -> list[Face]:
        """All faces in the image, largest first."""

    def embed(self, image: np.ndarray, face: Face) -> np.ndarray:
        """The identity vector of `face` (L2-normalised), also stored on `face.embedding`."""

    def identity(self, sources: list[np.ndarray]) -> Identity:
        """One identity from the source images; raises SourceError when none holds a usable face."""

    def swap(self, image: np.ndarray, faces: list[Face], identity: Identity) -> np.ndarray:
        """A new image with each of `faces` replaced by `identity`; `image` is not modified."""
