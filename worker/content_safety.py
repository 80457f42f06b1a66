"""Content safety: an optional check of face photos and results with a detector model (plug-in).

Off unless an admin turns it on in the portal (docs/content-safety.md). When it is on, the portal
checks each source face photo, and the manifest carries a `safety` object so that the worker
checks each output right after writing it:

    "safety": {"plugin": "nudenet", "refuse": ["FEMALE_BREAST_EXPOSED", ...], "min_score": 0.5}

A checker is anything with `check(image_bgr) -> Verdict` (`Checker`). `load_checker(spec)` builds
one from the spec's plug-in name: "nudenet" (built in: NudeNet 3.4.2's `320n.onnx`, an optional
extra because it is AGPL-3.0: `pip install --no-deps -r worker/requirements-safety.txt`) or
"package.module:callable", a callable taking the `SafetySpec` and returning a Checker, for a site
that prefers another model. An image is refused when the model finds any of `refuse` with a score
of at least `min_score`.

A refused output is deleted before its record says anything (`screen_output`): the portal only
fetches outputs whose record says done, so it is never delivered. The record says failed, with the
code "held_back" and the labels and scores found (never image data).

This module imports no numpy, OpenCV or onnxruntime at import time: the manifest (imported by the
portal) uses `SafetySpec`.
"""
from __future__ import annotations

import importlib
import importlib.util
import logging
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from . import ffmpeg as ff
from .errors import ManifestError, ModelError
from .weights import file_sha256

log = logging.getLogger("worker.content_safety")

#: every class NudeNet 3.4.2's detector knows (nudenet/nudenet.py)
NUDENET_LABELS: tuple[str, ...] = (
    "FEMALE_GENITALIA_COVERED", "FACE_FEMALE", "BUTTOCKS_EXPOSED", "FEMALE_BREAST_EXPOSED",
    "FEMALE_GENITALIA_EXPOSED", "MALE_BREAST_EXPOSED", "ANUS_EXPOSED", "FEET_EXPOSED", "BELLY_COVERED",
    "FEET_COVERED", "ARMPITS_COVERED", "ARMPITS_EXPOSED", "FACE_MALE", "BELLY_EXPOSED",
    "MALE_GENITALIA_EXPOSED", "ANUS_COVERED", "FEMALE_BREAST_COVERED", "BUTTOCKS_COVERED",
)
#: refused by default: explicit nudity. Not faces (every photo here has one), and not feet, bellies,
#: armpits or a man's bare chest: holiday and sports photos show them and are no reason to refuse.
DEFAULT_REFUSE: tuple[str, ...] = (
    "FEMALE_BREAST_EXPOSED", "FEMALE_GENITALIA_EXPOSED", "MALE_GENITALIA_EXPOSED", "BUTTOCKS_EXPOSED",
    "ANUS_EXPOSED",
)
DEFAULT_MIN_SCORE = 0.5
BUILTIN_PLUGIN = "nudenet"
#: NudeNet 3.4.2's wheel: nudenet/320n.onnx (the hash its RECORD lists, as hex)
NUDENET_MODEL_FILE = "320n.onnx"
NUDENET_MODEL_SHA256 = "c15d8273adad2d0a92f014cc69ab2d6c311a06777a55545f2c4eb46f51911f0f"
INSTALL_HINT = "pip install --no-deps -r worker/requirements-safety.txt"
#: frames looked at per video output (spread over its length), and seconds ffmpeg may take for one
VIDEO_SAMPLES = 8
FRAME_TIMEOUT_S = 60
#: the record's code for a held-back output (jobs.results.target_words says it in the reader's language)
HELD_BACK = "held_back"
HELD_BACK_MESSAGE = "the result was held back by the content check and deleted"

_PLUGIN_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")
_LABEL_RE = re.compile(r"^[A-Za-z0-9_]{1,64}$")


