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

import functools
import re
from typing import Any, Callable, Protocol


class ReportedTask(Protocol):
    """What the rules below read of a task as Slurm reported it: `cluster.slurm.SlurmTask` is one.
    (This module sits below `cluster.slurm`, whose parsers use `base_state`: it names the shape, not
    the class.)"""

    state: str
    reason: str
    exit_code: int | None
    signal: int | None


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
    if isinstance(value, str):
        # The watcher asks this of every task of every active job each cycle (tens of thousands of
        # calls at a million targets): the same few spellings, so each is worked out once.
        return value if value in _KNOWN else _base_state_of_text(value)
    if isinstance(value, (list, tuple)):
        return _base_state_of_words([str(v) for v in value])
    return _base_state_of_text(str(value or ""))


@functools.lru_cache(maxsize=1024)
def _base_state_of_text(value: str) -> str:
    return _base_state_of_words(re.split(r"[\s,+]+", value.strip()))


def _base_state_of_words(words: list[str]) -> str:
    words = [w.strip().upper() for w in words if w.strip()]
    for word in words:
        if word in _KNOWN:
            return word
    return words[0] if words else "UNKNOWN"


def is_terminal(state: str) -> bool:
    return base_state(state) in TERMINAL_STATES


_MEMORY_KILL = re.compile(r"exceeded (job )?memory limit|oom[-_ ]kill", re.IGNORECASE)
_GPU_OOM = re.compile(r"CUDA out of memory|out of memory", re.IGNORECASE)
#: Apptainer's own last words when the container never started (the image gone or unreadable since
#: the job was submitted, a mount refused): "FATAL:   could not open image /x.sif: ...",
#: "FATAL:   container creation failed: ..."; it then exits 255
_CONTAINER_FAILED = re.compile(r"^FATAL:\s+(?:could not open image|container creation failed|while )",
                               re.IGNORECASE | re.MULTILINE)


def is_memory_kill(task: ReportedTask, log_tail: str = "") -> bool:
    """True when the task ended because it used more memory than the template asked for."""
    if task.state == "OUT_OF_MEMORY":
        return True
    if not _MEMORY_KILL.search(log_tail or ""):
        return False
    # jobacct_gather kills with SIGKILL: FAILED 0:9. JSON sometimes lacks the signal (None).
    return (task.state == "FAILED" and task.signal in (9, None)) or \
        (task.state == "CANCELLED" and task.signal == 9)


def effective_state(task: ReportedTask, log_tail: str = "") -> str:
    """The state to record: OUT_OF_MEMORY for either memory-kill form, else Slurm's own state."""
    return "OUT_OF_MEMORY" if is_memory_kill(task, log_tail) else task.state


def same(text: str) -> str:
    """The words as written (English): what `plain_reason` says when it is given no translator."""
    return text


def gettext_noop(text: str) -> str:
    """Marks words for the portal's catalogue (makemessages reads cluster/ too); translates nothing."""
    return text


def plain_reason(task: ReportedTask, log_tail: str = "", _: Callable[[str], str] = same) -> str:
    """Why a task is waiting or how it ended, in words for the person who started the job.

    Empty for a task that is running or finished well. `log_tail` is the end of the task's Slurm
    output file; it tells a memory kill or a GPU out-of-memory apart from other failures. `_`
    translates (the portal passes its gettext; this package imports no Django): every sentence is
    a whole catalogue entry, numbers are put in after translation.
    """
    state = task.state
    if is_memory_kill(task, log_tail):
        if state == "OUT_OF_MEMORY":
            return _("ran out of memory")
        return _("ran out of memory (stopped by the cluster for using more than the template's memory)")
    if state == "PENDING":
        return pending_reason(task.reason, _=_)
    if state in _ENDED:
        return _(_ENDED[state])
    if state != "FAILED":
        return ""
    if _GPU_OOM.search(log_tail or ""):
        return _("ran out of GPU memory")
    if task.exit_code == 255 and _CONTAINER_FAILED.search(log_tail or ""):
        return _("the worker's container could not start on the compute node (an admin can read why in the "
                 "task's log)")
    if task.exit_code == 1:
        return _("some photos or videos failed (see each one's message)")
    if task.exit_code == 2:
        return _("the worker could not start on the compute node (an admin can read why in the task's log)")
    if task.exit_code == 143 or task.signal == 15:
        return _("was stopped before it finished")
    if task.signal:
        return _("was stopped by the system (signal %(signal)s)") % {"signal": task.signal}
    if task.exit_code:
        return _("failed (exit code %(code)s; an admin can read why in the task's log)") % {"code": task.exit_code}
    if task.reason in _PENDING and task.reason not in ("None", ""):
        return _(_PENDING[task.reason])  # refused at scheduling, e.g. BadConstraints
    if task.reason and task.reason not in ("None", "NonZeroExitCode"):
        return _("failed (the cluster says: %(reason)s)") % {"reason": task.reason}
    return _("failed (an admin can read why in the task's log)")


