"""The watcher's rules, as ONE pure function: what changes, given what the portal knows and what
the cluster said. No database, no SSH, no clock (the time is an argument): tested like a table
over captured Slurm 22.05 output (tests/jobs/test_watcher_decide.py).

    decide(job, slurm, records, log_tails, now) -> Decision

The rules:

- A task that has left `squeue` is never assumed to have succeeded: `sacct` decides. A job that
  neither knows any more, well after submission and with both answering, is `lost`; when either
  command failed (slurmctld or slurmdbd restarting), nothing is concluded this cycle.
- `sacct` is asked only about a job with a task that left the queue (`expected_in_queue` says
  which tasks the cluster compares with its queue), and about every job on a slower beat. On a
  cycle that did not ask it about a job, nothing about that job's Slurm ends is concluded: no task
  ends and the job is never lost; only what the rows already say (ends recorded earlier, outputs
  fetched since) can end the attempt.
- `sacct` has the final word on a task it reports ended; `squeue` is fresher for one that waits
  or runs (a task `squeue` still shows COMPLETING has ended when `sacct` says so).
- A task seen FAILED is recorded only once the end of its log has been read: the log tells a
  memory kill (OverMemoryKill clusters end it FAILED with signal 9 and write "exceeded memory
  limit") or a GPU out-of-memory apart from other failures. While waiting, the task row carries
  `log_wait_since`, and the next cycle's single SSH round trip reads its log. A task killed by
  SIGKILL whose log does not have the line yet is read again, cycle after cycle, until the line
  appears or KILL_LINE_WAIT has passed (slurmstepd writes it a moment after the kill).
- A running video whose worker wrote its poster (record `poster`) has it fetched once, so the
  job page shows a frame of it before it ends (`FetchPosters`, on the RQ worker like outputs).
- A waiting task that Slurm requeued after it started (squeue's restart count; PreemptMode=REQUEUE:
  urgent work took its GPU) is "paused to make room for urgent work; continues automatically",
  never failed. So is a task Slurm reports PREEMPTED, for REQUEUE_WAIT (the moment before the
  requeued run appears; seen in a real run: the job was ended early without this), after which
  it has ended PREEMPTED (a cluster that cancels preempted work); the target its worker was stopped on waits again (the rerun skips finished ones).
- A requeued task whose node is down or not answering (sinfo, same round trip) lost its computer:
  "a cluster computer failed; the work continues on another" (Slurm reruns it on a node that
  works, skipping what it finished). A task that ended NODE_FAIL (a cluster that does not requeue)
  is retried by the portal (`jobs.job.retry`).
- A job none of whose tasks runs carries Slurm's own estimate of its start (the earliest of its
  waiting tasks' squeue StartTime), `ExpectedStart`; None once a task runs or Slurm has none.
- Only the tasks of the current attempt follow its Slurm job: a retry reruns some indexes, and a
  task it did not rerun keeps how it ended in its own attempt, whatever the new Slurm job says.
- The attempt has ended when every task is terminal, no task waits for its log, and every
  target that succeeded has its output fetched: then the caller applies the automatic retry
  policy or finalises the job (`EndAttempt`). Until then the job stays running, so "completed"
  always means the results can be downloaded.
"""
from __future__ import annotations

import dataclasses
import functools
from datetime import datetime, timezone

from django.utils.translation import (
    get_language,
    gettext,  # the job's language: the caller activates it (jobs.words)
)

from cluster import SlurmTask
from cluster import states as slurm_states
from jobs.results.target_words import target_message
from jobs.watcher.rows import (  # noqa: F401 (the rules' vocabulary, imported from here by their callers)
    CONFIGURING,
    FAILED,
    FETCH_AGAIN_AFTER,
    KILL_LINE_WAIT,
    LOST_AFTER,
    OUT_OF_MEMORY,
    PENDING,
    REQUEUE_WAIT,
    RUNNING,
    ClearError,
    Decision,
    EndAttempt,
    ExpectedStart,
    FetchOutputs,
    FetchPosters,
    HeldBack,
    JobMove,
    JobRow,
    SlurmAnswer,
    TargetChange,
    TargetRow,
    TaskChange,
    TaskRow,
)
from worker.content_safety import HELD_BACK
from worker.progress import TaskProgress
from worker.selfcheck import CODES as SELF_CHECK_CODES