@dataclass(frozen=True)
class SafetySpec:
    """Which checker, which labels it refuses, from which score (the manifest's `safety`)."""

    plugin: str = BUILTIN_PLUGIN
    refuse: tuple[str, ...] = DEFAULT_REFUSE
    min_score: float = DEFAULT_MIN_SCORE

    def to_dict(self) -> dict[str, Any]:
        return {"plugin": self.plugin, "refuse": list(self.refuse), "min_score": self.min_score}

    @classmethod
    def from_dict(cls, data: Any) -> "SafetySpec":
        if not isinstance(data, dict) or set(data) - {"plugin", "refuse", "min_score"} \
                or not isinstance(data.get("refuse", []), list):
            raise ManifestError("'safety' must be an object with 'plugin', 'refuse' (a list) and 'min_score'")
        spec = cls(plugin=data.get("plugin", BUILTIN_PLUGIN), refuse=tuple(data.get("refuse", DEFAULT_REFUSE)),
                   min_score=data.get("min_score", DEFAULT_MIN_SCORE))
        problem = spec.problem()
        if problem:
            raise ManifestError(f"safety: {problem}")
        return spec

    def problem(self) -> str:
        """"" for a usable spec, else what is wrong (shared with the portal's settings form)."""
        if not isinstance(self.plugin, str) or not (self.plugin == BUILTIN_PLUGIN or _PLUGIN_RE.match(self.plugin)):
            return f"the plug-in must be {BUILTIN_PLUGIN!r} or 'package.module:callable'"
        if not self.refuse or not all(isinstance(x, str) and _LABEL_RE.match(x) for x in self.refuse):
            return "list at least one label to refuse (letters, digits and _ only)"
        if self.plugin == BUILTIN_PLUGIN:
            unknown = [x for x in self.refuse if x not in NUDENET_LABELS]
            if unknown:
                return f"the NudeNet model has no label {unknown[0]}"
        score = self.min_score
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0.0 < float(score) <= 1.0:
            return "the minimum score must be a number above 0 and at most 1"
        return ""


@dataclass(frozen=True)
class Verdict:
    """What a checker found: `labels` are (label, score) of every detection it reports, strongest
    first; `refused` when one of them is refused."""

    refused: bool
    labels: tuple[tuple[str, float], ...] = field(default_factory=tuple)

    @classmethod
    def of(cls, found: list[tuple[str, float]], spec: SafetySpec) -> "Verdict":
        """The spec's rule applied to a model's (label, score) detections: plug-ins may use it too."""
        found = sorted(((str(k), round(float(s), 3)) for k, s in found), key=lambda x: -x[1])
        refuse = set(spec.refuse)
        return cls(refused=any(k in refuse and s >= spec.min_score for k, s in found), labels=tuple(found))


class Checker(Protocol):
    def check(self, image_bgr) -> Verdict: ...


# -- the built-in plug-in: NudeNet's detector, on our own onnxruntime session ------------------------

def nudenet_model_file() -> Path:
    """Where the installed nudenet package keeps its model (found without importing it)."""
    spec = importlib.util.find_spec("nudenet")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(f"the content check is on but its model is not installed on the cluster: {INSTALL_HINT}")
    return Path(list(spec.submodule_search_locations)[0]) / NUDENET_MODEL_FILE


class NudenetChecker:
    """NudeNet 3.4.2's 320n detector. Its own pre- and post-processing (pinned version), our session:
    NudeDetector() passes no providers, which onnxruntime-gpu refuses; a 320x320 model runs on CPU in
    tens of milliseconds, so the GPU stays with the face swap."""

    def __init__(self, spec: SafetySpec, model_file: Path | None = None):
        path = model_file or nudenet_model_file()
        if not path.is_file():
            raise ModelError(f"the content check is on but its model is not installed on the cluster "
                             f"({path} is missing): {INSTALL_HINT}")
        digest = file_sha256(path)
        if digest != NUDENET_MODEL_SHA256:
            raise ModelError(f"the content check's model {path} is damaged (SHA-256 {digest[:12]}…, expected "
                             f"{NUDENET_MODEL_SHA256[:12]}…): reinstall it with {INSTALL_HINT} --force-reinstall")
        try:
            import onnxruntime
            from nudenet import nudenet as nn
        except ImportError as exc:
            raise ModelError(f"the content check is on but its model is not installed on the cluster ({exc}): "
                             f"{INSTALL_HINT}") from None
        self.spec, self._nn = spec, nn
        self.session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        self.input_name = self.session.get_inputs()[0].name

    def check(self, image_bgr) -> Verdict:
        blob, x_ratio, y_ratio, x_pad, y_pad, w, h = self._nn._read_image(image_bgr, 320)
        outputs = self.session.run(None, {self.input_name: blob})
        found = self._nn._postprocess(outputs, x_pad, y_pad, x_ratio, y_ratio, w, h, 320, 320)
        return Verdict.of([(d["class"], d["score"]) for d in found], self.spec)


