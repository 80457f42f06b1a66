"""Model sets: which model files a job must use (pinned by the portal), and which a task did use.

Models on shared storage are identified by their SHA-256. A template an admin pinned to a model
set sends the set with every job, in the manifest's `models` field:

    "models": {"set": "inswapper-2026-11", "folder": "/storage/models/2026-11",
               "files": [{"name": "inswapper_128.onnx", "sha256": "e4a3..."}, ...]}

The worker then loads its models from that folder (not the profile's default one) and refuses, in
plain words, a file whose hash differs from the pinned one: nothing of the chunk runs. A new set
is a new folder beside the old one; new jobs use it as soon as the template points at it, and
tasks already running keep theirs: nothing on the nodes is restarted or overwritten.

Each task records the files it loaded (name + SHA-256) in its progress record (`models`), pinned
or not, so the portal can say which model version made every output.

This module imports no numpy, OpenCV or onnxruntime: the portal imports it (through the manifest).
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Mapping

from .errors import ManifestError, ModelError
from .weights import (
    DEFAULT_REGISTRY,
    ENHANCER_MODEL,
    INSIGHTFACE_MODELS,
    POSE_MODEL,
    HashCache,
    ModelSpec,
    check_models,
)


@dataclass(frozen=True)
class PinnedFile:
    name: str  # the file's name in the folder ("inswapper_128.onnx") or its registry name
    sha256: str


@dataclass(frozen=True)
class ModelPin:
    """A model set as the manifest carries it: a folder and the hash every listed file must have."""

    set: str
    folder: str
    files: tuple[PinnedFile, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"set": self.set, "folder": self.folder,
                "files": [{"name": f.name, "sha256": f.sha256} for f in self.files]}

    @classmethod
    def from_dict(cls, data: Any) -> "ModelPin":
        if not isinstance(data, dict) or set(data) - {"set", "folder", "files"}:
            raise ManifestError("'models' must be an object with 'set', 'folder' and 'files'")
        name, folder, files = data.get("set", ""), data.get("folder"), data.get("files")
        if not isinstance(name, str):
            raise ManifestError("models.set must be the model set's name")
        if not isinstance(folder, str) or not folder.startswith("/") or "\x00" in folder:
            raise ManifestError("models.folder must be an absolute folder path")
        if not isinstance(files, list) or not files:
            raise ManifestError("models.files must list at least one {name, sha256}")
        pinned = []
        for i, f in enumerate(files):
            if not isinstance(f, dict) or set(f) != {"name", "sha256"}:
                raise ManifestError(f"models.files[{i}] must be an object with 'name' and 'sha256'")
            problem = file_entry_problem(f["name"], f["sha256"])
            if problem:
                raise ManifestError(f"models.files[{i}]: {problem}")
            pinned.append(PinnedFile(name=f["name"], sha256=f["sha256"].lower()))
        return cls(set=name, folder=folder, files=tuple(pinned))


def file_entry_problem(name: Any, sha256: Any) -> str:
    """"" for a good {name, sha256} entry, else what is wrong with it (shared with the portal's form)."""
    if not isinstance(name, str) or not name or PurePosixPath(name).name != name or name in (".", ".."):
        return "the name must be a plain file name"
    if not isinstance(sha256, str) or len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256.lower()):
        return "the SHA-256 must be 64 hexadecimal digits"
    return ""


def pinned_registry(pin: ModelPin, registry: Mapping | None):
    """The model registry with the pin's hashes in place of the built-in ones. A pinned file is
    matched to a registry entry by its registry name or file name; a new hash drops the built-in
    size (a new model version may be larger). Files the registry does not know are added."""
    registry = dict(registry or DEFAULT_REGISTRY)
    for f in pin.files:
        spec = next((s for s in registry.values() if f.name in (s.name, s.file)), None)
        if spec is None:
            registry[f.name] = ModelSpec(name=f.name, file=f.name, url="", sha256=f.sha256)
        elif spec.sha256 != f.sha256:
            registry[spec.name] = dataclasses.replace(spec, sha256=f.sha256, size=None)
    return registry


def verify_pinned(pin: ModelPin, registry: Mapping | None = None) -> dict:
    """Check every pinned file in the pin's folder; the registry to load the engine with.

    Raises ModelError in plain words naming the set, the file and what to do when one is missing
    or its SHA-256 differs: the job must not run on other models than the ones it was pinned to."""
    registry = pinned_registry(pin, registry)
    names = [next(s.name for s in registry.values() if f.name in (s.name, s.file)) for f in pin.files]
    bad = [s for s in check_models(pin.folder, names, registry) if not s.ok]
    if bad:
        # A readable file with another hash is most likely another version of the model, not damage.
        what = "; ".join(f"{s.path.name} is {'missing' if s.state == 'missing' else 'not the pinned version'} "
                         f"({s.detail})" for s in bad)
        raise ModelError(
            f"the model set {pin.set or pin.folder} that this template is pinned to does not match the files in "
            f"{pin.folder}: {what}. Nothing was processed; ask an admin to restore the files or pin the template "
            f"to another model set")
    return registry


def insightface_used(registry: Mapping | None, names: Iterable[str]) -> list[dict[str, str]]:
    """The files an insightface engine loaded: verified against `registry`, so their hashes are its."""
    registry = registry or DEFAULT_REGISTRY
    return [{"name": registry[n].file, "sha256": registry[n].sha256} for n in names]


def files_used(paths: Iterable[str | os.PathLike]) -> list[dict[str, str]]:
    """Name and SHA-256 of model files loaded without a registry (the classic engine's dlib files);
    hashed once per (file, size, mtime) thanks to the models' hash cache (`worker.weights.HashCache`)."""
    out = []
    for p in map(Path, paths):
        cache = HashCache(p.parent)
        out.append({"name": p.name, "sha256": cache.sha256(p, p.stat())})
        cache.save()
    return out


def engine_models(engine, registry: Mapping | None) -> list[dict[str, str]]:
    """Name + SHA-256 of every model file `engine` loaded, for the task's progress record.
    An engine whose files cannot be hashed records none rather than fail the task."""
    try:
        if engine.name == "insightface":
            # The optional models count when the engine loaded them (an admin installed them).
            extra = tuple(name for name, part in ((POSE_MODEL, "head_turn"), (ENHANCER_MODEL, "enhancer"))
                          if getattr(engine, part, None) is not None)
            return insightface_used(registry, (*INSIGHTFACE_MODELS, *extra))
        if engine.name == "classic":
            from .engines.classic import MODEL_FILES, models_dir

            return files_used(os.path.join(models_dir(), f) for f in MODEL_FILES.values())
    except (OSError, ModelError):
        return []
    return []