# ---- the rules ----------------------------------------------------------------------------------

def expected_in_queue(job: JobRow) -> list[int]:
    """The indexes of the tasks the portal believes still queued or running: those the cluster
    compares with its queue to decide whether sacct is needed (`cluster.slurm.accounting`). A task
    waiting for its log is among them: its FAILED state comes from sacct, read again each cycle."""
    return sorted(t.index for t in job.tasks if not t.is_terminal and job.in_attempt(t))


def merged_states(slurm: SlurmAnswer) -> dict[int, SlurmTask]:
    """One Slurm record per index: sacct's for an ended task, squeue's for one waiting or running."""
    states = dict(slurm.accounted)
    for index, task in slurm.queued.items():
        if slurm_states.is_terminal(task.state):
            continue  # squeue's copy of an ended task: sacct (or the next cycle) has it
        ended = slurm.accounted.get(index)
        if ended is not None and slurm_states.is_terminal(ended.state) and task.state == "COMPLETING":
            continue  # slurmd still cleaning up a task that sacct already reports ended
        states[index] = task
    return states


def _is_sigkill(st: SlurmTask) -> bool:
    # The JSON sometimes lacks the signal of a SIGKILL (None, no exit code either).
    return st.state == FAILED and (st.signal == 9 or (st.signal is None and not st.exit_code))


def decide_task(task: TaskRow, st: SlurmTask, log_tail: str | None, now: datetime,
                requeued: bool = False, dead_nodes: frozenset[str] = frozenset(),
                boot_seconds: int = 0) -> tuple[dict, bool]:
    """(fields to change, waits for its log) for one task. `requeued`: sacct reports the task
    active again after an end (Slurm requeued it), so an end recorded earlier is undone.
    `dead_nodes`: the cluster's nodes that are down or not answering; `boot_seconds`: how long one
    of its powered-down nodes takes to wake."""
    if task.is_terminal and not slurm_states.is_terminal(st.state):
        if not requeued:
            return {}, False  # never back out of an end on a stale answer
        return _recorded(task, st, st.state, _waiting_reason(st, task, dead_nodes, boot_seconds)), False
    if st.state == "PREEMPTED" and not task.is_terminal:
        since = task.log_wait_since or now  # when it was first seen preempted
        if now - since < REQUEUE_WAIT:
            fields = _recorded(task, st, PENDING, slurm_states.paused_reason(gettext))
            fields.update(node="", exit_code=None, log_wait_since=since)
            return {k: v for k, v in fields.items() if getattr(task, k) != v}, False
    if st.state == FAILED and not task.is_terminal:
        since = task.log_wait_since
        if log_tail is None:  # not read yet: ask for it in the next round trip
            return ({} if since else {"log_wait_since": now}), True
        state = slurm_states.effective_state(st, log_tail)
        if state == FAILED and _is_sigkill(st) and since is not None and now - since < KILL_LINE_WAIT:
            return {}, True  # slurmstepd may not have written the memory-kill line yet
        return _recorded(task, st, state, slurm_states.plain_reason(st, log_tail, gettext)), False
    if task.is_terminal:
        # Decided when it ended (from its log, for a failure); later answers only add details.
        return _recorded(task, st, task.state, task.reason), False
    if slurm_states.is_terminal(st.state):
        state = slurm_states.effective_state(st, "")
        return _recorded(task, st, state, "" if state == "COMPLETED" else slurm_states.plain_reason(st, "", gettext)), False
    return _recorded(task, st, st.state, _waiting_reason(st, task, dead_nodes, boot_seconds)), False


