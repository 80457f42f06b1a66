"""The worker manifest: what one Slurm array job processes. Defined once here; the portal imports it.

A manifest is a JSON file written by the portal next to the job's inputs:

    {
      "version": 2,
      "job": "5f0c...-uuid",                      # the portal's job id (free text for the worker)
      "sources": ["/abs/src/face1.jpg", ...],     # 1+ images of ONE person, averaged into one identity
      "targets": [{"path": "/abs/in/a.jpg", "output": "a.jpg"}, ...],
      "chunks": [[0, 1, 2], [3, 4, 5], [6]],      # array task N processes targets chunks[N]
      "output_dir": "/abs/out",                   # outputs/ and progress/ are created under it
      "engine": {"name": "auto", "face_selector": "many",
                 "reference_face": null, "reference_distance": null,
                 "max_pixels": 50000000, "video_progress_every": 25},
      "target_roots": ["/storage/shared"],        # version 2 only, optional (see below)
      "refused_roots": ["/storage/shared/teams/post"],  # version 2 only, optional (see below)
      "watermark": "Made with AI",                # version 2 only, optional: visible text in a corner
      "models": {"set": "...", "folder": "/abs/models", "files": [{"name": ..., "sha256": ...}]}
      "safety": {"plugin": "nudenet", "refuse": [...], "min_score": 0.5}
    }                                             # version 2 only, optional: `worker.modelset`, `worker.content_safety`

Relative paths in `sources`, `targets[].path` and `output_dir` are resolved against the manifest's
own folder, so a staged job folder can move as a whole. Outputs are written to
`<output_dir>/outputs/<targets[i].output>`; progress records to `<output_dir>/progress/` (see
`worker.progress`; the folder names are `worker.layout`'s).

Versions: 1 has no `target_roots`; 2 adds it. `Manifest.to_dict` writes version 1 when there are
no target roots (so a worker that reads only version 1 still runs such a job) and version 2 when
there are (so an older worker, which would not check them, refuses the job instead of running it
unchecked). This worker reads both. `watermark` and `models` (a template's visible watermark and the
model set it is pinned to, `worker.modelset`) are also version 2 fields, for the same reason: a
worker that does not know them refuses the job rather than run it unpinned or unmarked. Every
output carries the provenance label with the manifest's `job` (`worker.provenance`) either way.

`target_roots` (absolute folders, the cluster profile's allowed target roots): every target must
really lie inside one of them, symlinks followed, checked by the worker right before it opens the
file (`worker.targetfile`): the storage may change between the portal's listing and the run. A
target that does not is reported `failed` with a plain message and never opened; its neighbours
run as usual. Targets the portal staged into the job's own `targets/` folder (uploads,
`worker.layout`) are always admitted. Without `target_roots` a target must still lead where its
path says: one that is a symbolic link, or lies behind one, is refused (the portal hands over
resolved paths only).

`refused_roots` (absolute folders: other teams' folders, which may lie inside a target root): a
target that really lies inside one of them is refused in the same words as one outside the roots,
unless it lies inside a target root deeper still (a team's folder inside another's). A link in a
shared folder leading into another team's folder is caught here, on the node. Written only when
there are some (then the manifest is version 2, and an older worker, which would not check them,
refuses the job); a manifest without them is read and run exactly as before.

This module imports no numpy, OpenCV or onnxruntime: the portal imports it.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from .choices import ENGINE_NAMES, FACE_SELECTORS, FaceSelector  # noqa: F401 - FaceSelector re-exported
from .content_safety import SafetySpec
from .errors import ManifestError
from .layout import OutputFolder
from .modelset import ModelPin

#: the manifest versions this worker reads (`Manifest.version` says which one a manifest is written as)
READABLE_VERSIONS = (1, 2)

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff")
VIDEO_EXTENSIONS = (".mp4", ".mov", ".mkv", ".webm")


def is_video_name(name: str | None) -> bool:
    """Whether a file name (or path) is a video's, by its extension in any case; "" and None are not.
    The one test of "is this a video" for the worker and the portal alike."""
    return (name or "").lower().endswith(VIDEO_EXTENSIONS)

#: a 50-megapixel default keeps one decoded frame under ~150 MB (RGB) on a node
DEFAULT_MAX_PIXELS = 50_000_000


@dataclass(frozen=True)
class EngineOptions:
    name: str = "auto"
    face_selector: str = "many"
    reference_face: str | None = None
    reference_distance: float | None = None  # None: the engine's own default
    max_pixels: int = DEFAULT_MAX_PIXELS
    video_progress_every: int = 25

    def validate(self) -> None:
        if self.name not in ENGINE_NAMES:
            raise ManifestError(f"engine.name must be one of {', '.join(ENGINE_NAMES)}, not {self.name!r}")
        if self.face_selector not in FACE_SELECTORS:
            raise ManifestError(
                f"engine.face_selector must be one of {', '.join(FACE_SELECTORS)}, not {self.face_selector!r}"
            )
        if self.face_selector == "reference" and not self.reference_face:
            raise ManifestError("engine.face_selector 'reference' needs engine.reference_face (an image path)")
        if self.reference_distance is not None and not (0.0 < float(self.reference_distance) <= 2.0):
            raise ManifestError("engine.reference_distance must be between 0 and 2")
        if int(self.max_pixels) < 1:
            raise ManifestError("engine.max_pixels must be a positive number of pixels")
        if int(self.video_progress_every) < 1:
            raise ManifestError("engine.video_progress_every must be at least 1 frame")


@dataclass(frozen=True)
class Target:
    path: str
    output: str

    @property
    def is_video(self) -> bool:
        return is_video_name(self.path)


@dataclass(frozen=True)
class Manifest:
    job: str
    sources: tuple[str, ...]
    targets: tuple[Target, ...]
    chunks: tuple[tuple[int, ...], ...]
    output_dir: str
    engine: EngineOptions = field(default_factory=EngineOptions)
    #: the folders every target must really lie in (None: not checked; see the module docstring)
    target_roots: tuple[str, ...] | None = None
    #: folders no target may really lie in, even inside `target_roots`: other teams' (empty: none)
    refused_roots: tuple[str, ...] = ()
    #: text drawn small in a corner of every output ("": none; `worker.provenance.draw_watermark`)
    watermark: str = ""
    #: the model set the template is pinned to (None: the node's models folder, any verified file)
    models: ModelPin | None = None
    #: the content check every output gets before it is delivered (None: off; `worker.content_safety`)
    safety: SafetySpec | None = None
    #: look at each photo's result again (`worker.selfcheck`); written only when off, as `false`
    self_check: bool = True

    @property
    def version(self) -> int:
        """The version this manifest is written as: 2 only when it needs to be (it has target roots,
        refused roots, a watermark or a model pin)."""
        return 2 if (self.target_roots is not None or self.refused_roots or self.watermark or self.models is not None
                     or self.safety is not None or not self.self_check) else 1

    # -- derived paths -------------------------------------------------------------------------
    @property
    def output_folder(self) -> OutputFolder:
        return OutputFolder(self.output_dir)

    @property
    def outputs_dir(self) -> Path:
        return Path(self.output_folder.outputs)

    @property
    def progress_dir(self) -> Path:
        return Path(self.output_folder.progress)

    def output_path(self, target_index: int) -> Path:
        return self.outputs_dir / self.targets[target_index].output

    def chunk(self, task_index: int) -> tuple[int, ...]:
        if not 0 <= task_index < len(self.chunks):
            raise ManifestError(
                f"task index {task_index} is outside this manifest's {len(self.chunks)} chunk(s) "
                f"(valid: 0-{len(self.chunks) - 1})"
            )
        return self.chunks[task_index]

    # -- (de)serialisation ---------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        # Built by hand: dataclasses.asdict deep-copies every target, slow for 1,000s of them.
        data = {
            "version": self.version,
            "job": self.job,
            "sources": list(self.sources),
            "targets": [{"path": t.path, "output": t.output} for t in self.targets],
            "chunks": [list(c) for c in self.chunks],
            "output_dir": self.output_dir,
            "engine": asdict(self.engine),
        }
        if self.target_roots is not None:
            data["target_roots"] = list(self.target_roots)
        if self.refused_roots:
            data["refused_roots"] = list(self.refused_roots)
        if self.watermark:
            data["watermark"] = self.watermark
        if self.models is not None:
            data["models"] = self.models.to_dict()
        if self.safety is not None:
            data["safety"] = self.safety.to_dict()
        if not self.self_check:
            data["self_check"] = False
        return data

    def dumps(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)

    def write(self, path: str | os.PathLike) -> None:
        """Write atomically (temp file + rename) so a task never reads half a manifest."""
        from .progress import atomic_write_text

        atomic_write_text(Path(path), self.dumps())

    @classmethod
    def from_dict(cls, data: Any, base_dir: Path | None = None) -> "Manifest":
        if not isinstance(data, dict):
            raise ManifestError("the manifest must be a JSON object")
        version = data.get("version")
        if version not in READABLE_VERSIONS or isinstance(version, bool):
            raise ManifestError(
                f"manifest version {version!r} is not supported by this worker (it reads versions "
                f"{', '.join(map(str, READABLE_VERSIONS))}); update the worker image or resubmit the job"
            )
        known_fields = {"version", "job", "sources", "targets", "chunks", "output_dir", "engine"}
        if version >= 2:
            known_fields |= {"target_roots", "refused_roots", "watermark", "models", "safety", "self_check"}
        unknown = set(data) - known_fields
        if unknown:
            raise ManifestError(f"unknown manifest field(s) for version {version}: {', '.join(sorted(unknown))}")

        def resolve(p: Any, what: str) -> str:
            if not isinstance(p, str) or not p:
                raise ManifestError(f"{what} must be a non-empty path string")
            q = Path(p)
            if not q.is_absolute() and base_dir is not None:
                q = base_dir / q
            return str(q)

        sources = data.get("sources")
        if not isinstance(sources, list) or not sources:
            raise ManifestError("the manifest needs at least one source image in 'sources'")
        raw_targets = data.get("targets")
        if not isinstance(raw_targets, list) or not raw_targets:
            raise ManifestError("the manifest needs at least one target in 'targets'")
        targets = []
        seen_outputs: set[str] = set()
        for i, t in enumerate(raw_targets):
            if not isinstance(t, dict) or "path" not in t:
                raise ManifestError(f"targets[{i}] must be an object with 'path' (and optional 'output')")
            output = t.get("output") or default_output_name(str(t["path"]))
            check_output_name(output, f"targets[{i}].output")
            if output in seen_outputs:
                raise ManifestError(f"targets[{i}].output {output!r} is used by two targets")
            seen_outputs.add(output)
            targets.append(Target(path=resolve(t["path"], f"targets[{i}].path"), output=output))

        chunks_raw = data.get("chunks")
        if not isinstance(chunks_raw, list) or not chunks_raw:
            raise ManifestError("the manifest needs 'chunks': a list of lists of target indexes")
        chunks = []
        for n, c in enumerate(chunks_raw):
            if not isinstance(c, list) or not c or not all(isinstance(i, int) and not isinstance(i, bool) for i in c):
                raise ManifestError(f"chunks[{n}] must be a non-empty list of target indexes")
            bad = [i for i in c if not 0 <= i < len(targets)]
            if bad:
                raise ManifestError(f"chunks[{n}] names target index {bad[0]}, but there are {len(targets)} targets")
            chunks.append(tuple(c))

        engine_raw = data.get("engine") or {}
        if not isinstance(engine_raw, dict):
            raise ManifestError("'engine' must be an object")
        known = set(EngineOptions.__dataclass_fields__)
        unknown = set(engine_raw) - known
        if unknown:
            raise ManifestError(f"unknown engine option(s): {', '.join(sorted(unknown))}")
        try:
            engine = EngineOptions(**engine_raw)
        except TypeError as exc:  # pragma: no cover - guarded by the field check above
            raise ManifestError(f"bad engine options: {exc}") from exc
        if engine.reference_face:
            engine = EngineOptions(**{**asdict(engine), "reference_face": resolve(engine.reference_face, "engine.reference_face")})
        engine.validate()

        job = data.get("job", "")
        if not isinstance(job, str):
            raise ManifestError("'job' must be a string")
        return cls(
            job=job,
            sources=tuple(resolve(s, f"sources[{i}]") for i, s in enumerate(sources)),
            targets=tuple(targets),
            chunks=tuple(chunks),
            output_dir=resolve(data.get("output_dir"), "output_dir"),
            engine=engine,
            target_roots=_folders(data["target_roots"], "target_roots") if "target_roots" in data else None,
            refused_roots=_folders(data.get("refused_roots", []), "refused_roots"),
            watermark=_watermark(data.get("watermark", "")),
            models=ModelPin.from_dict(data["models"]) if data.get("models") is not None else None,
            safety=SafetySpec.from_dict(data["safety"]) if data.get("safety") is not None else None,
            self_check=_flag(data.get("self_check", True), "self_check"),
        )

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Manifest":
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ManifestError(f"manifest {path} does not exist") from None
        except OSError as exc:
            raise ManifestError(f"cannot read manifest {path}: {exc.strerror}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ManifestError(f"manifest {path} is not valid JSON (line {exc.lineno}: {exc.msg})") from None
        return cls.from_dict(data, base_dir=path.resolve().parent)


def _folders(raw: Any, name: str) -> tuple[str, ...]:
    """`target_roots` or `refused_roots` as read: absolute folder paths. An empty `target_roots`
    admits no folder at all; an empty `refused_roots` refuses none."""
    if not isinstance(raw, list):
        raise ManifestError(f"'{name}' must be a list of absolute folder paths")
    for i, root in enumerate(raw):
        if not isinstance(root, str) or not root.startswith("/") or "\x00" in root:
            raise ManifestError(f"{name}[{i}] must be an absolute folder path")
    return tuple(raw)


def _watermark(raw: Any) -> str:
    if not isinstance(raw, str) or len(raw) > 200 or any(ord(c) < 32 for c in raw):
        raise ManifestError("'watermark' must be one line of text (200 characters at most)")
    return raw


def check_output_name(name: Any, what: str = "output name") -> None:
    """An output name is a relative path inside outputs/: no absolute paths, no '..', no NUL."""
    if not isinstance(name, str) or not name or "\x00" in name:
        raise ManifestError(f"{what} must be a non-empty file name")
    p = PurePosixPath(name)
    if p.is_absolute() or ".." in p.parts or name.endswith("/"):
        raise ManifestError(f"{what} {name!r} must stay inside the outputs folder")


def default_output_name(target_path: str) -> str:
    """The output's name for a target: its file name, except videos whose container cannot hold
    H.264 (WebM) are written as .mp4, and photos whose format cannot hold the provenance label
    (BMP) as .png."""
    name = PurePosixPath(target_path).name
    return output_name_for_video(name) if is_video_name(name) else output_name_for_image(name)


#: photo extensions whose format has no place for the provenance label (`worker.provenance`):
#: their outputs are written as PNG
UNLABELLED_EXTENSIONS = (".bmp",)


def output_name_for_image(name: str) -> str:
    """The output name for a photo target: `.bmp` becomes `.png` (BMP has no place for the
    provenance label); other names stay. Two targets `a.bmp` and `a.png` would collide."""
    p = PurePosixPath(name)
    return str(p.with_suffix(".png")) if p.suffix.lower() in UNLABELLED_EXTENSIONS else name


def output_name_for_video(name: str) -> str:
    """The output name for a video target: `.webm` becomes `.mp4` (H.264 cannot go into WebM);
    `.mp4`, `.mov` and `.mkv` keep their name. Two targets `a.webm` and `a.mp4` would collide."""
    p = PurePosixPath(name)
    return str(p.with_suffix(".mp4")) if p.suffix.lower() == ".webm" else name


def make_chunks(n_targets: int, chunk_size: int) -> list[list[int]]:
    """Split target indexes 0..n-1 into consecutive chunks of at most `chunk_size`."""
    if n_targets < 1 or chunk_size < 1:
        raise ValueError("need at least one target and a chunk size of at least 1")
    return [list(range(i, min(i + chunk_size, n_targets))) for i in range(0, n_targets, chunk_size)]


def _flag(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise ManifestError(f"{what} must be true or false")
    return value
