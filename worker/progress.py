"""Progress records: the stable contract between the worker and the portal.

Each array task keeps ONE JSON file, `<output_dir>/progress/task-<N>.json` (`worker.layout`),
rewritten atomically (temp file in the same folder + rename) after every target and every
`video_progress_every` frames, so a reader always sees a whole, valid document:

    {
      "version": 1,
      "job": "<manifest job>",
      "task_index": 3,
      "state": "running" | "finished",
      "engine": "classic", "device": "dlib (CPU)",
      "started_at": 1764450000.1, "updated_at": 1764450012.7,
      "model_load_seconds": 0.8,
      "models": [{"name": "inswapper_128.onnx", "sha256": "e4a3..."}],   # optional, see below
      "targets": [
        {"index": 9, "target": "/abs/in/a.jpg", "output": "a.jpg",
         "status": "done" | "failed" | "no_face" | "skipped" | "running",
         "faces_found": 2, "faces_swapped": 2, "seconds": 0.41, "message": "",
         "frames_done": null, "frames_total": null, "stopped_by_task_end": false}
      ]
    }

Videos: while a video runs, `frames_done` / `frames_total` say how far it is (`frames_total` is the
container's count or an estimate from its duration, null when neither is known) and `seconds` is
the time spent on it so far, so a reader can tell the time left; the record is rewritten at most
every `FRAMES_WRITE_EVERY_S` seconds for frames (`ProgressWriter.report_frames`), and always at
the end (then `frames_done == frames_total`). A video's `faces_found` / `faces_swapped` are the
most seen in any one frame (people on screen at once), not detections summed over frames.
`poster` turns true once the video has written its poster, a small JPEG of one of its swapped
frames, at `<output_dir>/posters/<output>.jpg` (`worker.layout`), for the job page while it runs.

Target statuses (`worker.choices.TargetStatus`): `done` (output written), `no_face` (no face
matched: output is the unchanged input, counts as success), `skipped` (output already present from
an earlier attempt), `failed` (no output; `message` says why in plain words), `running` (in
progress, videos report frames).

`stopped_by_task_end` is true on a `failed` target that did not fail for its own reasons: its TASK
was stopped (SIGTERM at the time limit, `scancel`, pre-emption) while the target was running. Such
a target may succeed when run again (the portal retries it); `message` is for people only and its
wording may change. Records written before the field existed carry no flag; `TaskProgress.from_dict`
sets it for them from the message they began with (`STOPPED_BY_TASK_END`).

`models` lists the model files the task loaded, name and SHA-256 (`worker.modelset.engine_models`),
once its engine is ready; empty before that, and in records of a worker older than the field.

Readers must ignore fields they do not know (new fields may be added without a version bump).
This module imports no numpy, OpenCV or onnxruntime: the portal imports it.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .choices import SUCCESS_STATUSES, TARGET_STATUSES, TargetStatus  # noqa: F401 - re-exported
from .layout import PROGRESS_RECORD_GLOB, progress_record_name

PROGRESS_VERSION = 1
#: the least time between two rewrites of a record for a video's frames alone: a fast GPU does
#: 30+ frames a second, and hundreds of tasks rewriting files on shared storage that often would
#: load it for nothing (the portal reads the records every few seconds)
FRAMES_WRITE_EVERY_S = 2.0


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` so readers see either the old or the new file, never a partial one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


#: the message of a target stopped with its task (`stopped_by_task_end`). Records from before that
#: flag existed are recognised by a message beginning with these words; nothing else may rely on them.
STOPPED_BY_TASK_END = "stopped before this target finished"


@dataclass
class TargetRecord:
    index: int
    target: str
    output: str
    status: str = "running"
    faces_found: int = 0
    faces_swapped: int = 0
    seconds: float = 0.0
    message: str = ""
    frames_done: int | None = None
    frames_total: int | None = None
    #: the target failed because its task was stopped (time limit, cancel), not for its own reasons
    stopped_by_task_end: bool = False
    #: a video's poster is written (`worker.layout.OutputFolder.poster`): the portal may fetch it
    poster: bool = False
    #: which sentence `message` is, and its values, for the portal to say in the reader's language
    #: (worker.errors.TargetError); "" for a message the portal shows as it is
    code: str = ""
    params: dict = field(default_factory=dict)
    #: a photo whose swap did not take by the engine's own measure (worker.selfcheck): "" when it did
    check: str = ""
    check_params: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status in SUCCESS_STATUSES

    def stop_with_task(self, seconds: float) -> None:
        """Record that the task was stopped while this target ran: failed, flagged, with a message."""
        self.status = "failed"
        self.stopped_by_task_end = True
        self.message = STOPPED_BY_TASK_END + ": the task hit its time limit or was cancelled"
        self.code, self.params = "stopped_with_task", {}
        self.seconds = seconds

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TargetRecord":
        """Lenient: unknown fields are ignored, missing ones defaulted. A record of an older worker
        (no `stopped_by_task_end` field) is flagged when its message says it was stopped."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        rec = cls(**known)
        if "stopped_by_task_end" not in data and rec.status == "failed" and \
                isinstance(rec.message, str) and rec.message.startswith(STOPPED_BY_TASK_END):
            rec.stopped_by_task_end = True
        return rec


