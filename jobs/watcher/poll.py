"""The watcher: one poll of one cluster profile, for ALL its active jobs, in ONE SSH round trip.

    poll (this module)  ->  decide (jobs.watcher.decide, pure)  ->  apply_all (jobs.watcher.batch)

Each cycle runs `squeue` (text, of our jobs only: `cluster.slurm.queue`), the accounting query, the
cluster's clock and a `find` over the jobs' progress folders printing only the records rewritten
since the last cycle read them (a job new to this process: all of them; `cluster.progress`), `sinfo`
of the nodes that are down (`cluster.slurm.nodes`) and `tail` of the logs the last cycle asked for,
all in ONE
exec (`SSHRunner.run_batch`), whatever happens. The accounting query (`cluster.slurm.accounting`)
runs `sacct` (~0.36 s of slurmdbd, the cycle's largest fixed cost) only for the jobs with a task
that left the queue, decided on the cluster in that same exec from the tasks the rows call queued
or running; and for every job once per ACCOUNTING_EVERY (the slower beat, which also sees tasks Slurm requeued after their end).

State lives in the database only (a task waiting for its log says so on its row), so a restarted
watcher resumes from the stored Slurm ids: the question "which tasks left the queue" is asked
afresh each cycle, and the beat is due at once in a new process. What the process keeps (when the
records were last read, which writes were applied) only saves reading: a new process reads every
record once.
"""
from __future__ import annotations

import dataclasses
import logging
import secrets
import threading
import time
from dataclasses import dataclass, field

from django.utils import timezone

import cluster
from cluster import ClusterError, slurm
from cluster.progress import clock_argv, log_tail_argv, parse_clock, parse_progress_dump, progress_argv
from jobs.job.model_sets import record_models_used
from jobs.live.protocol import Publisher
from jobs.log_context import log_context
from jobs.models import ClusterProfile, Job, JobAttempt, JobStatus
from jobs.watcher import reconcile
from jobs.watcher.apply import job_row, target_rows, task_rows
from jobs.watcher.batch import Item, apply_all
from jobs.watcher.decide import SlurmAnswer, decide, expected_in_queue
from jobs.words import in_language_of
from worker.progress import TaskProgress

log = logging.getLogger(__name__)

#: logs read per cycle at most (a mass failure is read over a few cycles; the command line stays short)
MAX_LOG_TAILS = 200
#: seconds between two cycles that ask sacct about every active job, whatever the queue says
ACCOUNTING_EVERY = 30.0

# When each profile's last every-job accounting answered (time.monotonic()). Losing it costs one
# early sacct (a new process asks at once), never a missed end: nothing else depends on it.
_last_full_accounting: dict[int, float] = {}
_accounting_lock = threading.Lock()

#: seconds a record's time may lag the cluster's clock (written during the last read; a file
#: server's clock a little behind) and still be read as changed
PROGRESS_OVERLAP_S = 3.0
#: jobs remembered as read (a few hundred a day at a million photos); past it, only the current ones
KNOWN_JOBS_MAX = 20_000
# Per profile: the cluster's clock when the last cycle's records were read, and the jobs they were
# read for. Losing it (a new process) costs one whole read, never a missed record.
_last_progress_read: dict[int, tuple[float | None, frozenset]] = {}
# Per profile: which write of each record the last cycle applied (the overlap reads it again)
_last_applied: dict[int, dict[tuple, float]] = {}
_progress_lock = threading.Lock()


@dataclass
class CycleResult:
    jobs: int = 0
    changed: list[str] = field(default_factory=list)
    error: str = ""
    #: SSH execs this cycle made (one, whatever happens)
    execs: int = 0
    #: Slurm jobs sacct was asked about (0: every expected task was still in the queue)
    accounted: int = 0


