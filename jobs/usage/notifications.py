"""Email notifications: a job ended, a user's monthly GPU-hours reached 80 % or 100 %, and the
emails of an email address change (the link to the new address, the notice to the old one).

Flow: `jobs.watcher.poll.finish_job` decides a job's final state, charges its usage in the same
transaction, and on commit calls `jobs.background.enqueue.enqueue_after_finish(job)`, which puts two RQ tasks on the
"default" queue: `notify_job_finished(job_id)` and `notify_quota(user_id)`. Email is sent there,
on the RQ worker, never in a request or in the watcher's loop.

Rules:
- A job email goes to the owner's address when they have one and did not opt out
  (`NotificationPreference.job_emails`). Completed, partially failed and failed jobs are
  emailed; a cancelled one is not (its owner asked for it).
- Quota emails go once per threshold per month (`EmailNotice.key`). When one job jumps past
  both thresholds only the 100 % email goes; the 80 % one is recorded as skipped.
- Every email decided is an `EmailNotice` row, claimed before the send (two workers cannot both
  send it) and marked sent, failed (with the error) or skipped (opted out, no address): jobs.usage.notices.
- A failing SMTP server never fails a job: the job's state was committed before any of this
  runs, and a send error is caught, logged (never the SMTP password) and recorded on the notice.
"""
from __future__ import annotations

import dataclasses
import logging
import re
from datetime import datetime

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.urls import reverse
from django.utils import translation
from django.utils.translation import gettext as _

from jobs import quotas
from jobs.models import Job, JobStatus, NoticeKind, NotificationPreference, UsageRecord
from jobs.models.preferences import LanguagePreference
from jobs.quotas import format_hours, resets_on
from jobs.usage import notices
from jobs.usage.accounting import gpu_hours_this_month, month_of
from jobs.words import in_language_of

log = logging.getLogger(__name__)

__all__ = ["QUOTA_THRESHOLDS", "job_subject", "charged_gpu_quota", "notify_job_finished",
           "notify_quota", "language_of_user", "email_change_token", "read_email_change_token", "send_email_change_link",
           "send_email_changed_notice"]

#: what starts every subject, so people can filter the portal's mail
SUBJECT_TAG = "[FaceFusion Portal]"
#: job states that send an email (a cancelled job does not: its owner asked for it)
EMAILED_STATUSES = (JobStatus.COMPLETED, JobStatus.PARTIALLY_FAILED, JobStatus.FAILED)
#: percent of the monthly GPU-hour limit -> the notice sent when usage reaches it
QUOTA_THRESHOLDS = ((100, NoticeKind.QUOTA_100), (80, NoticeKind.QUOTA_80))


# ---- job ended --------------------------------------------------------------------------------

def display_name(job: Job) -> str:
    """The job's name on one line (a subject header cannot hold a line break), at most 80 characters."""
    name = re.sub(r"\s+", " ", job.name).strip() or _("Untitled job %(id)s") % {"id": str(job.id)[:8]}
    return name if len(name) <= 80 else name[:79] + "…"


def job_subject(job: Job) -> str:
    """E.g. `[FaceFusion Portal] Job “Holiday” partially failed — 3 of 40 photos and videos failed`."""
    values = {"name": display_name(job), "done": job.done, "failed": job.failed, "total": job.total}
    if job.status == JobStatus.COMPLETED:
        text = _("Job “%(name)s” completed — %(done)s of %(total)s photos and videos") % values
    elif job.status == JobStatus.PARTIALLY_FAILED:
        text = _("Job “%(name)s” partially failed — %(failed)s of %(total)s photos and videos failed") % values
    elif job.total:
        text = _("Job “%(name)s” failed — %(failed)s of %(total)s photos and videos failed") % values
    else:
        text = _("Job “%(name)s” failed") % values
    return f"{SUBJECT_TAG} {text}"


def absolute_url(path: str) -> str:
    return settings.SITE_URL + path


