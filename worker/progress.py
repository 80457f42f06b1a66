"""Progress records: the stable contract between the worker and the portal.

Each array task keeps ONE JSON file, `<output_dir>/progress/task-<N>.json`, rewritten atomically
(temp file in the same folder + rename) after every target and every `video_progress_every`
frames, so a reader always sees a whole, valid document:

    {
      "version": 1,
      "job": "<manifest job>",
      "task_index": 3,
      "state": "running" | "finished",
      "engine": "classic", "device": "dlib (CPU)",
      "started_at": 1764450000.1, "updated_at": 1764450012.7,
      "model_load_seconds": 0.8,
      "targets": [
        {"index": 9, "target": "/abs/in/a.jpg", "output": "a.jpg",
         "status": "done" | "failed" | "no_face" | "skipped" | "running",
         "faces_found": 2, "faces_swapped": 2, "seconds": 0.41, "message": "",
         "frames_done": null, "frames_total": null}
      ]
    }

Target statuses: `done` (output written), `no_face` (no face matched: output is the unchanged
input, counts as success), `skipped` (output already present from an earlier attempt), `failed`
(no output; `message` says why in plain words), `running` (in progress, videos report frames).
Readers must ignore fields they do not know (new fields may be added without a version bump).
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

PROGRESS_VERSION = 1

TargetStatus = Literal["done", "failed", "no_face", "skipped", "running"]
TARGET_STATUSES: tuple[str, ...] = get_args(TargetStatus)
#: statuses that count as a successful target (the task's exit code stays 0)
SUCCESS_STATUSES = frozenset({"done", "no_face", "skipped"})


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


#: how the message of a target record begins when the target failed because its TASK was stopped
#: (time limit, cancel), not for its own reasons; the portal retries such targets (jobs.retry)
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

    @property
    def ok(self) -> bool:
        return self.status in SUCCESS_STATUSES


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
    targets: list[TargetRecord] = field(default_factory=list)
    version: int = PROGRESS_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TaskProgress":
        """Lenient reader for the portal: unknown fields are ignored, missing ones defaulted."""
        known_t = set(TargetRecord.__dataclass_fields__)
        targets = [TargetRecord(**{k: v for k, v in t.items() if k in known_t}) for t in data.get("targets", [])]
        known = set(cls.__dataclass_fields__) - {"targets"}
        return cls(**{k: v for k, v in data.items() if k in known}, targets=targets)

    @classmethod
    def loads(cls, text: str) -> "TaskProgress":
        return cls.from_dict(json.loads(text))


class ProgressWriter:
    """Owns one task's progress file; every change is written through at once (atomically)."""

    def __init__(self, progress_dir: Path, progress: TaskProgress):
        self.path = Path(progress_dir) / f"task-{progress.task_index}.json"
        self.progress = progress

    def flush(self) -> None:
        self.progress.updated_at = time.time()
        atomic_write_text(self.path, json.dumps(self.progress.to_dict(), ensure_ascii=False))

    def start_target(self, record: TargetRecord) -> TargetRecord:
        self.progress.targets.append(record)
        self.flush()
        return record

    def finish(self) -> None:
        self.progress.state = "finished"
        self.flush()


def read_progress_dir(progress_dir: Path) -> list[TaskProgress]:
    """All task records under a progress folder (for tests and the shared-filesystem portal path)."""
    out = []
    for p in sorted(Path(progress_dir).glob("task-*.json")):
        out.append(TaskProgress.loads(p.read_text(encoding="utf-8")))
    return out