def poll_profile(profile: ClusterProfile) -> CycleResult:
    jobs = list(Job.objects.filter(cluster=profile, status__in=(JobStatus.PENDING, JobStatus.RUNNING))
                .exclude(slurm_job_id="").select_related("cluster", "owner").order_by("created_at"))
    result = CycleResult(jobs=len(jobs))
    if not jobs:
        return result
    tasks = task_rows([j.pk for j in jobs])
    bare = {j.pk: job_row(j, tasks.get(j.pk, ()), ()) for j in jobs}  # targets join once records are read
    expected: dict[str, set[int]] = {}
    for job in jobs:  # two rows never share a Slurm id, but the union is right if they did
        expected.setdefault(job.slurm_job_id, set()).update(expected_in_queue(bare[job.pk]))
    ids = sorted(expected)
    folders = {j.pk: j.folder for j in jobs}
    logs = [(job, task.index, folders[job.pk].log(job.slurm_job_id, task.index))
            for job in jobs for task in tasks.get(job.pk, ()) if task.log_wait_since is not None][:MAX_LOG_TAILS]
    mark, every_job = secrets.token_hex(8), _full_accounting_due(profile.pk)
    # On the slower beat, sacct also tells how the earlier attempts of a stale job ended (reconcile).
    stale = attempt_rows([j for j in jobs if every_job and reconcile.stale(bare[j.pk], timezone.now())], tasks)
    accounting = {i: sorted(expected[i]) for i in ids}
    for attempt in (a for attempts in stale.values() for a in attempts):
        accounting.setdefault(attempt.slurm_job_id, [])
    since, known = _progress_since(profile.pk)
    commands = [slurm.squeue_tasks_argv(ids),
                slurm.accounting_when_needed_argv(accounting, mark, every_job),
                clock_argv(),
                progress_argv([f.progress for pk, f in folders.items() if pk not in known]),
                progress_argv([f.progress for pk, f in folders.items() if pk in known], newer_than=since),
                slurm.dead_nodes_argv()]
    commands += [log_tail_argv(path) for _job, _index, path in logs]
    try:
        runner = cluster.runner_for(profile)
        result.execs += 1
        answers = runner.run_batch(commands, timeout=60)
    except ClusterError as exc:
        _unreachable(profile, jobs, exc)
        result.error = str(exc)
        return result
    sq, acct, clock, whole, changed, dead, *tails = answers
    # (a failed sinfo names no node: a requeued task then reads as paused, never as failed)
    dead_nodes = slurm.parse_dead_nodes(dead.stdout) if dead.rc == 0 else frozenset()
    pub = Publisher()
    _reachable(profile, jobs, pub)

    in_queue, in_acct, asked, answered = _slurm_answers(profile, sq, acct, mark, sole_indexes(bare.values()))
    if every_job and set(asked) == set(accounting) and answered:
        _full_accounting_done(profile.pk)
    result.accounted = len(asked)
    docs = parse_progress_dump(whole.stdout + "\n" + changed.stdout)
    # A record read again only for the overlap (the same write the last cycle applied) changes
    # nothing: left out before its targets are loaded.
    applied = _applied_writes(profile.pk)
    read = {}
    for job in jobs:
        with log_context(job_id=str(job.id), slurm_job_id=job.slurm_job_id):  # an unreadable one is logged
            read[job.pk] = _records(job, docs.get(folders[job.pk].progress, []))
    records = {pk: [r for r in rs if applied.get((pk, r.task_index)) != r.updated_at] for pk, rs in read.items()}
    # Only the targets a record read this cycle names, and those the rules must see whatever was
    # read (outputs not fetched yet, targets stopped with their task): never every target of a job.
    targets = target_rows([j.pk for j in jobs], {pk: {r.task_index for r in rs} for pk, rs in records.items() if rs})
    rows = {pk: dataclasses.replace(row, targets=targets.get(pk, ())) for pk, row in bare.items()}
    tails_by_job: dict[object, dict[int, str]] = {}
    for (job, index, _path), res in zip(logs, tails):
        tails_by_job.setdefault(job.pk, {})[index] = res.stdout  # a missing log reads as empty
    now = timezone.now()
    unread = set()  # jobs whose records this cycle's rules did not look at
    decided: list[Item] = []  # applied together once every job is decided (jobs.watcher.batch)
    for job in jobs:
        answer = SlurmAnswer(queued=in_queue.get(job.slurm_job_id, {}), accounted=in_acct.get(job.slurm_job_id, {}),
                             answered=answered, asked_accounting=job.slurm_job_id in asked, dead_nodes=dead_nodes,
                             boot_seconds=profile.node_boot_seconds)
        # Slurm's reasons and the job's messages, in the owner's words; its lines carry its ids.
        with in_language_of(job), log_context(job_id=str(job.id), slurm_job_id=job.slurm_job_id):
            record_models_used(job, records[job.pk])  # which model files (name + SHA-256) its tasks loaded
            row, fixes = rows[job.pk], []
            if job.pk in stale and answered:
                row, fixes = _reconciled(row, stale[job.pk], in_acct, answer.queued, now)
            decision = decide(row, answer, records[job.pk], tails_by_job.get(job.pk, {}), now)
            decision.changes[:0] = fixes
            if not decision.records_read:
                unread.add(job.pk)
            decided.append(Item(job, row, decision))
    result.changed = apply_all(decided, pub)
    pub.flush()  # after the changes are committed: a page that resyncs now sees the same state
    # Every record read is applied: the next cycle reads only what changes from now on (a cycle that
    # failed before this point reads the same records again).
    _progress_read(profile.pk, parse_clock(clock.stdout) if clock.rc == 0 else None, {j.pk for j in jobs}, unread,
                   {(pk, r.task_index): r.updated_at for pk, rs in read.items() if pk not in unread for r in rs})
    return result


