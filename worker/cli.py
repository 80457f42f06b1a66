"""Command line of the worker: `python -m worker run|swap|models ...`.

The only place that turns WorkerError into an exit code and a one-line message.
"""
from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from .choices import ENGINE_NAMES, FACE_SELECTORS
from .errors import WorkerError
from .manifest import EngineOptions

log = logging.getLogger("worker")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m worker", description="FaceFusion Portal face-swap worker")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="process one array task of a job manifest")
    run.add_argument("--manifest", required=True, help="path of the job's manifest.json")
    run.add_argument("--task-index", type=int, default=None, help="chunk to process (default: $SLURM_ARRAY_TASK_ID)")
    # TESTS ONLY (hidden): grow to N MB and hold it until killed, to exceed the task's memory limit.
    run.add_argument("--test-allocate-mb", type=int, default=None, help=argparse.SUPPRESS)
    _model_args(run)

    swap = sub.add_parser("swap", help="swap faces in one image or video")
    swap.add_argument("--source", action="append", required=True, help="source face image (repeat for more photos of the same person)")
    swap.add_argument("--target", required=True, help="image or video to change")
    swap.add_argument("--output", required=True, help="where to write the result")
    swap.add_argument("--engine", choices=ENGINE_NAMES, default="auto")
    swap.add_argument("--face-selector", choices=FACE_SELECTORS, default="many")
    swap.add_argument("--reference-face", help="image of the person to replace (with --face-selector reference)")
    swap.add_argument("--reference-distance", type=float, default=None)
    _model_args(swap)

    models = sub.add_parser("models", help="check or download the insightface models")
    models_sub = models.add_subparsers(dest="models_command", required=True)
    for name, helptext in (("check", "report each model's state"), ("fetch", "download missing models (needs internet)")):
        m = models_sub.add_parser(name, help=helptext)
        _model_args(m)
    return p


def _model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--models-dir", default=None, help="models folder (default: $FACEFUSION_MODELS_DIR)")
    p.add_argument("--registry", default=None, help="JSON model registry to use instead of the built-in one")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    from .signals import install_sigterm_handler

    install_sigterm_handler()
    try:
        if args.command == "run":
            return _run(args)
        if args.command == "swap":
            return _swap(args)
        return _models(args)
    except WorkerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _run(args) -> int:
    from .pipeline import set_opencv_threads
    from .runner import TaskConfig, run_task

    cfg = TaskConfig.from_env(args.manifest, args.task_index, args.models_dir, args.registry,
                              test_allocate_mb=args.test_allocate_mb)
    set_opencv_threads()
    return run_task(cfg)


def _registry(args):
    import os

    from .weights import REGISTRY_ENV, load_registry

    path = args.registry or os.environ.get(REGISTRY_ENV)
    return load_registry(path) if path else None


def _models_dir(args) -> str:
    import os

    from .weights import MODELS_DIR_ENV, default_models_dir

    return args.models_dir or os.environ.get(MODELS_DIR_ENV) or str(default_models_dir())


def _swap(args) -> int:
    from .engines import load_engine
    from .pipeline import set_opencv_threads
    from .process import build_swapper, process_target

    options = EngineOptions(
        name=args.engine,
        face_selector=args.face_selector,
        reference_face=args.reference_face,
        reference_distance=args.reference_distance,
    )
    from .errors import ManifestError

    try:
        options.validate()
    except ManifestError as exc:
        print(f"error: {exc}".replace("engine.", "--").replace("_", "-"), file=sys.stderr)
        return 2
    set_opencv_threads()
    engine = load_engine(options.name, _models_dir(args), _registry(args))
    from .provenance import label_for

    # A local swap has no job, but its output is labelled all the same.
    swapper = build_swapper(engine, args.source, options, label=label_for(""))
    t0 = time.perf_counter()
    outcome = process_target(swapper, args.target, args.output)
    secs = time.perf_counter() - t0
    if outcome.status == "failed":
        print(f"error: {outcome.message}", file=sys.stderr)
        return 1
    if outcome.status == "no_face":
        print(f"warning: {outcome.message}", file=sys.stderr)
    print(f"{args.output}: {outcome.status}, {outcome.faces_swapped} of {outcome.faces_found} face(s) swapped "
          f"in {secs:.2f}s with {engine.name} on {engine.device}")
    return 0


def _models(args) -> int:
    from .download import fetch_models
    from .errors import ModelError
    from .weights import INSIGHTFACE_MODELS, POSE_MODEL, check_models

    models_dir = _models_dir(args)
    registry = _registry(args)
    if args.models_command == "check":
        states = check_models(models_dir, (*INSIGHTFACE_MODELS, POSE_MODEL), registry=registry)
    else:
        states = fetch_models(models_dir, INSIGHTFACE_MODELS, registry=registry)
        try:
            states += fetch_models(models_dir, [POSE_MODEL], registry=registry)
        except ModelError as exc:  # optional: a mirror without it must not fail the fetch of the others
            print(f"warning: the optional model {POSE_MODEL} was not fetched: {exc}", file=sys.stderr)
            states += check_models(models_dir, [POSE_MODEL], registry=registry)
    print(f"models folder: {Path(models_dir)}")
    for s in states:
        optional = s.name == POSE_MODEL
        what = f"{s.detail} (optional: without it faces in profile are swapped too)" if optional else s.detail
        print(f"  {s.name:<14} {s.state:<8} {s.path}  {what}".rstrip())
    # a missing optional model is no failure; a corrupt one is (someone installed the wrong bytes)
    return 0 if all(s.ok or (s.name == POSE_MODEL and s.state == "missing") for s in states) else 1
