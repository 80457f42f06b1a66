"""What the watcher's rules (`jobs.watcher.decide`) read and return: the portal's rows as plain
values, what the cluster said this cycle, and the changes. No database, no SSH."""
from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

from cluster import SlurmTask
from cluster import states as slurm_states
from worker.choices import SUCCESS_STATUSES

#: how long a submitted job may be unknown to both squeue and sacct before it counts as lost
LOST_AFTER = timedelta(minutes=5)
#: how long a task killed by SIGKILL is re-read for slurmstepd's memory-kill line
KILL_LINE_WAIT = timedelta(seconds=20)
#: how long a task Slurm reports PREEMPTED is taken for one being requeued (PreemptMode=REQUEUE:
#: sacct shows the PREEMPTED run for a moment before the requeued one) rather than ended
#: (PreemptMode=CANCEL): seen requeued within seconds on 22.05
REQUEUE_WAIT = timedelta(minutes=2)
#: how long a target's output fetch may be outstanding before it is asked for again
FETCH_AGAIN_AFTER = timedelta(minutes=2)

PENDING, RUNNING, FAILED, OUT_OF_MEMORY = "PENDING", "RUNNING", "FAILED", "OUT_OF_MEMORY"
#: a task given a computer that power saving is waking (squeue); it waits like a pending one
CONFIGURING = "CONFIGURING"


# ---- what the portal knows (rows as plain values) -----------------------------------------------

@dataclasses.dataclass(frozen=True)
class TaskRow:
    index: int
    state: str = PENDING
    node: str = ""
    exit_code: int | None = None
    reason: str = ""
    elapsed_seconds: int | None = None
    gpus: int = 0
    attempt: int = 1
    log_wait_since: datetime | None = None

    @property
    def is_terminal(self) -> bool:
        return slurm_states.is_terminal(self.state)


@dataclasses.dataclass(frozen=True)
class TargetRow:
    index: int
    task_index: int
    status: str = "waiting"
    message: str = ""
    faces_found: int = 0
    faces_swapped: int = 0
    seconds: float | None = None
    frames_done: int | None = None
    frames_total: int | None = None
    failed_with_task: bool = False
    has_output: bool = False
    fetch_asked_at: datetime | None = None
    has_thumbnail: bool = False
    self_check: str = ""
    self_check_faces: int = 0

    @property
    def is_ok(self) -> bool:
        return self.status in SUCCESS_STATUSES


@dataclasses.dataclass(frozen=True)
class JobRow:
    id: str
    status: str
    slurm_job_id: str
    submitted_at: datetime | None
    error: str = ""
    expected_start: datetime | None = None
    tasks: tuple[TaskRow, ...] = ()
    targets: tuple[TargetRow, ...] = ()
    #: the attempt whose Slurm job `slurm_job_id` is; a task of an earlier attempt (one a retry did
    #: not rerun) is not in that job, and nothing Slurm says of that job changes it
    attempt: int = 1
    #: when the pages last saw it change (None: not since it was submitted); `cancel_requested`
    #: and the template's time limit: when it counts as stale (`jobs.watcher.reconcile`)
    changed_at: datetime | None = None
    cancel_requested: bool = False
    time_limit_seconds: int = 0
    #: the user's cluster folder the targets are read from ("" for uploaded files)
    target_folder: str = ""

    def in_attempt(self, task: TaskRow) -> bool:
        return task.attempt == self.attempt


# ---- what the cluster said ----------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class SlurmAnswer:
    """One job's tasks as squeue and sacct reported them this cycle, by array index.

    `answered`: every command asked answered without an error (an empty answer is still an answer).
    `asked_accounting`: sacct was asked about this job this cycle; when False, `accounted` is empty
    because nobody asked, not because Slurm forgot the job.
    """

    queued: dict[int, SlurmTask] = dataclasses.field(default_factory=dict)
    accounted: dict[int, SlurmTask] = dataclasses.field(default_factory=dict)
    answered: bool = True
    asked_accounting: bool = True
    #: the cluster's nodes that are down, failed or not answering (sinfo, same round trip)
    dead_nodes: frozenset[str] = frozenset()
    #: how long a powered-down node of this cluster takes to wake (ClusterProfile.node_boot_seconds)
    boot_seconds: int = 0


# ---- what changes -------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class TaskChange:
    index: int
    fields: dict


@dataclasses.dataclass(frozen=True)
class TargetChange:
    index: int
    fields: dict


@dataclasses.dataclass(frozen=True)
class HeldBack:
    """A result the worker's content check refused and deleted: audited once, as its target fails."""

    index: int
    labels: tuple


@dataclasses.dataclass(frozen=True)
class FetchOutputs:
    indexes: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class FetchPosters:
    """Running videos whose worker wrote a poster the job page does not have yet."""

    indexes: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class JobMove:
    """A lifecycle move (`jobs.job.lifecycle.TRANSITIONS`) with the fields it writes."""

    name: str
    fields: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class ClearError:
    """Every task is queued with a reason of its own: the job's older message no longer applies."""


@dataclasses.dataclass(frozen=True)
class ExpectedStart:
    """Slurm's estimate of when the job's first task starts changed (None: none, or it runs)."""

    when: datetime | None


@dataclasses.dataclass(frozen=True)
class EndAttempt:
    """Every task ended and every output is in: retry automatically, or finalise the job."""


Change = TaskChange | TargetChange | FetchOutputs | FetchPosters | JobMove | ClearError | ExpectedStart | EndAttempt


@dataclasses.dataclass
class Decision:
    changes: list = dataclasses.field(default_factory=list)
    #: array indexes whose log must be read in the next cycle's round trip
    logs_wanted: list[int] = dataclasses.field(default_factory=list)
    #: False when the rules stopped before the workers' records (Slurm knew nothing of the job this
    #: cycle): the watcher reads them all again next cycle, as they were not applied
    records_read: bool = True

    def of(self, kind) -> list:
        return [c for c in self.changes if isinstance(c, kind)]
