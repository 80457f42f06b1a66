"""Which faces of a target get swapped, as in FaceFusion: many (all), one (largest), reference."""
from __future__ import annotations

import numpy as np

from .engines.base import Engine, Face


def embedding_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine distance, as FaceFusion's reference_face_distance: 0 = same direction, 2 = opposite."""
    a = a / (np.linalg.norm(a) or 1.0)
    b = b / (np.linalg.norm(b) or 1.0)
    return float(1.0 - np.dot(a, b))


def select_faces(
    engine: Engine,
    image: np.ndarray,
    faces: list[Face],
    mode: str,
    reference: np.ndarray | None = None,
    max_distance: float | None = None,
) -> list[Face]:
    if not faces:
        return []
    if mode == "many":
        return list(faces)
    if mode == "one":
        return [max(faces, key=lambda f: f.area)]
    if mode == "reference":
        if reference is None:
            raise ValueError("reference selection needs the reference face's embedding")
        if max_distance is None:
            max_distance = engine.default_reference_distance
        chosen = []
        for f in faces:
            emb = f.embedding if f.embedding is not None else engine.embed(image, f)
            if embedding_distance(emb, reference) <= max_distance:
                chosen.append(f)
        return chosen
    raise ValueError(f"unknown face selector {mode!r}")