def sole_indexes(rows) -> dict[str, int]:
    """{Slurm job id: its index} for the jobs whose current attempt runs exactly one index."""
    out = {}
    for row in rows:
        indexes = [t.index for t in row.tasks if row.in_attempt(t)]
        if len(indexes) == 1:
            out[row.slurm_job_id] = indexes[0]
    return out


def attempt_rows(jobs: list[Job], tasks: dict) -> dict[object, list[reconcile.AttemptRow]]:
    """Every attempt of these jobs with its Slurm job id, by job pk (one query); `tasks`: their task
    rows by job pk. A job never retried has no JobAttempt rows: its one attempt is the job itself."""
    out: dict[object, list[reconcile.AttemptRow]] = {
        j.pk: [reconcile.AttemptRow(1, j.slurm_job_id, tuple(t.index for t in tasks.get(j.pk, ())))] for j in jobs}
    current = {j.pk: (j.attempt, j.slurm_job_id) for j in jobs}
    recorded: dict[object, list[reconcile.AttemptRow]] = {}
    for job_pk, number, slurm_id, indexes, ended in (JobAttempt.objects.filter(job__in=list(out))
                                                     .values_list("job_id", "number", "slurm_job_id", "indexes", "ended")):
        if not slurm_id and current[job_pk][0] == number:
            slurm_id = current[job_pk][1]
        recorded.setdefault(job_pk, []).append(reconcile.AttemptRow(number, slurm_id, tuple(indexes or ()), ended or {}))
    out.update(recorded)
    return {pk: [a for a in attempts if a.slurm_job_id] for pk, attempts in out.items()}


def _reconciled(row, attempts, in_acct, queued, now):
    """The stale job's row corrected by `reconcile`, and the corrections (logged: each one is a
    disagreement the cycle's own rules missed)."""
    fixes = reconcile.reconcile(row, attempts, in_acct, queued, now)
    if not fixes:
        return row, []
    log.warning("job %s: reconciled with Slurm's accounting of its attempts: %s", row.id,
                {c.index: c.fields.get("state") for c in fixes})
    by_index = {c.index: c.fields for c in fixes}
    tasks = tuple(dataclasses.replace(t, **by_index[t.index]) if t.index in by_index else t for t in row.tasks)
    return dataclasses.replace(row, tasks=tasks), fixes


def _progress_since(profile_pk: int) -> tuple[float | None, frozenset]:
    """(the cluster time from which records count as changed, the jobs whose records were read up
    to then). A job not among them (new to this process, or active again after a retry) has every
    record read. The time goes back PROGRESS_OVERLAP_S: a record written while the last read ran, or
    stamped by a file server whose clock is a little behind, is read again rather than missed."""
    with _progress_lock:
        when, known = _last_progress_read.get(profile_pk, (None, frozenset()))
    if when is None:
        return None, frozenset()
    return when - PROGRESS_OVERLAP_S, known


def _applied_writes(profile_pk: int) -> dict[tuple, float]:
    """{(job pk, task index): the record's `updated_at`} of the records the last cycle applied."""
    with _progress_lock:
        return _last_applied.get(profile_pk, {})


def _progress_read(profile_pk: int, clock: float | None, job_pks: set, unread: set,
                   applied: dict[tuple, float]) -> None:
    """Note a cycle's read. The jobs read stay known while the process lives (a job that leaves the
    active ones and comes back, a retry, still has its records by their times), up to KNOWN_JOBS_MAX;
    a job whose records the rules did not look at (`unread`: Slurm had nothing to say of it) has
    them all read again next time."""
    with _progress_lock:
        _when, known = _last_progress_read.get(profile_pk, (None, frozenset()))
        known = (known | job_pks if len(known) < KNOWN_JOBS_MAX else frozenset(job_pks)) - unread
        _last_progress_read[profile_pk] = (clock, known if clock is not None else frozenset())
        _last_applied[profile_pk] = applied


