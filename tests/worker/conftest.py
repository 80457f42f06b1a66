"""Model folders the worker's engine tests share (built once per test module)."""
import shutil

import pytest

from tests.worker import real_models
from tests.worker.fake_models import build_fake_models, spec_of


@pytest.fixture(scope="module")
def fake_models(tmp_path_factory):
    """(folder, registry) of the three insightface stand-ins (tests/worker/fake_models.py)."""
    folder = tmp_path_factory.mktemp("models")
    return folder, build_fake_models(folder)


@pytest.fixture(scope="module")
def scrfd_models(tmp_path_factory):
    """(folder, registry): the stand-in recogniser and swapper with the real SCRFD-2.5G as det_10g."""
    folder = tmp_path_factory.mktemp("models")
    registry = build_fake_models(folder)
    shutil.copy(real_models.scrfd_model(), folder / "scrfd.onnx")
    registry["det_10g"] = spec_of("det_10g", folder / "scrfd.onnx")
    return folder, registry
