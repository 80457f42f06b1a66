"""Face engines. `load_engine` builds the one a task asked for, loading its models once.

`auto` picks `insightface` when its three models are present and pass their SHA-256 check, and
otherwise `classic` (CPU, no download), and says which in the log.
"""
from __future__ import annotations

import logging

from ..choices import ENGINE_NAMES
from ..errors import ModelError
from ..weights import INSIGHTFACE_MODELS, verify_models
from .base import Engine, Face, Identity

__all__ = ["ENGINE_NAMES", "Engine", "Face", "Identity", "load_engine", "resolve_engine_name"]

log = logging.getLogger("worker.engines")


def resolve_engine_name(name: str, models_dir: str | None, registry=None) -> str:
    """The concrete engine for `name` ('auto' resolved by checking the insightface models)."""
    if name != "auto":
        return name
    try:
        verify_models(models_dir, INSIGHTFACE_MODELS, registry=registry)
    except ModelError as exc:
        log.warning("engine auto: insightface models not usable (%s); using the classic CPU engine", exc)
        return "classic"
    return "insightface"


def load_engine(name: str, models_dir: str | None = None, registry=None, providers: list | None = None,
                gpu: int | None = None) -> Engine:
    """Build an engine ONCE per task (once per GPU of a task with several: `gpu`, the CUDA device).
    Raises ModelError / EngineUnavailable with a plain reason."""
    name = resolve_engine_name(name, models_dir, registry)
    if name == "classic":
        from .classic import ClassicEngine

        engine = ClassicEngine()
        log.info("engine classic: dlib landmarks + Delaunay warp on the CPU (no model download needed)")
    elif name == "insightface":
        from .insightface_engine import InsightFaceEngine

        engine = InsightFaceEngine(models_dir=models_dir, registry=registry, providers=providers, gpu=gpu)
    else:
        raise ValueError(f"unknown engine {name!r}; choose one of {', '.join(ENGINE_NAMES)}")
    log.info("engine %s ready on %s", engine.name, engine.device)
    return engine