@dataclass
class TaskProgress:
    job: str
    task_index: int
    engine: str = ""
    device: str = ""
    state: str = "running"
    started_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    model_load_seconds: float | None = None
    #: the model files the engine loaded: [{"name", "sha256"}] (optional; older records have none)
    models: list[dict] = field(default_factory=list)
    targets: list[TargetRecord] = field(default_factory=list)
    version: int = PROGRESS_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TaskProgress":
        """Lenient reader for the portal: unknown fields are ignored, missing ones defaulted."""
        targets = [TargetRecord.from_dict(t) for t in data.get("targets", [])]
        known = set(cls.__dataclass_fields__) - {"targets"}
        return cls(**{k: v for k, v in data.items() if k in known}, targets=targets)

    @classmethod
    def loads(cls, text: str) -> "TaskProgress":
        return cls.from_dict(json.loads(text))


class ProgressWriter:
    """Owns one task's progress file; every change is written through at once (atomically)."""

    def __init__(self, progress_dir: Path, progress: TaskProgress):
        self.path = Path(progress_dir) / progress_record_name(progress.task_index)
        self.progress = progress
        self._frames_written_at = -math.inf
        # a task with several GPUs reports from one thread per GPU (worker.gpus)
        self._lock = threading.RLock()

    def flush(self) -> None:
        with self._lock:
            self.progress.updated_at = time.time()
            atomic_write_text(self.path, json.dumps(self.progress.to_dict(), ensure_ascii=False))

    def report_frames(self, record: TargetRecord, done: int, total: int | None, seconds: float,
                      now: float | None = None) -> bool:
        """A video's frames so far (and the `seconds` spent on it). Written through when the last
        write is FRAMES_WRITE_EVERY_S old, and always for the last frame; True when written."""
        record.frames_done, record.frames_total, record.seconds = done, total, round(seconds, 3)
        now = time.monotonic() if now is None else now
        with self._lock:
            if total != done and now - self._frames_written_at < FRAMES_WRITE_EVERY_S:
                return False
            self._frames_written_at = now
            self.flush()
        return True

    def start_target(self, record: TargetRecord) -> TargetRecord:
        with self._lock:
            self.progress.targets.append(record)
            self.flush()
        return record

    def finish(self) -> None:
        with self._lock:
            self.progress.state = "finished"
            self.flush()


def read_progress_dir(progress_dir: Path) -> list[TaskProgress]:
    """All task records under a progress folder (for tests and the shared-filesystem portal path)."""
    out = []
    for p in sorted(Path(progress_dir).glob(PROGRESS_RECORD_GLOB)):
        out.append(TaskProgress.loads(p.read_text(encoding="utf-8")))
    return out
