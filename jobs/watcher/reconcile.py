"""The watcher's safety net: a job that has not changed for longer than its tasks can run is
checked against Slurm's accounting of ALL its attempts, so no job stays unfinished once Slurm
has ended its work. Pure, like `jobs.watcher.decide`: rows and Slurm's records in, changes out.

    stale(job, now)                                      -> bool
    reconcile(job, attempts, accounted, queued, now)     -> [TaskChange, ...]

Why it exists: a task row can disagree with Slurm in a way the watcher's cycle never looks at
again. The cycle asks Slurm only about the current attempt's Slurm job, so a task row of an
earlier attempt that was changed by mistake (a retry's single-task array misread as index 0 once
turned a task that had COMPLETED in attempt 1 back to PENDING) keeps the job "running" for good,
and a Cancel of it waits for good too. The cause of that one is fixed (`jobs.watcher.poll._by_job`,
`JobRow.in_attempt`); this net catches what nobody has foreseen.

When a job is stale (`stale`): no change the pages show for longer than its template's time
limit plus STALE_MARGIN (a task cannot run longer than that), or a Cancel asked more than
CANCEL_SETTLE ago that Slurm has not ended. The watcher's slower beat then asks sacct about the
Slurm jobs of every attempt (one more id per attempt in the same command of the same round trip),
and for each task `reconcile` finds the latest attempt that ran its index:

- that attempt's record ended the task: a row that says otherwise (not ended, or of another
  attempt) takes that end and that attempt;
- no attempt's record has the index (sacct purged, a misrecorded row): a task of an earlier
  attempt takes the end the portal recorded when the next attempt started (`JobAttempt.ended`);
- still nothing, and the job was cancelled with none of its tasks left in the queue: the task
  ended CANCELLED.

A task that Slurm still runs or holds is never touched: the cycle's own rules (`decide`) follow it.
"""
from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

from django.utils.translation import gettext  # the job's language: the caller activates it

from cluster import SlurmTask
from cluster import states as slurm_states
from jobs.watcher.decide import JobRow, TaskChange, TaskRow

#: added to the time limit: slurmctld ends a task a little after its limit, and the accounting
#: and the output fetch follow it by seconds to minutes
STALE_MARGIN = timedelta(minutes=10)
#: how long after a Cancel the job waits for Slurm's own word before it is reconciled
CANCEL_SETTLE = timedelta(minutes=1)


@dataclasses.dataclass(frozen=True)
class AttemptRow:
    """One attempt of a job, as the portal recorded it (`JobAttempt`, or the job for a first run)."""

    number: int
    slurm_job_id: str
    indexes: tuple[int, ...] = ()
    #: {array index: end state} recorded when the next attempt started
    ended: dict = dataclasses.field(default_factory=dict)


def stale(job: JobRow, now: datetime) -> bool:
    """Whether the job should be reconciled on this beat (see the module's docstring)."""
    since = job.changed_at or job.submitted_at
    if since is None:
        return False
    if job.cancel_requested and now - since > CANCEL_SETTLE:
        return True
    return now - since > timedelta(seconds=job.time_limit_seconds) + STALE_MARGIN


def reconcile(job: JobRow, attempts: list[AttemptRow], accounted: dict[str, dict[int, SlurmTask]],
              queued: dict[int, SlurmTask], now: datetime) -> list[TaskChange]:
    """The task rows that disagree with Slurm's accounting of the job's attempts, corrected.

    `accounted`: sacct's records by Slurm job id and index, for every attempt's Slurm job (a job
    sacct was not asked about, or does not know, is simply missing). `queued`: the current
    attempt's tasks squeue still lists.
    """
    by_number = sorted(attempts, key=lambda a: a.number, reverse=True)
    in_queue = any(not slurm_states.is_terminal(t.state) for t in queued.values())
    changes = []
    for task in job.tasks:
        if task.index in queued and not slurm_states.is_terminal(queued[task.index].state):
            continue  # Slurm still holds it: the cycle's own rules follow it
        fields = _from_accounting(task, by_number, accounted) or _from_history(task, by_number)
        if fields is None and job.cancel_requested and not in_queue and not task.is_terminal:
            fields = {"state": "CANCELLED", "reason": slurm_states.plain_reason(
                SlurmTask(job.slurm_job_id, task.index, "CANCELLED"), "", gettext)[:300], "log_wait_since": None}
        if fields:
            fields = {k: v for k, v in fields.items() if getattr(task, k) != v}
            if fields:
                changes.append(TaskChange(task.index, fields))
    return changes


def _from_accounting(task: TaskRow, attempts: list[AttemptRow], accounted) -> dict | None:
    """The end of the latest attempt sacct knows to have run this index; None when it has not
    ended there, or sacct knows no attempt that ran it."""
    for attempt in attempts:
        record = accounted.get(attempt.slurm_job_id, {}).get(task.index) if attempt.slurm_job_id else None
        if record is None:
            continue
        if not slurm_states.is_terminal(record.state):
            return None  # it runs or waits there: not ours to decide
        if task.is_terminal and task.attempt == attempt.number:
            return None  # the row already says how it ended (from its log, perhaps): keep it
        state = slurm_states.effective_state(record, "")
        reason = "" if state == "COMPLETED" else slurm_states.plain_reason(record, "", gettext)
        return {"state": state, "attempt": attempt.number, "node": record.node or task.node,
                "exit_code": record.exit_code, "elapsed_seconds": record.elapsed_seconds, "reason": reason[:300],
                "log_wait_since": None}
    return None


def _from_history(task: TaskRow, attempts: list[AttemptRow]) -> dict | None:
    """A task not ended in its row: the end the portal recorded for it when the attempt that last
    ran it was followed by another (`JobAttempt.ended`). None when that attempt is the one running
    now, or recorded nothing: then only Slurm can say."""
    if task.is_terminal:
        return None
    last = next((a for a in attempts if task.index in a.indexes), None)  # newest first
    state = last.ended.get(str(task.index)) if last else None
    if state and slurm_states.is_terminal(state):
        return {"state": state, "attempt": last.number, "log_wait_since": None}
    return None
