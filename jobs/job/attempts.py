"""A job's attempts (JobAttempt rows): what each one ran, with how much memory, and why.

A job that was never retried has no rows: its only attempt is the job itself (`Job.attempt` 1,
the template's memory). The first retry records the first run too, so the history is complete.
"""
from __future__ import annotations

from django.utils.translation import gettext as _

from cluster import mem_mb, mem_text
from jobs.models import Job, JobAttempt


def history(job: Job) -> list[JobAttempt]:
    """The job's attempts, oldest first (prefetched `attempts` are used when there)."""
    return list(job.attempts.all())


def latest(job: Job) -> JobAttempt | None:
    return job.attempts.order_by("-number").first()


def current_mem(job: Job) -> str:
    """The memory per task the current attempt asks for ("" = the partition's default)."""
    asked = job.attempts.exclude(mem="").order_by("-number").values_list("mem", flat=True).first()
    return asked or job.snapshot.mem


def more_memory(job: Job) -> str | None:
    """Twice the current memory, capped at the template's ceiling; None when that is no more."""
    snap = job.snapshot
    now = mem_mb(current_mem(job))
    if now is None:
        return None
    ceiling = mem_mb(snap.max_mem) or 2 * (mem_mb(snap.mem) or now)
    new = min(2 * now, ceiling)
    return mem_text(new) if new > now else None


def kinds_retried_automatically(job: Job) -> set[str]:
    """What the automatic policy already answered on this job ("oom", "node_fail"): each once."""
    return {kind for kinds in job.attempts.filter(auto=True).values_list("kinds", flat=True) for kind in kinds}


def retry_note(job: Job) -> str:
    """One line per retry, for the final message: "Attempt 2, automatically: ...". Which tasks it ran
    is in the Attempts table (Technical details), not in the words every user reads."""
    lines = []
    for rec in history(job)[1:]:
        who = _("automatically") if rec.auto else (_("by %(user)s") % {"user": rec.by} if rec.by else "")
        lines.append(_("Attempt %(n)s, %(who)s: %(why)s") % {"n": rec.number, "who": who, "why": rec.why or _("retried")}
                     if who else _("Attempt %(n)s: %(why)s") % {"n": rec.number, "why": rec.why or _("retried")})
    return "\n".join(lines)


def record_submission(job: Job, slurm_job_id: str) -> str:
    """Record the Slurm id of the current attempt; returns the message the job shows while it runs
    (the attempt's reason, "" for a first run)."""
    rec = job.attempts.filter(number=job.attempt).first()
    if rec is None:
        return ""
    JobAttempt.objects.filter(pk=rec.pk).update(slurm_job_id=slurm_job_id)
    return rec.why