def _full_accounting_due(profile_pk: int) -> bool:
    with _accounting_lock:
        last = _last_full_accounting.get(profile_pk)
    return last is None or time.monotonic() - last >= ACCOUNTING_EVERY


def _full_accounting_done(profile_pk: int) -> None:
    with _accounting_lock:
        _last_full_accounting[profile_pk] = time.monotonic()


def _slurm_answers(profile, sq, acct, mark, sole: dict[str, int]) -> tuple[dict, dict, tuple[str, ...], bool]:
    """squeue's and sacct's tasks by Slurm job id and index, the jobs sacct was asked about, and
    whether every command asked answered.

    With slurmctld or slurmdbd down or restarting, squeue/sacct answer with an error: that side
    counts as "did not answer" for this cycle (tests/e2e/test_faults.py), so no job is concluded
    lost on it. A job squeue no longer knows is simply not in the queue (`parse_squeue_tasks`). An
    accounting query that printed nothing usable asked sacct about nobody.
    """
    answered = True
    try:
        in_queue = _by_job(slurm.parse_squeue_tasks(sq.stdout, sq.rc, sq.stderr), sole)
    except ClusterError as exc:
        log.warning("cluster %s: squeue: %s", profile.slug, exc)
        in_queue, answered = {}, False
    try:
        sa = slurm.parse_accounting_when_needed(acct.stdout, mark)
    except ClusterError as exc:
        log.warning("cluster %s: accounting: %s (stderr: %s)", profile.slug, exc, acct.stderr[-300:])
        return in_queue, {}, (), False
    if not sa.asked:
        return in_queue, {}, (), answered
    answered = answered and sa.sacct_rc == 0
    try:
        in_acct = (_by_job(slurm.parse_sacct(sa.sacct_json, sa.codes if sa.codes_rc == 0 else None), sole)
                   if sa.sacct_rc == 0 and sa.sacct_json.strip() else {})
    except ClusterError as exc:
        log.warning("cluster %s: sacct: %s", profile.slug, exc)
        in_acct, answered = {}, False
    return in_queue, in_acct, sa.asked, answered


def _by_job(tasks, sole: dict[str, int]) -> dict[str, dict[int, object]]:
    """Slurm's records by Slurm job id and array index.

    A record without an index is of a job with a single task: a single-task array (`--array=1`,
    what a retry of one chunk submits), which sacct prints without its array (array id 0, no task
    id) until the task has ended (seen on 22.05: tests/cluster/samples/22.05/sacct_single_task_array_*.json).
    It stands for the one index the job's current attempt runs (`sole`), and for no other: read as
    index 0, it once turned a task that had COMPLETED in an earlier attempt back to PENDING, and the
    job never ended. A job whose attempt runs several indexes has no such record; one is left out.
    """
    out: dict[str, dict[int, object]] = {}
    for t in tasks:
        index = t.task_index if t.task_index is not None else sole.get(t.job_id)
        if index is not None:
            out.setdefault(t.job_id, {})[index] = t
    return out


def _records(job: Job, docs: list[str]) -> list[TaskProgress]:
    records = []
    for doc in docs:
        try:
            records.append(TaskProgress.loads(doc))
        except (ValueError, TypeError) as exc:
            log.warning("job %s: unreadable progress record: %s", job.id, exc)
    return records


def _unreachable(profile: ClusterProfile, jobs: list[Job], exc: ClusterError) -> None:
    now = timezone.now()
    newly = ClusterProfile.objects.filter(pk=profile.pk, unreachable_since__isnull=True).update(unreachable_since=now)
    ClusterProfile.objects.filter(pk=profile.pk).update(last_error=str(exc))
    if newly:  # say it once on the pages, not every cycle
        profile.refresh_from_db()
        pub = Publisher()
        pub.cluster(profile, [j.id for j in jobs])
        pub.flush()


def _reachable(profile: ClusterProfile, jobs: list[Job], pub: Publisher) -> None:
    recovered = ClusterProfile.objects.filter(pk=profile.pk, unreachable_since__isnull=False).update(unreachable_since=None)
    ClusterProfile.objects.filter(pk=profile.pk).update(last_contact_at=timezone.now(), last_error="")
    if recovered:
        profile.refresh_from_db()
        pub.cluster(profile, [j.id for j in jobs])
