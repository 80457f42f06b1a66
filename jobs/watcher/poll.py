"""The watcher: one poll of one cluster profile, for ALL its active jobs, in ONE SSH round trip.

Each cycle runs `squeue --json`, `sacct --json` and a `find` over the jobs' progress folders in
one exec (`SSHRunner.run_batch`), then applies what changed with conditional updates. State lives
in the database only, so a restarted watcher resumes from the stored Slurm ids.

Rules (see cluster/states.py): a job missing from squeue is never assumed done — sacct decides;
a job neither knows, well after submission, is `lost`, with an explanation.
"""
from __future__ import annotations

import logging
import posixpath
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from cluster import ClusterError, get_runner, slurm
from cluster import states as slurm_states
from cluster.progress import parse_progress_dump, progress_argv
from worker.progress import STOPPED_BY_TASK_END, TaskProgress

from jobs import lifecycle, tasks
from jobs.usage.accounting import charge_job
from jobs.live.protocol import Publisher
from jobs.models import ClusterProfile, Job, JobStatus, Target, TargetStatus, Task
from jobs.watcher.outputs import make_thumbnail

log = logging.getLogger(__name__)

#: how long a submitted job may be unknown to both squeue and sacct before it counts as lost
LOST_AFTER = timedelta(minutes=5)


@dataclass
class CycleResult:
    jobs: int = 0
    changed: list[str] = field(default_factory=list)
    error: str = ""


def poll_profile(profile: ClusterProfile) -> CycleResult:
    jobs = list(Job.objects.filter(cluster=profile, status__in=(JobStatus.PENDING, JobStatus.RUNNING))
                .exclude(slurm_job_id="").select_related("cluster").prefetch_related("tasks", "targets")
                .order_by("created_at"))
    result = CycleResult(jobs=len(jobs))
    if not jobs:
        return result
    ids = sorted({j.slurm_job_id for j in jobs})
    dirs = [progress_dir(profile, j) for j in jobs]
    try:
        runner = get_runner(profile.cluster_config())
        # sacct's JSON loses exit codes in Slurm 22.05: the text form rides along in the same exec.
        sq, sa, codes, pr = runner.run_batch([slurm.squeue_argv(job_ids=ids), slurm.sacct_argv(job_ids=ids),
                                              slurm.sacct_exit_codes_argv(ids), progress_argv(dirs)], timeout=60)
    except ClusterError as exc:
        now = timezone.now()
        newly = ClusterProfile.objects.filter(pk=profile.pk, unreachable_since__isnull=True).update(unreachable_since=now)
        ClusterProfile.objects.filter(pk=profile.pk).update(last_error=str(exc))
        if newly:  # say it once on the pages, not every cycle
            profile.refresh_from_db()
            pub = Publisher()
            pub.cluster(profile, [j.id for j in jobs])
            pub.flush()
        result.error = str(exc)
        return result
    pub = Publisher()
    recovered = ClusterProfile.objects.filter(pk=profile.pk, unreachable_since__isnull=False).update(unreachable_since=None)
    ClusterProfile.objects.filter(pk=profile.pk).update(last_contact_at=timezone.now(), last_error="")
    if recovered:
        profile.refresh_from_db()
        pub.cluster(profile, [j.id for j in jobs])

    # squeue --json ignores --jobs in 22.05: the parser filters to our ids.
    # Fault tolerance (tests/e2e/test_faults.py): slurmctld or slurmdbd down or restarting makes
    # squeue/sacct answer with an error. That side counts as "did not answer" for this cycle.
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
    docs = parse_progress_dump(pr.stdout)
    for job, pdir in zip(jobs, dirs):
        try:
            if apply_job(runner, job, in_queue.get(job.slurm_job_id, {}), in_acct.get(job.slurm_job_id, {}),
                         docs.get(pdir, []), sacct_answered=answered, pub=pub):
                result.changed.append(str(job.id))
        except ClusterError as exc:  # e.g. an output fetch failed: the next cycle tries again
            log.warning("job %s: %s", job.id, exc)
    pub.flush()  # after the changes are committed: a page that resyncs now sees the same state
    return result


def progress_dir(profile: ClusterProfile, job: Job) -> str:
    return posixpath.join(profile.job_dir(job.id), "out", "progress")


def _by_job(tasks) -> dict[str, dict[int, object]]:
    out: dict[str, dict[int, object]] = {}
    for t in tasks:
        out.setdefault(t.job_id, {})[t.task_index if t.task_index is not None else 0] = t
    return out