def load_checker(spec: SafetySpec) -> Checker:
    """The checker the spec names, loaded once (a task checks every output with it). ModelError in
    plain words when it cannot be loaded: the task then fails every target with that reason."""
    if spec.plugin == BUILTIN_PLUGIN:
        return NudenetChecker(spec)
    module_name, _, attr = spec.plugin.partition(":")
    try:
        factory: Callable[[SafetySpec], Checker] = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ModelError(f"the content check's plug-in {spec.plugin} cannot be loaded ({exc}); install it "
                         f"where the worker runs, or choose the built-in '{BUILTIN_PLUGIN}'") from None
    try:
        return factory(spec)
    except ModelError:
        raise
    except Exception as exc:  # noqa: BLE001 - a plug-in's own failure, said once for every target
        raise ModelError(f"the content check's plug-in {spec.plugin} failed to load its model: {exc}") from None


# -- checking an output -------------------------------------------------------------------------

def refused_labels(verdict: Verdict, spec: SafetySpec) -> list[list]:
    """[label, score] of the detections that made `verdict` a refusal (for the record and the audit)."""
    return [[k, s] for k, s in verdict.labels if k in spec.refuse and s >= spec.min_score]


def _images(path: Path, is_video: bool, max_pixels: int | None = None):
    """The output's picture, or up to VIDEO_SAMPLES frames spread over a video (BGR arrays), each
    read as PNG from ffmpeg (`worker.ffmpeg.frame_command`: no picture over `max_pixels`)."""
    import cv2
    import numpy as np

    if not is_video:
        image = cv2.imread(str(path), cv2.IMREAD_COLOR)
        if image is None:
            raise ModelError(f"the content check cannot read the output {path.name}")
        yield image
        return
    from .video import probe_video

    duration = probe_video(path, max_pixels=max_pixels).duration or 0.0
    times = [duration * (i + 0.5) / VIDEO_SAMPLES for i in range(VIDEO_SAMPLES)] if duration else [0.0]
    for at in times:
        proc = subprocess.run(ff.frame_command(path, at, max_pixels=max_pixels), capture_output=True,
                              timeout=FRAME_TIMEOUT_S)
        frame = cv2.imdecode(np.frombuffer(proc.stdout, np.uint8), cv2.IMREAD_COLOR) if proc.stdout else None
        if frame is not None:
            yield frame


def check_output(checker: Checker, spec: SafetySpec, path: Path, is_video: bool,
                 max_pixels: int | None = None) -> list[list]:
    """[] when the output may be delivered, else the [label, score] pairs that refuse it. An output
    the check cannot read (one over `max_pixels` included) is refused too, with no labels named:
    unchecked is never delivered."""
    try:
        for image in _images(path, is_video, max_pixels):
            verdict = checker.check(image)
            if verdict.refused:
                return refused_labels(verdict, spec) or [["refused", 1.0]]
    except Exception as exc:  # noqa: BLE001 - whatever went wrong, the result was not shown to be fine
        log.warning("content check of %s failed: %s", path.name, exc)
        return [["unchecked", 0.0]]
    return []


def screen_output(checker: Checker | None, spec: SafetySpec | None, outcome, out_path: Path, is_video: bool,
                  poster: Path | None = None, max_pixels: int | None = None):
    """The outcome as delivered: unchanged when there is no check or nothing is refused; else the
    output (and a video's poster) deleted and the target failed with HELD_BACK and the labels.
    `max_pixels`: the job's pixel limit, which the check's decoders keep to as the worker's do."""
    if checker is None or spec is None or outcome.status not in ("done", "no_face") or not out_path.is_file():
        return outcome
    labels = check_output(checker, spec, out_path, is_video, max_pixels)
    if not labels:
        return outcome
    out_path.unlink(missing_ok=True)
    if poster is not None:
        poster.unlink(missing_ok=True)
    found = ", ".join(f"{k} {s:.2f}" for k, s in labels)
    log.warning("output %s held back by the content check: %s", out_path.name, found)
    outcome.status, outcome.code, outcome.params = "failed", HELD_BACK, {"labels": labels}
    outcome.message = f"{HELD_BACK_MESSAGE} ({found})"
    return outcome
