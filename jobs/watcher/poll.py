"""The watcher: one poll of one cluster profile, for ALL its active jobs, in ONE SSH round trip.

    poll (this module)  ->  decide (jobs.watcher.decide, pure)  ->  apply (jobs.watcher.apply)

Each cycle runs `squeue --json`, `sacct --json` (+ the exit codes its JSON loses), a `find` over
the jobs' progress folders and `tail` of the logs the last cycle asked for, all in ONE exec
(`SSHRunner.run_batch`), whatever happens. State lives in the database only (a task waiting for
its log says so on its row), so a restarted watcher resumes from the stored Slurm ids.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.utils import timezone

import cluster
from cluster import ClusterError, slurm
from cluster.progress import log_tail_argv, parse_progress_dump, progress_argv
from worker.progress import TaskProgress

from jobs.live.protocol import Publisher
from jobs.models import ClusterProfile, Job, JobStatus
from jobs.watcher.apply import apply, job_row
from jobs.watcher.decide import SlurmAnswer, decide

log = logging.getLogger(__name__)

#: logs read per cycle at most (a mass failure is read over a few cycles; the command line stays short)
MAX_LOG_TAILS = 200


@dataclass
class CycleResult:
    jobs: int = 0
    changed: list[str] = field(default_factory=list)
    error: str = ""
    #: SSH execs this cycle made (one, whatever happens)
    execs: int = 0


def poll_profile(profile: ClusterProfile) -> CycleResult:
    jobs = list(Job.objects.filter(cluster=profile, status__in=(JobStatus.PENDING, JobStatus.RUNNING))
                .exclude(slurm_job_id="").select_related("cluster").prefetch_related("tasks", "targets")
                .order_by("created_at"))
    result = CycleResult(jobs=len(jobs))
    if not jobs:
        return result
    ids = sorted({j.slurm_job_id for j in jobs})
    folders = {j.pk: profile.job_folder(j.id) for j in jobs}
    logs = [(job, task.index, folders[job.pk].log(job.slurm_job_id, task.index))
            for job in jobs for task in job.tasks.all() if task.log_wait_since is not None][:MAX_LOG_TAILS]
    commands = [slurm.squeue_argv(job_ids=ids), slurm.sacct_argv(job_ids=ids), slurm.sacct_exit_codes_argv(ids),
                progress_argv([f.progress for f in folders.values()])]
    commands += [log_tail_argv(path) for _job, _index, path in logs]
    try:
        runner = cluster.runner_for(profile)
        result.execs += 1
        answers = runner.run_batch(commands, timeout=60)
    except ClusterError as exc:
        _unreachable(profile, jobs, exc)
        result.error = str(exc)
        return result
    sq, sa, codes, pr, *tails = answers
    pub = Publisher()
    _reachable(profile, jobs, pub)

    in_queue, in_acct, answered = _slurm_answers(profile, ids, sq, sa, codes)
    docs = parse_progress_dump(pr.stdout)
    tails_by_job: dict[object, dict[int, str]] = {}
    for (job, index, _path), res in zip(logs, tails):
        tails_by_job.setdefault(job.pk, {})[index] = res.stdout  # a missing log reads as empty
    now = timezone.now()
    for job in jobs:
        answer = SlurmAnswer(queued=in_queue.get(job.slurm_job_id, {}), accounted=in_acct.get(job.slurm_job_id, {}),
                             answered=answered)
        decision = decide(job_row(job), answer, _records(job, docs.get(folders[job.pk].progress, [])),
                          tails_by_job.get(job.pk, {}), now)
        if apply(job, decision, pub):
            result.changed.append(str(job.id))
    pub.flush()  # after the changes are committed: a page that resyncs now sees the same state
    return result


def _slurm_answers(profile, ids, sq, sa, codes) -> tuple[dict, dict, bool]:
    """squeue's and sacct's tasks by Slurm job id and index, and whether both answered.

    squeue --json ignores --jobs in 22.05: the parser filters to our ids. With slurmctld or
    slurmdbd down or restarting, squeue/sacct answer with an error: that side counts as "did not
    answer" for this cycle (tests/e2e/test_faults.py), so no job is concluded lost on it.
    """
    answered = sq.rc == 0 and sa.rc == 0
    try:
        in_queue = _by_job(slurm.parse_squeue(sq.stdout, job_ids=ids)) if sq.rc == 0 and sq.stdout.strip() else {}
    except ClusterError as exc:
        log.warning("cluster %s: squeue: %s", profile.slug, exc)
        in_queue, answered = {}, False
    try:
        in_acct = (_by_job(slurm.parse_sacct(sa.stdout, codes.stdout if codes.rc == 0 else None))
                   if sa.rc == 0 and sa.stdout.strip() else {})
    except ClusterError as exc:
        log.warning("cluster %s: sacct: %s", profile.slug, exc)
        in_acct, answered = {}, False
    return in_queue, in_acct, answered


def _by_job(tasks) -> dict[str, dict[int, object]]:
    out: dict[str, dict[int, object]] = {}
    for t in tasks:
        out.setdefault(t.job_id, {})[t.task_index if t.task_index is not None else 0] = t
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