#: how a task ended, for the states whose name says it all
_ENDED = {
    "TIMEOUT": gettext_noop("hit the time limit; choose a template with a longer time limit"),
    "NODE_FAIL": gettext_noop("the compute node failed"),
    "CANCELLED": gettext_noop("cancelled"),
    "PREEMPTED": gettext_noop("was paused for more urgent work"),
    "BOOT_FAIL": gettext_noop("the compute node failed to start"),
    "DEADLINE": gettext_noop("could not finish before its deadline"),
    "REVOKED": gettext_noop("was moved to another cluster"),
    "SUSPENDED": gettext_noop("suspended by an admin"),
    "REQUEUE_HOLD": gettext_noop("held after being requeued (ask an admin)"),
    "SPECIAL_EXIT": gettext_noop("held after being requeued (ask an admin)"),
}
_LIMIT = gettext_noop("your group's limit of running jobs is reached")
#: a task Slurm put back in the queue after it started (squeue's RestartCnt > 0): with
#: PreemptMode=REQUEUE an urgent job took its GPU; it runs again by itself and skips what it finished
_PAUSED = gettext_noop("paused to make room for urgent work; continues automatically")
#: the same, when the node it ran on is down or not answering (sinfo): Slurm requeued it after the
#: node failed (NODE_FAIL, JobRequeue=1), and it runs again on another node, skipping what it finished
_NODE_FAILED = gettext_noop("a cluster computer failed; the work continues on another")
#: a task of a job in a GPU booking that had not started when the booking's reservation ended:
#: Slurm holds it for good (RESV_DEL_HOLD, seen on 22.05)
_BOOKING_OVER = gettext_noop("held: the GPU booking ended before this batch could start; cancel the job and use "
                             "“Process the rest” to run what is left")
_PENDING = {
    "None": gettext_noop("waiting to be scheduled"),
    "": gettext_noop("waiting to be scheduled"),
    "Resources": gettext_noop("waiting for a free GPU"),
    "Priority": gettext_noop("waiting for other jobs ahead in the queue"),
    "Reservation": gettext_noop("waiting for your GPU booking to start"),
    "ReqNodeNotAvail": gettext_noop("waiting: the nodes are reserved or unavailable"),
    "BeginTime": gettext_noop("waiting for its scheduled start time"),
    "Dependency": gettext_noop("waiting for another job to finish first"),
    "DependencyNeverSatisfied": gettext_noop("will never start: a job it depends on did not succeed"),
    "PartitionTimeLimit": gettext_noop("the template's time limit is longer than the partition allows"),
    "QOSMaxWallDurationPerJobLimit": gettext_noop("the template's time limit is longer than your QOS allows"),
    "AssocMaxWallDurationPerJobLimit": gettext_noop("the template's time limit is longer than your account allows"),
    "PartitionDown": gettext_noop("waiting: the partition is down"),
    "PartitionInactive": gettext_noop("waiting: the partition is inactive"),
    "NodeDown": gettext_noop("waiting: a node it needs is down"),
    "BadConstraints": gettext_noop("the template asks for resources the cluster does not have"),
    "JobHeldUser": gettext_noop("held (release it to let it start)"),
    "JobHeldAdmin": gettext_noop("held by an admin"),
    "Licenses": gettext_noop("waiting for a licence"),
    "launch failed requeued held": gettext_noop("held after a failed start (ask an admin)"),
}


def node_failed_reason(_: Callable[[str], str] = same) -> str:
    """What a waiting task that Slurm requeued from a computer that died says (it runs again elsewhere)."""
    return _(_NODE_FAILED)


def paused_reason(_: Callable[[str], str] = same) -> str:
    """What a waiting task that Slurm requeued after it had started says (preempted by urgent work)."""
    return _(_PAUSED)


def waking_reason(boot_seconds: int, _: Callable[[str], str] = same) -> str:
    """What a task says while Slurm wakes the powered-down computer it was given (squeue state
    CONFIGURING: power saving's ResumeProgram is starting the node); `boot_seconds` is how long a
    node of that cluster takes to wake (the cluster profile's setting)."""
    minutes = max(1, int(boot_seconds / 60 + 0.5))  # to the nearest minute, halves up
    if minutes == 1:
        return _("starting a cluster computer, about a minute")
    return _("starting a cluster computer, about %(n)s minutes") % {"n": minutes}


def booking_over_reason(_: Callable[[str], str] = same) -> str:
    """What a task held because its booking's reservation ended says (state RESV_DEL_HOLD)."""
    return _(_BOOKING_OVER)


def pending_reason(reason: str, array_limit: int | None = None, _: Callable[[str], str] = same) -> str:
    """Slurm's pending reason in plain words. `array_limit` is the template's `%N`, when known;
    `_` translates, as in `plain_reason`."""
    text = (reason or "").strip().strip("()")
    if text in _PENDING:
        return _(_PENDING[text])
    key = text.split(",")[0].strip()  # "ReqNodeNotAvail, May be reserved for other job"
    if key == "JobArrayTaskLimit":
        if array_limit:
            return _("waiting: the template runs at most %(n)s batches of a job at once") % {"n": array_limit}
        return _("waiting: the template limits how many batches of a job run at once")
    if key in _PENDING:
        return _(_PENDING[key])
    if key.startswith(("QOS", "Assoc")) and ("Limit" in key or "Grp" in key or "Max" in key):
        return _(_LIMIT)
    return _("waiting (the cluster says: %(reason)s)") % {"reason": text}
