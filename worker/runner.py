"""One Slurm array task: load the engine once, process its chunk of targets, record progress.

The environment and the manifest are read once (in `TaskConfig.from_env`), then passed down.
One bad target never stops the rest of the chunk; the exit code says whether all succeeded.
Every target is opened through `worker.targetfile` right before it is processed: one that leads
outside the manifest's `target_roots`, or inside its `refused_roots` (another team's folder), is
refused ("skipped: ...", status failed), never read.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .content_safety import load_checker, screen_output
from .engines import load_engine
from .errors import ManifestError, TargetError, WorkerError
from .gpus import run_on_each, visible_gpus
from .manifest import Manifest
from .modelset import engine_models, verify_pinned
from .process import Outcome, build_swapper, process_target
from .progress import ProgressWriter, TargetRecord, TaskProgress
from .provenance import label_for
from .signals import Terminated
from .targetfile import allowed_folders, open_target
from .weights import MODELS_DIR_ENV, REGISTRY_ENV, load_registry

log = logging.getLogger("worker.run")

EXIT_OK = 0
EXIT_TARGETS_FAILED = 1  # the chunk ran; some targets failed (their records say why)
EXIT_TASK_FAILED = 2  # nothing could run: bad manifest, models, engine or source face


@dataclass(frozen=True)
class TaskConfig:
    manifest: Manifest
    task_index: int
    models_dir: str | None
    registry_path: str | None
    tmp_root: str | None
    #: TESTS ONLY: MB to grow to and hold, instead of processing, until the task is killed
    #: ($FFP_TEST_ALLOCATE_MB or the hidden --test-allocate-mb; see worker.testhooks). 0: nothing.
    test_allocate_mb: int = 0
    #: the job folder (`worker.layout`): the manifest's own folder. Targets staged into its
    #: `targets/` (uploads) are admitted besides the manifest's `target_roots`.
    job_folder: str | None = None

    @classmethod
    def from_env(cls, manifest_path: str, task_index: int | None, models_dir: str | None,
                 registry_path: str | None, env: os._Environ | dict = os.environ,
                 test_allocate_mb: int | None = None) -> "TaskConfig":
        if task_index is None:
            raw = env.get("SLURM_ARRAY_TASK_ID")
            if raw is None:
                raise ManifestError("no task index: pass --task-index N or run inside a Slurm array job")
            try:
                task_index = int(raw)
            except ValueError:
                raise ManifestError(f"SLURM_ARRAY_TASK_ID={raw!r} is not a number") from None
        manifest = Manifest.load(manifest_path)
        manifest.chunk(task_index)  # validate the index now, before any model is loaded
        return cls(
            manifest=manifest,
            task_index=task_index,
            models_dir=models_dir or env.get(MODELS_DIR_ENV),
            registry_path=registry_path or env.get(REGISTRY_ENV),
            # Slurm sets TMPDIR to node-local scratch on most sites; video temp files go there.
            tmp_root=env.get("TMPDIR"),
            test_allocate_mb=test_allocate_mb if test_allocate_mb is not None else _whole(env.get("FFP_TEST_ALLOCATE_MB")),
            job_folder=str(Path(manifest_path).resolve().parent),
        )


def _finished_earlier(out_path: Path) -> bool:
    """An earlier attempt left a whole output. An output that cannot even be looked up (a name too
    long for the file system) is not there: processing it then fails that target alone."""
    try:
        return out_path.stat().st_size > 0
    except OSError:
        return False


def _whole(raw) -> int:
    try:
        return max(0, int(raw or 0))
    except ValueError:
        return 0


def _more_gpus(engine, m: Manifest, models_dir, registry) -> list:
    """Swappers for the task's other GPUs, when it was given several and the engine runs on the
    first (`worker.gpus`); [] otherwise."""
    gpus = visible_gpus()
    if len(gpus) < 2 or getattr(engine, "gpu", None) is None:
        return []
    more = []
    for gpu in gpus[1:]:
        other = load_engine(m.engine.name, models_dir, registry, gpu=gpu)
        if getattr(other, "gpu", None) != gpu:  # that GPU would not run it: fewer pipelines, not a slow one
            log.warning("GPU %d of the task cannot run the engine (%s); using %d GPU(s)", gpu, other.device, len(more) + 1)
            break
        more.append(build_swapper(other, list(m.sources), m.engine, label=label_for(m.job), watermark=m.watermark,
                                  self_check=m.self_check))
    return more


def run_task(cfg: TaskConfig) -> int:
    m = cfg.manifest
    chunk = m.chunk(cfg.task_index)
    progress = TaskProgress(job=m.job, task_index=cfg.task_index)
    writer = ProgressWriter(m.progress_dir, progress)
    m.outputs_dir.mkdir(parents=True, exist_ok=True)
    writer.flush()  # "task started" is visible to the portal before the (slow) model load

    registry = None
    if cfg.registry_path:
        registry = load_registry(cfg.registry_path)
    t0 = time.perf_counter()
    try:
        if cfg.test_allocate_mb:
            from .testhooks import hold_memory_until_killed

            hold_memory_until_killed(cfg.test_allocate_mb)  # TESTS ONLY; returns only by raising
        models_dir = cfg.models_dir
        if m.models is not None:
            # A template pinned to a model set: that folder, those hashes, or nothing runs.
            registry, models_dir = verify_pinned(m.models, registry), m.models.folder
        engine = load_engine(m.engine.name, models_dir, registry)
        swapper = build_swapper(engine, list(m.sources), m.engine, label=label_for(m.job), watermark=m.watermark,
                                  self_check=m.self_check)
        swappers = [swapper] + _more_gpus(engine, m, models_dir, registry)
        # The content check (issue 14), when the portal asks for one: loaded once, like the engine.
        checker = load_checker(m.safety) if m.safety is not None else None
    except WorkerError as exc:
        # Every target of the chunk is marked failed with the one reason, so the portal shows it.
        for i in chunk:
            progress.targets.append(TargetRecord(index=i, target=m.targets[i].path, output=m.targets[i].output,
                                                 status="failed", message=str(exc)))
        writer.finish()
        log.error("task %s cannot start: %s", cfg.task_index, exc)
        return EXIT_TASK_FAILED
    progress.engine, progress.device = engine.name, engine.device
    progress.models = engine_models(engine, registry)
    progress.model_load_seconds = round(time.perf_counter() - t0, 3)
    log.info("task %s: %d target(s), engine %s on %s%s, loaded in %.2fs",
             cfg.task_index, len(chunk), engine.name, engine.device,
             f" x {len(swappers)} GPUs, one pipeline each" if len(swappers) > 1 else "", progress.model_load_seconds)

    allowed = allowed_folders(m.target_roots, cfg.job_folder, m.refused_roots)
    failed: list[int] = []
    stop = threading.Event()

    def one(i: int, swapper) -> None:
        target = m.targets[i]
        out_path = m.output_path(i)
        rec = writer.start_target(TargetRecord(index=i, target=target.path, output=target.output))
        if _finished_earlier(out_path):
            # A retried task (requeue, node failure) keeps what an earlier attempt finished.
            rec.status, rec.message = "skipped", "output already present from an earlier attempt"
            rec.code = "done_earlier"  # the portal's words for it: jobs/results/target_words.py
            writer.flush()
            return

        t1 = time.perf_counter()
        poster = Path(m.output_folder.poster(target.output))

        def on_frames(done: int, total: int | None, rec=rec, t1=t1, poster=poster) -> None:
            # written by the video before its first report; with the content check on, frames are shown checked only
            rec.poster = checker is None and (rec.poster or poster.is_file())
            writer.report_frames(rec, done, total, time.perf_counter() - t1)

        try:
            with open_target(target.path, allowed) as opened:
                outcome = process_target(swapper, opened.path, out_path, on_frames=on_frames, tmp_root=cfg.tmp_root,
                                         name=opened.name, poster=poster, cancel=stop)
        except TargetError as exc:  # refused ("skipped: ..."), missing or unreadable: never opened
            outcome = Outcome(status="failed", message=str(exc), code=exc.code, params=exc.params)
        except Terminated:
            # Slurm's SIGTERM (time limit, scancel): leave a truthful record, then let the exit happen.
            rec.stop_with_task(seconds=round(time.perf_counter() - t1, 3))
            writer.finish()
            raise
        # Checked before the record says done: the portal fetches only outputs its record calls done.
        outcome = screen_output(checker, m.safety, outcome, out_path, target.is_video, poster, m.engine.max_pixels)
        rec.status, rec.message, rec.code, rec.params = outcome.status, outcome.message, outcome.code, outcome.params
        rec.faces_found, rec.faces_swapped = outcome.faces_found, outcome.faces_swapped
        rec.check, rec.check_params = outcome.check, outcome.check_params
        rec.seconds = round(time.perf_counter() - t1, 3)
        if outcome.frames is not None:
            rec.frames_done = rec.frames_total = outcome.frames
        writer.flush()
        level = logging.WARNING if outcome.status != "done" else logging.INFO
        log.log(level, "target %d %s: %s (%d/%d faces) %.2fs %s", i, target.output, outcome.status,
                outcome.faces_swapped, outcome.faces_found, rec.seconds, outcome.message)
        if not rec.ok:
            failed.append(i)

    # several GPUs: one pipeline each (worker.gpus); SIGTERM then reaches the pipelines through `stop`
    if len(swappers) > 1:
        try:
            run_on_each(chunk, swappers, one, stop)
        except Terminated:
            for rec in progress.targets:
                if rec.status == "running":
                    rec.stop_with_task(seconds=rec.seconds or 0.0)
            writer.finish()
            raise
    else:
        for i in chunk:
            one(i, swapper)
    writer.finish()
    log.info("task %s finished: %d of %d target(s) failed", cfg.task_index, len(failed), len(chunk))
    return EXIT_TARGETS_FAILED if failed else EXIT_OK
