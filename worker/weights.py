"""Model weights, the files the insightface engine loads: where they live, what they must hash to.

Compute nodes usually have no internet, so a task never downloads: it checks the files in the models
folder against pinned SHA-256 hashes (`verify_models`) and refuses to start with a plain reason. An
admin runs `python -m worker models fetch` once where the internet is reachable
(`worker.download.fetch_models`), or copies the files in by hand.

Hashing the 554 MB inswapper_128.onnx took 0.5 s from the page cache and 0.8-0.9 s from a local
disk (measured on an AMD EPYC with SHA extensions); on a shared filesystem the read dominates (about
5 s at 100 MB/s). Fine once per task, wasteful on every task of a 1000-task array, so verified hashes
are cached per (file, size, mtime_ns): in-process always, and in `.verified.json` next to the models
when that folder is writable (e.g. written by the admin's `models fetch`, then read by every task).
A file rewritten in place gets a new mtime and is hashed again. The cache guards against corrupt
and truncated files, not against someone who can write to the models folder.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Literal, Mapping

from .errors import ModelError
from .progress import atomic_write_text

log = logging.getLogger("worker.weights")

MODELS_DIR_ENV = "FACEFUSION_MODELS_DIR"
REGISTRY_ENV = "FACEFUSION_MODEL_REGISTRY"
VERIFIED_CACHE_NAME = ".verified.json"
HASH_BLOCK_BYTES = 1 << 20
#: files modified less than this before hashing are not cached (coarse or skewed timestamps, e.g. NFS)
RACY_MARGIN_NS = 2_000_000_000

StateName = Literal["ok", "missing", "corrupt"]


@dataclass(frozen=True)
class ModelSpec:
    """One model file: its name in the registry, file name in the models folder, source and pinned hash."""

    name: str
    file: str
    url: str
    sha256: str
    size: int | None = None


_BUFFALO_L = "https://huggingface.co/public-data/insightface/resolve/main/models/buffalo_l"
DEFAULT_REGISTRY: dict[str, ModelSpec] = {
    "det_10g": ModelSpec(
        name="det_10g",
        file="det_10g.onnx",
        url=f"{_BUFFALO_L}/det_10g.onnx",
        sha256="5838f7fe053675b1c7a08b633df49e7af5495cee0493c7dcf6697200b85b5b91",
    ),
    "w600k_r50": ModelSpec(
        name="w600k_r50",
        file="w600k_r50.onnx",
        url=f"{_BUFFALO_L}/w600k_r50.onnx",
        sha256="4c06341c33c2ca1f86781dab0e829f88ad5b64be9fba56e56bc9ebdefc619e43",
    ),
    "inswapper_128": ModelSpec(
        name="inswapper_128",
        file="inswapper_128.onnx",
        url="https://github.com/facefusion/facefusion-assets/releases/download/models/inswapper_128.onnx",
        sha256="e4a3f08c753cb72d04e10aa0f7dbe3deebbf39567d4ead6dce08e98aa49e16af",
        size=554253681,
    ),
    # optional (POSE_MODEL); hash as published with buffalo_l's other files (det_10g's and w600k_r50's match)
    "1k3d68": ModelSpec(
        name="1k3d68",
        file="1k3d68.onnx",
        url=f"{_BUFFALO_L}/1k3d68.onnx",
        sha256="df5c06b8a0c12e422b2ed8947b8869faa4105387f199c477af038aa01f9a45cc",
    ),
}
#: detector, recogniser, swapper: what the insightface engine loads, in that order
INSIGHTFACE_MODELS: tuple[str, ...] = ("det_10g", "w600k_r50", "inswapper_128")
#: the optional face enhancer (worker/engines/enhancer.py): no built-in entry, since its weights are the
#: admin's choice; the registry JSON names its file, url and sha256, and the engine uses it when present
ENHANCER_MODEL = "face_enhancer"
#: the optional 3-D landmark model (buffalo_l's 1k3d68): with it the insightface engine measures each
#: face's head turn and leaves faces turned toward profile as they are (worker.pose), as the classic
#: engine does; without it every face is swapped. `models fetch` fetches it; `models check` lists it.
POSE_MODEL = "1k3d68"


@dataclass(frozen=True)
class ModelState:
    """What `check_models` found of one model file: its state, and the detail in plain words."""

    name: str
    path: Path
    state: StateName
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.state == "ok"


def default_models_dir() -> Path:
    """$FACEFUSION_MODELS_DIR, else ~/.facefusion-portal/models."""
    env = os.environ.get(MODELS_DIR_ENV)
    return Path(env).expanduser() if env else Path.home() / ".facefusion-portal" / "models"


def load_registry(path: str | os.PathLike) -> dict[str, ModelSpec]:
    """The built-in registry overlaid with a JSON file's entries (a site mirror, or tests).

    The file maps names to entries: `{"inswapper_128": {"url": "https://mirror/inswapper_128.onnx"}}`.
    An entry for a built-in name may give only the fields it changes (the pinned hash stays); a new
    name must give `file`, `url` and `sha256` (`size` is optional).
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot read the model registry {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ModelError(f"model registry {path} must be a JSON object mapping model names to entries")
    registry = dict(DEFAULT_REGISTRY)
    allowed = {"file", "url", "sha256", "size"}
    for name, entry in data.items():
        if not isinstance(entry, dict) or set(entry) - allowed:
            raise ModelError(f"model registry {path}: entry {name!r} must be an object with only {sorted(allowed)}")
        base = DEFAULT_REGISTRY.get(name)
        fields = {"file": None, "url": None, "sha256": None, "size": None}
        if base is not None:
            fields.update(file=base.file, url=base.url, sha256=base.sha256, size=base.size)
        fields.update(entry)
        missing = [k for k in ("file", "url", "sha256") if not fields[k]]
        if missing:
            raise ModelError(f"model registry {path}: entry {name!r} lacks {', '.join(missing)}")
        sha = str(fields["sha256"]).lower()
        if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
            raise ModelError(f"model registry {path}: entry {name!r} has a malformed sha256")
        if Path(fields["file"]).name != fields["file"]:
            raise ModelError(f"model registry {path}: entry {name!r} file must be a plain file name")
        size = fields["size"]
        if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size <= 0):
            raise ModelError(f"model registry {path}: entry {name!r} size must be a positive integer")
        registry[name] = ModelSpec(name=name, file=fields["file"], url=fields["url"], sha256=sha, size=size)
    return registry