def notify_job_finished(job_id: str) -> str:
    """RQ task: email the owner that the job ended. Returns the notice's status ("" when none)."""
    job = Job.objects.select_related("owner").filter(pk=job_id).first()
    if job is None or job.status not in EMAILED_STATUSES or job.is_preview:
        return ""  # a preview's owner is on the page, waiting for it (jobs.job.preview)
    user = job.owner
    # Subject and body in the job's language (that of the page it was started from), as its
    # stored messages are: the RQ worker itself speaks the server's default.
    with in_language_of(job):
        notice = notices.claim(f"job:{job.id}", kind=NoticeKind.JOB_FINISHED, user=user, job=job, to=user.email,
                               subject=job_subject(job)[:300])
        if notice is None:
            return ""  # already sent (or being sent) by another worker
        if not NotificationPreference.for_user(user).job_emails:
            return notices.skip(notice, "opted out of job emails")
        usage = UsageRecord.objects.filter(job=job).first()
        context = {
            "job": job, "name": display_name(job), "user_name": user.get_full_name() or user.get_username(),
            "url": absolute_url(reverse("job-detail", args=[job.id])),
            "settings_url": absolute_url(reverse("account") + "#notifications"),
            "template_name": job.snapshot.name_in(job.language or None),
            "gpu_hours": usage.gpu_hours if usage else None,
        }
        return notices.send(notice, "email/job_finished", context)


def language_of_user(user) -> str:
    """The language to write to `user` in when no job says it: the one they chose on the account
    page, else that of the last job they started (their page's language then), else the site's."""
    chosen = LanguagePreference.language_of(user)
    if chosen:
        return chosen
    last = Job.objects.filter(owner=user).exclude(language="").order_by("-created_at").values_list(
        "language", flat=True).first()
    return last or settings.LANGUAGE_CODE


# ---- quota thresholds -------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class GpuQuota:
    """One monthly GPU-hour limit that binds a user, and the hours CHARGED against it this month."""

    limit_hours: float
    used_hours: float
    source: str = ""  # "your own quota" / "group vfx"
    is_group: bool = False

    @property
    def percent(self) -> float:
        return 100.0 * self.used_hours / self.limit_hours if self.limit_hours > 0 else 0.0

    @property
    def left_hours(self) -> float:
        return max(self.limit_hours - self.used_hours, 0.0)


def charged_gpu_quota(user, now: datetime | None = None) -> GpuQuota | None:
    """Of the GPU-hour limits binding `user` (`jobs.quotas`: their own, their groups'), the one
    closest to full, counting only hours CHARGED this month (ended jobs); None without a limit.

    Charged, not charged + estimates (what Start checks): an email says what was really used.
    A group's limit counts all its members' hours. A limit of 0 (no GPUs at all) sends nothing.
    """
    best = None
    for q in quotas.applicable_quotas(user):
        if q.gpu_hours_per_month is None or q.gpu_hours_per_month <= 0:
            continue
        members = [user] if q.user_id else get_user_model().objects.filter(groups=q.group_id)
        quota = GpuQuota(limit_hours=float(q.gpu_hours_per_month), used_hours=gpu_hours_this_month(members, now),
                         source=quotas.source_of(q), is_group=q.group_id is not None)
        if best is None or quota.percent > best.percent:
            best = quota
    return best


def notify_quota(user_id: int, now: datetime | None = None) -> list[str]:
    """RQ task: email the user when this month's GPU-hours reached 80 % or 100 % of the limit.

    Once per threshold per user per month. Returns the kinds of notices this call decided (sent,
    failed or skipped); [] when nothing new.
    """
    user = get_user_model().objects.filter(pk=user_id).first()
    if user is None:
        return []
    # the recipient's language for all its words, the quota's source ("group vfx") included
    with translation.override(language_of_user(user)):
        quota = charged_gpu_quota(user, now=now)
        return [] if quota is None else _notify_quota(user, quota, now)


def _notify_quota(user, quota: GpuQuota, now: datetime | None) -> list[str]:
    period = month_of(now)
    reached = [(pct, kind) for pct, kind in QUOTA_THRESHOLDS if quota.percent >= pct]
    decided: list[str] = []
    wants = NotificationPreference.for_user(user).quota_emails
    for n, (pct, kind) in enumerate(reached):  # highest first
        subject = _quota_subject(pct, quota)
        notice = notices.claim(f"quota:{pct}:{period:%Y-%m}:{user.pk}", kind=kind, user=user, period=period,
                               to=user.email, subject=subject[:300])
        if notice is None:
            continue
        decided.append(kind)
        if n > 0:
            notices.skip(notice, f"passed straight to {reached[0][0]} %")
        elif not wants:
            notices.skip(notice, "opted out of quota emails")
        else:
            context = {"user_name": user.get_full_name() or user.get_username(), "quota": quota, "percent": pct,
                       "month": period, "reset": resets_on(now),
                       "usage_url": absolute_url(reverse("usage")),
                       "settings_url": absolute_url(reverse("account") + "#notifications")}
            notices.send(notice, "email/quota", context)
    return decided