def _waiting_reason(st: SlurmTask, task: TaskRow, dead_nodes: frozenset[str], boot_seconds: int = 0) -> str:
    """Why a task waits, in plain words; "" for one that runs. A task Slurm requeued after it started
    was either paused for urgent work or lost its computer: the node it last ran on (kept on its row
    while it waits) being down tells which. squeue says the same of both (BeginTime, a restart
    count; seen on 22.05, 24.11 and 26.05), and the earlier run's end is only in sacct --duplicates."""
    if st.state == "RESV_DEL_HOLD":
        return slurm_states.booking_over_reason(gettext)
    if st.restarts and st.state in (PENDING, RUNNING):
        # Waiting, or already running again elsewhere (26.05 reran it at once: no waiting was seen),
        # after the node it ran on died; said until it has finished.
        node_failed = slurm_states.node_failed_reason(gettext)
        moved = task.node and task.node != st.node and task.node in dead_nodes
        if moved or task.reason == node_failed:
            return node_failed
    if st.state == CONFIGURING:  # given a computer that is asleep: Slurm is powering it on
        return slurm_states.waking_reason(boot_seconds, gettext)
    if st.state != PENDING:
        return ""
    if st.restarts:
        return slurm_states.paused_reason(gettext)
    return _pending_words(st.reason, get_language())


@functools.lru_cache(maxsize=512)
def _pending_words(reason: str, language: str | None) -> str:
    """Why a task waits, in `language` (the active one: the caller passes it so that each language
    has its own entry). Every waiting task of every job asks each cycle, nearly always the same
    few reasons: under the load run, 8,000 waiting tasks' translations were a tenth of a cycle."""
    return slurm_states.pending_reason(reason, _=gettext)


def _expected_start(rows, states: dict[int, SlurmTask], boot_seconds: int = 0) -> datetime | None:
    """The earliest squeue StartTime of the waiting tasks, while none runs. A task whose computer
    is being woken (CONFIGURING) starts when it has booted: its StartTime (when Slurm gave it the
    computer) plus the cluster's boot time."""
    if any(t.state == RUNNING for t in rows):
        return None
    starts = [states[t.index].start_time + (boot_seconds if t.state == CONFIGURING else 0) for t in rows
              if t.state in (PENDING, CONFIGURING) and t.index in states and states[t.index].start_time]
    return datetime.fromtimestamp(min(starts), tz=timezone.utc) if starts else None


def _recorded(task: TaskRow, st: SlurmTask, state: str, reason: str) -> dict:
    new = {"state": state, "node": st.node or task.node, "exit_code": st.exit_code,
           "elapsed_seconds": st.elapsed_seconds, "reason": reason[:300], "gpus": st.gpus or task.gpus,
           "log_wait_since": None}
    return {k: v for k, v in new.items() if getattr(task, k) != v}


def target_fields(record, folder: str = "") -> dict:
    """What a worker's record of one target sets on its row (a video's frames as it runs, too);
    `folder`: the job's cluster folder, for a folder job (its damaged files are exported again there)."""
    message = target_message(getattr(record, "code", ""), getattr(record, "params", {}), record.message, folder)
    return {"status": record.status, "message": message[:2000], "faces_found": record.faces_found,
            "faces_swapped": record.faces_swapped, "seconds": record.seconds,
            "frames_done": _count_or_none(getattr(record, "frames_done", None)),
            "frames_total": _count_or_none(getattr(record, "frames_total", None)),
            "failed_with_task": record.status == "failed" and bool(getattr(record, "stopped_by_task_end", False)),
            **_self_check(record)}


def _self_check(record) -> dict:
    """The worker's look at a photo's result (worker.selfcheck), as the row stores it; a code this
    portal does not know, or odd values, count as no flag (a record is the worker's word)."""
    code = getattr(record, "check", "")
    faces = (getattr(record, "check_params", None) or {}).get("faces", 0)
    if code not in SELF_CHECK_CODES or record.status != "done":
        return {"self_check": "", "self_check_faces": 0}
    return {"self_check": code, "self_check_faces": min(_count_or_none(faces) or 0, 32767)}


def _count_or_none(value) -> int | None:
    """A frame count as the row stores it: a whole number >= 0, or None (a record is the worker's
    word, but an odd value must never stop the watcher's cycle)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value < 0:
        return None
    return min(int(value), 2**31 - 1)


def _may_ask(target: TargetRow, now: datetime) -> bool:
    """A running video's poster may be asked for: none shown yet, and no fetch outstanding."""
    return not target.has_thumbnail and (target.fetch_asked_at is None
                                         or now - target.fetch_asked_at > FETCH_AGAIN_AFTER)


