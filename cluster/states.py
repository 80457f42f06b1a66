"""Slurm task states, and what they mean in plain words for the people who started the job.

The watching rule: a task that has left `squeue` is NEVER assumed to have succeeded. `sacct` decides
how it ended; if neither `squeue` nor `sacct` knows a job any more, the caller marks it lost (and
says so), it does not guess. `squeue --json` keeps finished jobs only for MinJobAge seconds, and
accounting lags the controller by seconds, so "not in squeue and not yet in sacct" must be retried
for a while before the job is declared lost.

Two ways a task runs out of memory: clusters with cgroup enforcement end it OUT_OF_MEMORY; clusters
with `JobAcctGatherParams=OverMemoryKill` (no cgroups) end it FAILED with signal 9 and leave
"exceeded memory limit" / "Exceeded job memory limit" in the task's log. `effective_state` folds the
second form into OUT_OF_MEMORY, so the portal keeps memory kills distinct from other failures.
"""
from __future__ import annotations

import re
import signal as _signal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .slurm import SlurmTask

# Base states (Slurm's JOB_STATE_BASE) a finished task ends in.
TERMINAL_STATES = frozenset({
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED",
    "BOOT_FAIL", "DEADLINE", "REVOKED",
})
# Still queued or running (base states plus the state words Slurm prints for flagged jobs).
ACTIVE_STATES = frozenset({
    "PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING", "REQUEUED", "REQUEUE_FED",
    "REQUEUE_HOLD", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD", "SPECIAL_EXIT",
    "POWER_UP_NODE",
})
_KNOWN = TERMINAL_STATES | ACTIVE_STATES


def base_state(value: Any) -> str:
    """The base state word from any of Slurm's spellings.

    "CANCELLED by 1001" (sacct text) -> CANCELLED; "RUNNING+COMPLETING" -> RUNNING;
    ["PENDING", "REQUEUED"] (newer JSON) -> PENDING; "cancelled" -> CANCELLED.
    """
    words = [str(v) for v in value] if isinstance(value, (list, tuple)) else \
        re.split(r"[\s,+]+", str(value or "").strip())
    words = [w.strip().upper() for w in words if w.strip()]
    for word in words:
        if word in _KNOWN:
            return word
    return words[0] if words else "UNKNOWN"


def is_terminal(state: str) -> bool:
    return base_state(state) in TERMINAL_STATES


_MEMORY_KILL = re.compile(r"exceeded (job )?memory limit|oom[-_ ]kill", re.IGNORECASE)
_GPU_OOM = re.compile(r"CUDA out of memory|out of memory", re.IGNORECASE)


def is_memory_kill(task: SlurmTask, log_tail: str = "") -> bool:
    """True when the task ended because it used more memory than the template asked for."""
    if task.state == "OUT_OF_MEMORY":
        return True
    if not _MEMORY_KILL.search(log_tail or ""):
        return False
    # jobacct_gather kills with SIGKILL: FAILED 0:9. JSON sometimes lacks the signal (None).
    return (task.state == "FAILED" and task.signal in (9, None)) or \
        (task.state == "CANCELLED" and task.signal == 9)


def effective_state(task: SlurmTask, log_tail: str = "") -> str:
    """The state to record: OUT_OF_MEMORY for either memory-kill form, else Slurm's own state."""
    return "OUT_OF_MEMORY" if is_memory_kill(task, log_tail) else task.state


def plain_reason(task: SlurmTask, log_tail: str = "") -> str:
    """Why a task is waiting or how it ended, in words for the person who started the job.

    Empty for a task that is running or finished well. `log_tail` is the end of the task's Slurm
    output file; it tells a memory kill or a GPU out-of-memory apart from other failures.
    """
    state = task.state
    if is_memory_kill(task, log_tail):
        if state == "OUT_OF_MEMORY":
            return "ran out of memory"
        return "ran out of memory (killed by Slurm for exceeding the template's memory)"
    if state == "PENDING":
        return pending_reason(task.reason)
    fixed = {
        "TIMEOUT": "hit the time limit; choose a template with a longer time limit",
        "NODE_FAIL": "the compute node failed",
        "CANCELLED": "cancelled",
        "PREEMPTED": "was pre-empted by a higher-priority job",
        "BOOT_FAIL": "the compute node failed to start",
        "DEADLINE": "could not finish before its deadline",
        "REVOKED": "was moved to another cluster",
        "SUSPENDED": "suspended by an admin",
        "REQUEUE_HOLD": "held after being requeued (ask an admin)",
        "SPECIAL_EXIT": "held after being requeued (ask an admin)",
    }
    if state in fixed:
        return fixed[state]
    if state != "FAILED":
        return ""
    if _GPU_OOM.search(log_tail or ""):
        return "ran out of GPU memory"
    if task.exit_code == 1:
        return "some images failed (see each image's message)"
    if task.exit_code == 2:
        return "the task could not start (see the log)"
    if task.exit_code == 143 or task.signal == 15:
        return "was stopped (SIGTERM)"
    if task.signal:
        try:
            name = _signal.Signals(task.signal).name
        except ValueError:
            name = "unknown signal"
        return f"was killed by signal {task.signal} ({name})"
    if task.exit_code:
        return f"failed with exit code {task.exit_code} (see the log)"
    if task.reason in _PENDING and task.reason not in ("None", ""):
        return _PENDING[task.reason]  # refused at scheduling, e.g. BadConstraints
    if task.reason and task.reason not in ("None", "NonZeroExitCode"):
        return f"failed (Slurm says: {task.reason})"
    return "failed (see the log)"


_LIMIT = "your group's limit of running jobs is reached"
_PENDING = {
    "None": "waiting to be scheduled",
    "": "waiting to be scheduled",
    "Resources": "waiting for a free GPU",
    "Priority": "waiting for other jobs ahead in the queue",
    "Reservation": "waiting for your reservation to start",
    "ReqNodeNotAvail": "waiting: the nodes are reserved or unavailable",
    "BeginTime": "waiting for its scheduled start time",
    "Dependency": "waiting for another job to finish first",
    "DependencyNeverSatisfied": "will never start: a job it depends on did not succeed",
    "PartitionTimeLimit": "the template's time limit is longer than the partition allows",
    "QOSMaxWallDurationPerJobLimit": "the template's time limit is longer than your QOS allows",
    "AssocMaxWallDurationPerJobLimit": "the template's time limit is longer than your account allows",
    "PartitionDown": "waiting: the partition is down",
    "PartitionInactive": "waiting: the partition is inactive",
    "NodeDown": "waiting: a node it needs is down",
    "BadConstraints": "the template asks for resources the cluster does not have",
    "JobHeldUser": "held (release it to let it start)",
    "JobHeldAdmin": "held by an admin",
    "Licenses": "waiting for a licence",
    "launch failed requeued held": "held after a failed start (ask an admin)",
}


def pending_reason(reason: str, array_limit: int | None = None) -> str:
    """Slurm's pending reason in plain words. `array_limit` is the template's `%N`, when known."""
    text = (reason or "").strip().strip("()")
    if text in _PENDING:
        return _PENDING[text]
    key = text.split(",")[0].strip()  # "ReqNodeNotAvail, May be reserved for other job"
    if key == "JobArrayTaskLimit":
        if array_limit:
            return f"waiting: the template runs at most {array_limit} tasks of a job at once"
        return "waiting: the template limits how many tasks of a job run at once"
    if key in _PENDING:
        return _PENDING[key]
    if key.startswith(("QOS", "Assoc")) and ("Limit" in key or "Grp" in key or "Max" in key):
        return _LIMIT
    return f"waiting (Slurm says: {text})"