def _quota_subject(pct: int, quota: GpuQuota) -> str:
    values = {"used": format_hours(quota.used_hours), "limit": format_hours(quota.limit_hours), "source": quota.source}
    if quota.is_group:
        text = (_("Your group has used all its GPU-hours this month (%(used)s of %(limit)s, %(source)s)") if pct >= 100
                else _("Your group has used 80 %% of its GPU-hours this month (%(used)s of %(limit)s, %(source)s)"))
    else:
        text = (_("You have used all your GPU-hours this month (%(used)s of %(limit)s)") if pct >= 100
                else _("You have used 80 %% of your GPU-hours this month (%(used)s of %(limit)s)"))
    return f"{SUBJECT_TAG} {text % values}"


# ---- a new email address ----------------------------------------------------------------------

#: how long the link that confirms a new email address works (seconds)
EMAIL_CHANGE_MAX_AGE = 24 * 3600
_EMAIL_CHANGE_SALT = "jobs.account.email-change"


def email_change_token(user, new_email: str) -> str:
    """A signed, timestamped token saying "`user` may change their address from the current one to
    `new_email`". It names the current address, so it stops working once the address changed."""
    return signing.dumps({"user": user.pk, "old": user.email, "new": new_email}, salt=_EMAIL_CHANGE_SALT)


def read_email_change_token(token: str) -> dict:
    """The token's {"user", "old", "new"}; raises signing.SignatureExpired after EMAIL_CHANGE_MAX_AGE,
    signing.BadSignature when it was not made here (or was changed)."""
    return signing.loads(token, salt=_EMAIL_CHANGE_SALT, max_age=EMAIL_CHANGE_MAX_AGE)


def send_email_change_link(user_id: int, new_email: str, language: str) -> bool:
    """RQ task: email `new_email` the link that makes it the user's address. False when the user is gone."""
    user = get_user_model().objects.filter(pk=user_id).first()
    if user is None:
        return False
    url = absolute_url(reverse("account-email-confirm", args=[email_change_token(user, new_email)]))
    with translation.override(language or settings.LANGUAGE_CODE):
        context = {"user_name": user.get_full_name() or user.get_username(), "username": user.get_username(),
                   "url": url, "hours": EMAIL_CHANGE_MAX_AGE // 3600, "new_email": new_email}
        _send_account_email(new_email, _("Confirm your new email address"), "email/email_change_link", context)
    return True


def send_email_changed_notice(user_id: int, old_email: str, language: str) -> bool:
    """RQ task: tell the OLD address that the account's email address changed (someone who took over
    a session learns nothing from it, but the owner learns that it happened)."""
    user = get_user_model().objects.filter(pk=user_id).first()
    if user is None or not old_email:
        return False
    with translation.override(language or settings.LANGUAGE_CODE):
        context = {"user_name": user.get_full_name() or user.get_username(), "username": user.get_username(),
                   "new_email": user.email, "account_url": absolute_url(reverse("account"))}
        _send_account_email(old_email, _("Your email address was changed"), "email/email_change_notice", context)
    return True


def _send_account_email(to: str, subject: str, template: str, context: dict) -> None:
    """Send `<template>.txt` and `.html` to `to`. A send error is raised: RQ keeps the failed task
    (its error never holds the SMTP password); these emails are not notices, so no EmailNotice row."""
    message = notices.multipart_email(f"{SUBJECT_TAG} {subject}", to, template, context)
    try:
        message.send()
    except Exception as exc:  # noqa: BLE001 - re-raised without the SMTP password in its text
        raise RuntimeError(notices.without_secrets(f"{type(exc).__name__}: {exc}")) from None
    log.info("account email %s sent to %s", template, to)
