"""The worker's named choices, defined once: each a `Literal` type and the tuple of its values.

The manifest validates against these, the CLI offers them, and the portal derives its Django
choices from them (adding only labels), so a value is never spelled out in a second place.
Imports nothing but `typing`: the portal imports this module.
"""
from __future__ import annotations

from typing import Literal, get_args

#: the face engine a job asks for; `auto` picks `insightface` when its models are usable, else `classic`
EngineName = Literal["auto", "classic", "insightface"]
ENGINE_NAMES: tuple[str, ...] = get_args(EngineName)

#: which faces of a target are replaced: all, the largest, or those matching a reference face
FaceSelector = Literal["many", "one", "reference"]
FACE_SELECTORS: tuple[str, ...] = get_args(FaceSelector)

#: a target's status in a progress record (see `worker.progress`)
TargetStatus = Literal["done", "failed", "no_face", "skipped", "running"]
TARGET_STATUSES: tuple[str, ...] = get_args(TargetStatus)
#: target statuses that count as success (the task's exit code stays 0)
SUCCESS_STATUSES: frozenset[str] = frozenset({"done", "no_face", "skipped"})

#: a task's state in its progress record: `running` until its chunk is finished
TaskState = Literal["running", "finished"]
TASK_STATES: tuple[str, ...] = get_args(TaskState)

__all__ = [
    "ENGINE_NAMES", "EngineName", "FACE_SELECTORS", "FaceSelector", "SUCCESS_STATUSES",
    "TARGET_STATUSES", "TASK_STATES", "TargetStatus", "TaskState",
]
