"""Real photos that installed packages ship, for tests that need actual faces (no download).

insightface's sample images (found without importing insightface) and scikit-image's astronaut.
Every function returns a fresh BGR uint8 array (or a path); a missing package skips the test.
"""
import importlib.util
from pathlib import Path

import cv2
import numpy as np
import pytest


def insightface_images() -> Path:
    spec = importlib.util.find_spec("insightface")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("insightface (and its sample images) is not installed: run `make venv`", pytrace=False)
    return Path(list(spec.submodule_search_locations)[0]) / "data" / "images"


def t1_path() -> Path:
    """A group photo, 1280x886, six people (some turned, one near profile)."""
    return insightface_images() / "t1.jpg"


def tom_hanks_path() -> Path:
    """A 112x112 grey, tightly cropped face, slightly turned."""
    return insightface_images() / "Tom_Hanks_54745.png"


def t1() -> np.ndarray:
    return cv2.imread(str(t1_path()), cv2.IMREAD_COLOR)


def tom_hanks() -> np.ndarray:
    return cv2.imread(str(tom_hanks_path()), cv2.IMREAD_COLOR)


def astronaut() -> np.ndarray:
    """scikit-image's astronaut, 512x512, one frontal face."""
    from skimage import data

    return np.ascontiguousarray(data.astronaut()[:, :, ::-1])