def resolve_models(models_dir, registry) -> tuple[Path, Mapping[str, ModelSpec]]:
    """(models folder, registry) from what a caller passed: None is the default folder / the built-in
    registry, a path is a registry JSON (`load_registry`)."""
    # Callers (CLI, task runner) read the env once and pass explicit values; None means "the default".
    folder = Path(models_dir).expanduser() if models_dir else default_models_dir()
    if registry is None:
        registry = DEFAULT_REGISTRY
    elif isinstance(registry, (str, os.PathLike)):
        registry = load_registry(registry)
    return folder, registry


def specs_named(registry: Mapping[str, ModelSpec], names: Iterable[str]) -> list[ModelSpec]:
    """The registry's entries for `names`, in that order; ModelError naming an unknown one."""
    out = []
    for n in names:
        if n not in registry:
            raise ModelError(f"no model named {n!r} in the model registry (known: {', '.join(sorted(registry))})")
        out.append(registry[n])
    return out


# ---- hashing, with a cache keyed by (path, size, mtime_ns) --------------------------------------

_PROCESS_HASHES: dict[tuple[str, int, int], str] = {}


def hash_file(path: Path):
    """A SHA-256 hash object fed with the file's bytes, read in 1 MiB blocks (memory stays flat for a
    554 MB model): for its `hexdigest()`, or for more bytes (a download resumed after them)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(HASH_BLOCK_BYTES):
            digest.update(block)
    return digest


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, as hex."""
    return hash_file(path).hexdigest()