def apply_job(runner, job: Job, queued: dict, accounted: dict, docs: list[str], sacct_answered: bool = True,
              pub: Publisher | None = None) -> bool:
    """Apply one job's Slurm states and progress records. True when anything changed.

    Changes are collected on `pub` as live events (sent by the caller once all are committed).
    """
    pub = pub or Publisher()
    if not queued and not accounted:
        if sacct_answered and job.submitted_at and timezone.now() - job.submitted_at > LOST_AFTER:
            return lifecycle.move(job, "lose", pub=pub, finished_at=timezone.now(), error=_(
                "Slurm no longer knows this job (neither the queue nor the accounting has it). "
                "It may have been removed by an administrator; outputs already made are kept."))
        return False
    # sacct has the final word on finished tasks; squeue is fresher for pending/running ones.
    states = {**accounted, **{i: t for i, t in queued.items() if not slurm_states.is_terminal(t.state)}}
    held: set[int] = set()
    tasks_changed = _apply_tasks(runner, job, states, pub, held)
    progress_changed = _apply_progress(runner, job, docs, pub)
    # A task just seen killed by SIGKILL without the memory-kill line in its log yet: slurmstepd
    # may still be writing it. Decide the job's end on the next cycle, which reads the log again.
    moved = _advance(job) if not held else False
    if moved:
        job.refresh_from_db()
        for t in job.targets.filter(status=TargetStatus.FAILED, message__gt=""):
            pub.output(job, t)  # targets failed by finish_job for their task's reason
    if tasks_changed or progress_changed or moved:
        pub.job(job)
        return True
    return False


def _apply_tasks(runner, job: Job, states: dict, pub: Publisher, held: set | None = None) -> bool:
    changed = False
    for task in job.tasks.all():
        st = states.get(task.index)
        if st is None:
            continue
        log_tail = ""
        # Killed by SIGKILL (the JSON sometimes lacks the signal): maybe a memory kill whose log
        # line is not written yet, so its log is read again while the job is watched.
        sigkill = st.state == "FAILED" and (st.signal == 9 or (st.signal is None and not st.exit_code))
        if st.state == "FAILED" and task.state != "OUT_OF_MEMORY" and (task.state != "FAILED" or sigkill):
            log_tail = _log_tail(runner, job, st)
        state = slurm_states.effective_state(st, log_tail)
        if held is not None and sigkill and state == "FAILED" and task.state != "FAILED":
            held.add(task.index)
        if slurm_states.is_terminal(state):
            reason = slurm_states.plain_reason(st, log_tail) if state != "COMPLETED" else ""
        else:
            reason = slurm_states.pending_reason(st.reason) if state == "PENDING" else ""
        new = {"state": state, "node": st.node or task.node, "exit_code": st.exit_code,
               "elapsed_seconds": st.elapsed_seconds, "reason": reason[:300], "gpus": st.gpus or task.gpus}
        if any(getattr(task, k) != v for k, v in new.items()):
            # Conditional: never move a task back out of a terminal state on a stale answer.
            qs = Task.objects.filter(pk=task.pk)
            if slurm_states.is_terminal(task.state) and not slurm_states.is_terminal(state):
                continue
            qs.update(**new)
            for k, v in new.items():
                setattr(task, k, v)
            pub.task(job, task)
            changed = True
    return changed


def _log_tail(runner, job: Job, st) -> str:
    path = posixpath.join(job.cluster.job_dir(job.id), "logs", f"slurm_{job.slurm_job_id}_{st.task_index}.out")
    try:
        return runner.run(["tail", "-c", "4000", path], timeout=20).stdout
    except ClusterError:
        return ""


def _apply_progress(runner, job: Job, docs: list[str], pub: Publisher) -> bool:
    changed = False
    targets = {t.index: t for t in job.targets.all()}
    for doc in docs:
        try:
            progress = TaskProgress.loads(doc)
        except (ValueError, TypeError) as exc:
            log.warning("job %s: unreadable progress record: %s", job.id, exc)
            continue
        for rec in progress.targets:
            t = targets.get(rec.index)
            if t is None:
                continue
            new = {"status": rec.status, "message": rec.message[:2000], "faces_found": rec.faces_found,
                   "faces_swapped": rec.faces_swapped, "seconds": rec.seconds,
                   "failed_with_task": rec.status == "failed" and rec.message.startswith(STOPPED_BY_TASK_END)}
            target_changed = False
            if any(getattr(t, k) != v for k, v in new.items()):
                Target.objects.filter(pk=t.pk).update(**new)
                for k, v in new.items():
                    setattr(t, k, v)
                target_changed = True
            if t.is_ok and not t.output_file:
                target_changed |= _fetch_output(runner, job, t)
            if target_changed:
                pub.output(job, t)
                changed = True
    done = sum(1 for t in targets.values() if t.is_ok)
    failed = sum(1 for t in targets.values() if t.status == TargetStatus.FAILED)
    if (done, failed) != (job.done, job.failed):
        Job.objects.filter(pk=job.pk).update(done=done, failed=failed)
        job.done, job.failed = done, failed
        changed = True
    return changed


