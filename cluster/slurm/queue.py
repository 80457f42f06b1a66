"""The watcher's `squeue`: plain text, one line per task of the jobs asked about, and its parser.

22.05's `squeue --json` ignores --jobs and prints every job slurmctld holds (~0.1 s of a watcher
cycle on a busy cluster, whatever the number of jobs watched); its text output honours --jobs.
This asks for only the columns the watcher reads, each ended by a `|` (none of them can contain
one), and returns the same `SlurmTask` records `parse_squeue` makes from the JSON:

    squeue_tasks_argv(["33", "34"])                  ->  ["env", "TZ=UTC", "squeue", "--noheader", ...]
    parse_squeue_tasks(stdout, rc, stderr)           ->  [SlurmTask("33", 0, "RUNNING", ...), ...]

What the text says differently from the JSON, all seen on the local cluster (samples in
tests/cluster/samples/22.05/squeue_tasks_*.txt):

- `--array` prints one line per task, a pending array's tasks too ("33|2|PENDING|..."): never the
  collapsed "33_[2-749]" the JSON's `array_task_string` stands for. A job that is no array has the
  task "N/A".
- `--states=all`, as the JSON: an ended task stays listed until MinJobAge, so a job sacct has not
  recorded yet is not mistaken for one Slurm forgot (the watcher's "lost").
- The reason is the scheduler's description where it set one: "Nodes required for job are DOWN,
  DRAINED or reserved for jobs in higher priority partitions" where the JSON says "Resources".
  The descriptions that stand for a reason code are read back as that code.
- `tres-alloc` prints what a PENDING job requests ("...,gres/gpu=1") where the JSON's
  `tres_alloc_str` is empty until it runs: GPUs are counted only for a task given a node.
- A single job id slurmctld no longer holds makes squeue exit 1 with "Invalid job id specified"
  (several ids, none known: exit 0 and no lines): both mean "not in the queue". Any other failure
  (slurmctld down or restarting) is a `SlurmError`: squeue did not answer.
- How an ended task ended (exit code, signal, times) is not asked for: the watcher reads sacct for
  that, and never the queue's copy of an ended task (`jobs.watcher.decide.merged_states`).
- `StartTime` of a PENDING task is the backfill scheduler's estimate of its start ("N/A" when it
  has none yet); of a running task, when it started. squeue writes it in the local time of the
  machine it runs on, hence `TZ=UTC`: read as UTC, it is `SlurmTask.start_time` (epoch seconds).
- `RestartCnt`: how many times Slurm requeued the task. Seen on 22.05 with PreemptType=preempt/qos
  and PreemptMode=REQUEUE (sample squeue_tasks_preempted.txt): a running task preempted by an
  urgent job is PENDING again at once, reason "BeginTime", StartTime two minutes ahead (Slurm holds
  a requeued job back that long), RestartCnt 1; `sacct --duplicates` shows the earlier run PREEMPTED.
"""
from __future__ import annotations

import functools
import re
from datetime import datetime, timezone

from ..errors import SlurmError
from ..states import base_state
from .commands import IN_UTC, checked_job_ids
from .output import SlurmTask, expand_array_range, sorted_tasks, tres_gpus

#: the columns asked for, in order (`squeue --Format` names)
FIELDS = ("ArrayJobID", "ArrayTaskID", "State", "Reason", "NodeList", "tres-alloc", "StartTime", "RestartCnt")
# "Name:|": no width, so the whole value unpadded, then "|" (no value of these columns holds one).
_FORMAT = ",".join(f"{name}:|" for name in FIELDS)

# slurmctld's descriptions that stand for a reason code (src/slurmctld, 22.05), matched from the start.
_DESCRIBED_REASONS = (
    (re.compile(r"Nodes required for job are DOWN, DRAINED"), "Resources"),
)
# Given ONE id, squeue asks slurmctld for that job alone, and this is its answer for a job purged
# after MinJobAge (or never known); given several, it lists what it knows and exits 0.
_UNKNOWN_JOB = "Invalid job id specified"


def squeue_tasks_argv(job_ids: list[str]) -> list[str]:
    """`squeue` text of every task of these jobs, whatever its state, one line each."""
    if not job_ids:
        raise ValueError("squeue_tasks_argv needs at least one job id")
    return [*IN_UTC, "squeue", "--noheader", "--array", "--states=all", "--jobs=" + ",".join(checked_job_ids(job_ids)),
            "--Format=" + _FORMAT]


def parse_squeue_tasks(stdout: str, rc: int = 0, stderr: str = "") -> list[SlurmTask]:
    """The tasks `squeue_tasks_argv`'s command printed, given its exit status and stderr.

    Empty when none of the jobs is in the queue. Raises SlurmError when squeue did not answer
    (slurmctld down) or printed a line of another shape.
    """
    if rc != 0:
        if _UNKNOWN_JOB in (stderr or "") and not (stdout or "").strip():
            return []
        raise SlurmError(f"squeue failed (exit {rc}): {(stderr or stdout or '').strip()[-300:]}")
    tasks: list[SlurmTask] = []
    for line in (stdout or "").splitlines():
        if line.strip():
            tasks += _tasks_of(line)
    return sorted_tasks(tasks)


def _tasks_of(line: str) -> list[SlurmTask]:
    parts = line.rstrip("\n").split("|")
    if len(parts) != len(FIELDS) + 1 or parts[-1].strip() or not parts[0].strip().isdigit():
        raise SlurmError(f"squeue printed a line of an unexpected shape: {line[:200]!r}")
    job_id, task, state, reason, node, tres, start, restarts = (p.strip() for p in parts[:-1])
    state = base_state(state)
    fields = dict(state=state, reason=_reason_code(reason), node=node,
                  gpus=tres_gpus(tres) if node else 0,  # a pending job's "alloc" is its request
                  start_time=_utc_epoch(start), restarts=int(restarts) if restarts.isdigit() else 0)
    if task == "N/A":
        return [SlurmTask(job_id, None, **fields)]
    if task.isdigit():
        return [SlurmTask(job_id, int(task), **fields)]
    # A collapsed range ("2-749%2") only without --array; read it as the JSON's collapsed record.
    return [SlurmTask(job_id, i, pending_array_range=task.strip("[]"), **fields) for i in expand_array_range(task)]


@functools.lru_cache(maxsize=4096)  # the tasks of one array share their times: parsed once each
def _utc_epoch(text: str) -> int | None:
    """squeue's "2026-12-01T04:32:10" (written in UTC, see above) as epoch seconds; None for "N/A",
    "Unknown" or anything else that is no time."""
    try:
        return int(datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).timestamp())
    except ValueError:
        return None


def _reason_code(reason: str) -> str:
    for description, code in _DESCRIBED_REASONS:
        if description.match(reason):
            return code
    return reason
