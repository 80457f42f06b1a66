"""Model sets: a task pinned to a set loads that folder's files only when their SHA-256 match, and
every task records the model files (name + hash) it used. Runs the real insightface engine on the
tiny stand-in models (tests/worker/fake_models.py)."""
from __future__ import annotations

import hashlib

import pytest
from PIL import Image

from tests.worker import photos
from tests.worker.fake_models import _save, build_fake_models, swapper_graph
from worker.manifest import EngineOptions, Manifest, Target
from worker.modelset import ModelPin, PinnedFile, pinned_registry
from worker.progress import read_progress_dir
from worker.provenance import read_label
from worker.runner import EXIT_OK, EXIT_TASK_FAILED, TaskConfig, run_task
from worker.weights import DEFAULT_REGISTRY


def pin_of(name: str, folder, registry) -> ModelPin:
    return ModelPin(set=name, folder=str(folder),
                    files=tuple(PinnedFile(name=s.file, sha256=s.sha256) for s in registry.values()))


@pytest.fixture(scope="module")
def model_sets(tmp_path_factory):
    """Two model sets side by side on "storage": the second has a different swapper (a new version)."""
    root = tmp_path_factory.mktemp("storage")
    first = build_fake_models(root / "2026-10")
    second = build_fake_models(root / "2026-11")
    _save(swapper_graph(seed=7), root / "2026-11" / "inswapper_128.onnx")
    data = (root / "2026-11" / "inswapper_128.onnx").read_bytes()
    second["inswapper_128"] = type(second["inswapper_128"])(
        name="inswapper_128", file="inswapper_128.onnx", url="https://models.invalid/x",
        sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    assert first["inswapper_128"].sha256 != second["inswapper_128"].sha256
    return {"2026-10": (root / "2026-10", first), "2026-11": (root / "2026-11", second)}


def run_pinned(tmp_path, pin: ModelPin, job="job-9"):
    job_dir = tmp_path / job
    job_dir.mkdir()
    Image.fromarray(photos.astronaut()[:, :, ::-1]).save(job_dir / "face.png")
    Image.fromarray(photos.astronaut()[:, :, ::-1]).save(job_dir / "a.jpg", quality=92)
    m = Manifest(job=job, sources=(str(job_dir / "face.png"),), targets=(Target(str(job_dir / "a.jpg"), "a.jpg"),),
                 chunks=((0,),), output_dir=str(job_dir / "out"), engine=EngineOptions(name="insightface"),
                 models=pin)
    m.write(job_dir / "manifest.json")
    # The node's default models folder is empty: only the pin can make the task run.
    cfg = TaskConfig.from_env(str(job_dir / "manifest.json"), 0, str(tmp_path / "no-models-here"), None, env={})
    code = run_task(cfg)
    [task] = read_progress_dir(m.progress_dir)
    return code, task, m.output_path(0)


def test_a_pinned_task_loads_the_sets_folder_and_records_its_files(tmp_path, model_sets):
    folder, registry = model_sets["2026-10"]
    code, task, output = run_pinned(tmp_path, pin_of("2026-10", folder, registry))
    assert code == EXIT_OK and task.targets[0].status == "done" and task.engine == "insightface"
    assert {(f["name"], f["sha256"]) for f in task.models} == {(s.file, s.sha256) for s in registry.values()}
    assert read_label(output)["job"] == "job-9"


def test_a_new_model_set_is_used_by_the_next_job_without_restarting_anything(tmp_path, model_sets):
    old_folder, old = model_sets["2026-10"]
    new_folder, new = model_sets["2026-11"]
    run_pinned(tmp_path, pin_of("2026-10", old_folder, old), job="before")
    code, task, _ = run_pinned(tmp_path, pin_of("2026-11", new_folder, new), job="after")
    used = {f["name"]: f["sha256"] for f in task.models}
    assert code == EXIT_OK and used["inswapper_128.onnx"] == new["inswapper_128"].sha256


def test_a_file_whose_hash_differs_from_the_pin_is_refused_and_nothing_runs(tmp_path, model_sets):
    folder, registry = model_sets["2026-10"]
    _new_folder, new = model_sets["2026-11"]
    # The template pins the November swapper, but the October folder holds the old file.
    pin = pin_of("2026-11", folder, {**registry, "inswapper_128": new["inswapper_128"]})
    code, task, output = run_pinned(tmp_path, pin)
    assert code == EXIT_TASK_FAILED and not output.exists()
    [target] = task.targets
    assert target.status == "failed"
    assert "model set 2026-11" in target.message and "inswapper_128.onnx is not the pinned version" in target.message
    assert "does not match" in target.message and "ask an admin" in target.message


def test_a_missing_pinned_file_is_refused_too(tmp_path, model_sets):
    folder, registry = model_sets["2026-10"]
    pin = ModelPin(set="x", folder=str(tmp_path / "empty"), files=pin_of("x", folder, registry).files)
    code, task, _ = run_pinned(tmp_path, pin)
    assert code == EXIT_TASK_FAILED and "det_10g.onnx is missing" in task.targets[0].message


def test_the_pin_replaces_built_in_hashes_and_drops_their_size():
    pin = ModelPin(set="s", folder="/m", files=(PinnedFile("inswapper_128.onnx", "ab" * 32),
                                               PinnedFile("extra.onnx", "cd" * 32)))
    reg = pinned_registry(pin, None)
    assert reg["inswapper_128"].sha256 == "ab" * 32 and reg["inswapper_128"].size is None
    assert reg["det_10g"] == DEFAULT_REGISTRY["det_10g"]  # not pinned: the built-in hash stays
    assert reg["extra.onnx"].sha256 == "cd" * 32