class HashCache:
    """Known hashes of the files in one models folder: in-process, plus `.verified.json` when writable."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.path = folder / VERIFIED_CACHE_NAME
        self.changed = False
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            self.entries: dict = data.get("files", {}) if isinstance(data, dict) else {}
        except (OSError, ValueError):
            self.entries = {}

    def sha256(self, path: Path, st: os.stat_result) -> str:
        key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
        if key in _PROCESS_HASHES:
            return _PROCESS_HASHES[key]
        entry = self.entries.get(path.name)
        if isinstance(entry, dict) and entry.get("size") == st.st_size and entry.get("mtime_ns") == st.st_mtime_ns:
            digest = str(entry.get("sha256", ""))
            _PROCESS_HASHES[key] = digest
            return digest
        started_ns = time.time_ns()
        digest = file_sha256(path)
        log.info("hashed %s (%.0f MB) in %.2fs", path, st.st_size / 1e6, (time.time_ns() - started_ns) / 1e9)
        # As git does with "racily clean" files: a file modified just before (or while) we read it
        # could be modified again within the same timestamp tick, unseen by (size, mtime). Cache
        # only files that were already quiet when hashing started.
        if st.st_mtime_ns < started_ns - RACY_MARGIN_NS:
            self.record(path, st, digest)
        return digest

    def record(self, path: Path, st: os.stat_result, digest: str) -> None:
        _PROCESS_HASHES[(str(path.resolve()), st.st_size, st.st_mtime_ns)] = digest
        self.entries[path.name] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest}
        self.changed = True

    def save(self) -> None:
        """Write the cache file when something new was hashed and the folder lets us (read-only: skip)."""
        if not self.changed or not os.access(self.folder, os.W_OK):
            return
        live = {n: e for n, e in self.entries.items() if (self.folder / n).is_file()}
        try:
            atomic_write_text(self.path, json.dumps({"version": 1, "files": live}, indent=1, sort_keys=True))
        except OSError as exc:  # a full or racing shared filesystem must not fail the task
            log.debug("could not write %s: %s", self.path, exc)
        self.changed = False


def file_state(folder: Path, spec: ModelSpec, cache: HashCache) -> ModelState:
    """ok / missing / corrupt for `spec`'s file in `folder`, hashing it unless `cache` knows the hash."""
    path = folder / spec.file
    try:
        st = path.stat()
    except FileNotFoundError:
        return ModelState(spec.name, path, "missing", "not found")
    except OSError as exc:
        return ModelState(spec.name, path, "missing", f"cannot be reached: {exc.strerror or exc}")
    if not path.is_file():
        return ModelState(spec.name, path, "corrupt", "is not a regular file")
    # A wrong size (typically a truncated copy) is caught without reading the whole file.
    if spec.size is not None and st.st_size != spec.size:
        return ModelState(spec.name, path, "corrupt", f"size {st.st_size} bytes, expected {spec.size}")
    try:
        digest = cache.sha256(path, st)
    except OSError as exc:
        return ModelState(spec.name, path, "corrupt", f"cannot be read: {exc.strerror or exc}")
    if digest != spec.sha256:
        return ModelState(spec.name, path, "corrupt", f"SHA-256 {digest[:12]}… does not match the expected {spec.sha256[:12]}…")
    return ModelState(spec.name, path, "ok", "SHA-256 verified")


def check_models(models_dir, names: Iterable[str], registry=None) -> list[ModelState]:
    """The state of each named model, in the order asked. Raises ModelError only for unknown names."""
    folder, registry = resolve_models(models_dir, registry)
    specs = specs_named(registry, names)
    cache = HashCache(folder)
    states = [file_state(folder, s, cache) for s in specs]
    cache.save()
    return states


def verify_models(models_dir, names: Iterable[str], registry=None) -> dict[str, Path]:
    """The verified path of each named model, or ModelError saying which file is wrong, where, and the fix."""
    folder, registry = resolve_models(models_dir, registry)
    states = check_models(folder, names, registry)
    bad = [s for s in states if not s.ok]
    if bad:
        problems = "; ".join(f"model file {s.path.name} is {s.state} at {s.path} ({s.detail})" for s in bad)
        raise ModelError(
            f"{problems}. Fix: run `python -m worker models fetch` where the internet is reachable, "
            f"or copy the file into {folder}"
        )
    return {s.name: s.path for s in states}


def optional_model(models_dir, name: str, registry=None) -> Path | None:
    """The verified path of an optional model, or None when it is not registered or its file is absent.

    A file that is there but fails its size or SHA-256 check raises ModelError: someone installed
    the wrong bytes, and running without it would hide that.
    """
    folder, registry = resolve_models(models_dir, registry)
    if name not in registry:
        return None
    [state] = check_models(folder, [name], registry)
    if state.state == "missing":
        return None
    if not state.ok:
        raise ModelError(f"model file {state.path.name} is {state.state} at {state.path} ({state.detail}); "
                         f"replace it or remove it")
    return state.path