def decide(job: JobRow, slurm: SlurmAnswer, records: list[TaskProgress], log_tails: dict[int, str],
           now: datetime) -> Decision:
    decision = Decision()
    changes = decision.changes
    if not slurm.queued and not slurm.accounted and slurm.asked_accounting:
        if slurm.answered and job.submitted_at and now - job.submitted_at > LOST_AFTER:
            changes.append(JobMove("lose", {"finished_at": now}))
        decision.records_read = False
        return decision

    states = merged_states(slurm)
    tasks: dict[int, TaskRow] = {t.index: t for t in job.tasks}
    for task in job.tasks:
        st = states.get(task.index) if job.in_attempt(task) else None
        if st is None:
            if task.log_wait_since is not None and not task.is_terminal:
                decision.logs_wanted.append(task.index)  # gone from squeue, not yet in sacct: still waiting
            continue
        ended_before = slurm.accounted.get(task.index)
        requeued = ended_before is not None and not slurm_states.is_terminal(ended_before.state)
        fields, waits = decide_task(task, st, log_tails.get(task.index), now, requeued=requeued,
                                    dead_nodes=slurm.dead_nodes, boot_seconds=slurm.boot_seconds)
        if waits:
            decision.logs_wanted.append(task.index)
        if fields:
            changes.append(TaskChange(task.index, fields))
            tasks[task.index] = dataclasses.replace(task, **fields)

    # Tasks requeued after they started (preempted, or their node failed): the target their worker
    # was stopped on waits again, saying why.
    requeued_why = (slurm_states.paused_reason(gettext), slurm_states.node_failed_reason(gettext))
    paused = {i: t.reason for i, t in tasks.items() if t.state == PENDING and t.reason in requeued_why}
    targets: dict[int, TargetRow] = {t.index: t for t in job.targets}
    posters = []
    for progress in records:
        for rec in progress.targets:
            target = targets.get(rec.index)
            if target is None:
                continue
            fields = target_fields(rec, job.target_folder)
            if target.task_index in paused and fields["failed_with_task"]:
                fields.update(status="waiting", message=paused[target.task_index], failed_with_task=False,
                              seconds=None)
            new = {k: v for k, v in fields.items() if getattr(target, k) != v}
            if new:
                changes.append(TargetChange(rec.index, new))
                if new.get("status") == "failed" and getattr(rec, "code", "") == HELD_BACK:
                    changes.append(HeldBack(rec.index, tuple((getattr(rec, "params", None) or {}).get("labels") or ())))
                targets[rec.index] = dataclasses.replace(target, **new)
            if rec.status == "running" and getattr(rec, "poster", False) and _may_ask(targets[rec.index], now):
                posters.append(rec.index)
    # A record read in an earlier cycle, before Slurm showed its task requeued: the target it
    # failed with the task waits again all the same (records are read only when they change).
    for target in list(targets.values()):
        if target.task_index in paused and target.failed_with_task and target.status == "failed":
            new = {"status": "waiting", "message": paused[target.task_index], "failed_with_task": False, "seconds": None}
            changes.append(TargetChange(target.index, new))
            targets[target.index] = dataclasses.replace(target, **new)
    if posters:
        changes.append(FetchPosters(tuple(sorted(posters))))

    missing = [t for t in targets.values() if t.is_ok and not t.has_output]
    ask = tuple(sorted(t.index for t in missing
                       if t.fetch_asked_at is None or now - t.fetch_asked_at > FETCH_AGAIN_AFTER))
    # (a poster's fetch clears fetch_asked_at when done, so a video that ends meanwhile is not held up)
    if ask:
        changes.append(FetchOutputs(ask))

    rows = list(tasks.values())
    expected = _expected_start(rows, states, slurm.boot_seconds) if job.status in ("pending", "running") else None
    if expected != job.expected_start:
        changes.append(ExpectedStart(expected))
    if rows and all(t.is_terminal for t in rows) and not decision.logs_wanted and not missing:
        changes.append(EndAttempt())
    elif job.status == "pending" and any(t.state == RUNNING for t in rows):
        changes.append(JobMove("started", {"started_at": now}))
    elif job.error and rows and all(t.state == PENDING for t in rows) and rows[0].reason \
            and job.error != rows[0].reason:
        changes.append(ClearError())
    return decision