def _fetch_output(runner, job: Job, t: Target) -> bool:
    remote = posixpath.join(job.cluster.job_dir(job.id), "out", "outputs", t.output_name)
    local = job.media_dir / "outputs" / t.output_name
    local.parent.mkdir(parents=True, exist_ok=True)
    runner.get_file(remote, str(local))
    thumb = job.media_dir / "thumbs" / (Path(t.output_name).stem + ".jpg")
    fields = {"output_file": str(local)}
    if make_thumbnail(str(local), str(thumb)):
        fields["thumbnail_file"] = str(thumb)
    Target.objects.filter(pk=t.pk).update(**fields)
    for k, v in fields.items():
        setattr(t, k, v)
    return True


def _advance(job: Job) -> bool:
    tasks = list(job.tasks.all())
    if not tasks:
        return False
    if all(slurm_states.is_terminal(t.state) for t in tasks):
        from jobs.retry import auto_retry

        # OUT_OF_MEMORY / NODE_FAIL: resubmitted once as a new attempt instead of finalised.
        if auto_retry(job, tasks):
            return True
        return finish_job(job, tasks)
    if any(t.state == "RUNNING" for t in tasks):
        return lifecycle.move(job, "started", started_at=timezone.now())
    if all(t.state == "PENDING" for t in tasks) and tasks[0].reason and job.error != tasks[0].reason:
        Job.objects.filter(pk=job.pk).update(error="")
    return False


def finish_job(job: Job, task_rows: list[Task]) -> bool:
    """All tasks ended: decide completed / partially_failed / failed / cancelled."""
    with transaction.atomic():
        by_task = {t.index: t for t in task_rows}
        # Targets a task never reported (it died first) failed for the task's reason.
        for t in job.targets.filter(status__in=(TargetStatus.WAITING, TargetStatus.RUNNING)):
            task = by_task.get(t.task_index)
            why = (task.reason if task and task.reason else _("the task ended before this image was processed"))
            Target.objects.filter(pk=t.pk).update(status=TargetStatus.FAILED, message=why, failed_with_task=True)
        targets = list(Target.objects.filter(job=job))  # fresh: the prefetched ones predate the update above
        done = sum(1 for t in targets if t.is_ok)
        failed = len(targets) - done
        cancelled = job.cancel_requested or any(t.state == "CANCELLED" for t in task_rows)
        if cancelled:
            status, error = JobStatus.CANCELLED, _("Cancelled. %(done)s of %(total)s images were finished and are kept.") % {"done": done, "total": len(targets)}
        elif failed == 0:
            status, error = JobStatus.COMPLETED, ""
        elif done:
            status, error = JobStatus.PARTIALLY_FAILED, _("%(failed)s of %(total)s images failed; see each image's message.") % {"failed": failed, "total": len(targets)}
        else:
            reasons = sorted({t.reason for t in task_rows if t.reason})
            status, error = JobStatus.FAILED, (_("All images failed: %(why)s") % {"why": "; ".join(reasons)} if reasons else _("All images failed; see each image's message."))
        if job.attempts:  # a retried job says what each attempt was for
            from jobs.retry import retry_note

            error = "\n".join(filter(None, [error, retry_note(job)]))
        moved = lifecycle.move(job, "finish", to=status, finished_at=timezone.now(), done=done,
                         failed=failed, error=error)
        if moved:
            # Charged in the same transaction as the final state: a crash cannot leave an ended job
            # uncharged. `move` is conditional, so a job seen ending twice is charged once.
            _charge(job)
            transaction.on_commit(lambda: tasks.enqueue_after_finish(job))  # email: RQ, after commit
        return moved


def _charge(job: Job) -> None:
    """Charge the job's usage; an accounting error is logged and never blocks the job's end."""
    try:
        with transaction.atomic():  # a savepoint: a failed insert leaves the job's transaction usable
            charge_job(job)
    except Exception:  # noqa: BLE001 - see the docstring
        log.exception("job %s: usage not charged", job.id)
