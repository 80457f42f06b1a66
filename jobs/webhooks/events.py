"""What a webhook says, and the emails of booking events.

    job_finished(job)                a job reached its final state: call job.callback_url
    booking_event(booking, event)    a booking changed: call booking.callback_url AND email the owner

Both are safe inside a transaction (the call and the email leave on commit, through RQ) and never
raise for delivery problems. Each event is recorded once (a unique key): deciding it twice, from two
workers or a repeated watcher cycle, sends it once.
"""
from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction
from django.urls import NoReverseMatch, reverse
from django.utils import translation
from django.utils.translation import gettext as _

import jobs.webhooks.deliver as deliver
from jobs.background import enqueue
from jobs.models import Booking, Job, JobStatus, NoticeKind, NotificationPreference, WebhookDelivery
from jobs.moments import moment_with_zone
from jobs.usage import notices
from jobs.usage.notifications import SUBJECT_TAG, absolute_url

log = logging.getLogger(__name__)

__all__ = ["BOOKING_EVENTS", "EMAILED_BOOKING_EVENTS", "JOB_EVENTS", "booking_event", "booking_payload",
           "email_booking_event", "job_finished", "job_finished_by_id", "job_payload"]

#: the final job states that call back (X-FFP-Event: job.<status>)
JOB_EVENTS = (JobStatus.COMPLETED, JobStatus.PARTIALLY_FAILED, JobStatus.FAILED, JobStatus.CANCELLED)
#: booking events (X-FFP-Event: booking.<event>)
BOOKING_EVENTS = ("confirmed", "started", "ending", "ended", "refused", "cancelled", "waiting")
#: the booking events that are also emailed (waiting is shown on the booking's page only)
EMAILED_BOOKING_EVENTS = ("confirmed", "started", "ending", "ended", "refused", "cancelled")


def _iso(value) -> str | None:
    return value.isoformat() if value else None


def job_payload(job: Job) -> dict:
    return {
        "event": f"job.{job.status}", "id": str(job.id), "name": job.name, "status": job.status,
        "progress": {"total": job.total, "done": job.done, "failed": job.failed},
        "url": absolute_url(reverse("job-detail", args=[job.id])),
        "api_url": absolute_url(reverse("api-job", args=[job.id])),
        "finished_at": _iso(job.finished_at),
    }


def booking_url(booking: Booking) -> str:
    try:
        return absolute_url(reverse("booking-detail", args=[booking.id]))
    except NoReverseMatch:  # the booking pages are another part of the portal; their address is fixed
        return absolute_url(f"/bookings/{booking.id}")


def booking_payload(booking: Booking, event: str) -> dict:
    return {
        "event": f"booking.{event}", "id": str(booking.id), "state": booking.state, "task_name": booking.task_name,
        "gpu_type": booking.gpu_type.gres_type if booking.gpu_type_id else None, "gpu_count": booking.gpu_count,
        "cluster": booking.cluster.slug if booking.cluster_id else None,
        "start": _iso(booking.starts_at), "end": _iso(booking.ends_at),
        "reservation": booking.reservation_name or None, "reason": booking.reason or None,
        "url": booking_url(booking),
    }


def job_finished(job: Job) -> WebhookDelivery | None:
    """Record the call of `job.callback_url` for the job's final state (sent on commit). None when
    the job asked for no callback, is not final, or this end was recorded before."""
    try:
        if not job.callback_url or job.status not in JOB_EVENTS:
            return None
        return deliver.record(key=f"job:{job.id}:{job.attempt}:{job.status}", user=job.owner, url=job.callback_url,
                              event=f"job.{job.status}", payload=job_payload(job), job=job)
    except Exception:
        log.exception("job %s: webhook not recorded", job.id)
        return None


def job_finished_by_id(job_id: str) -> str:
    """RQ task (jobs.background.enqueue.enqueue_after_finish): record the job's callback, whose first attempt is
    queued at once. Returns the delivery's id ("" when none)."""
    job = Job.objects.select_related("owner").filter(pk=job_id).first()
    delivery = job_finished(job) if job is not None else None
    return str(delivery.pk) if delivery is not None else ""


def booking_event(booking: Booking, event: str) -> WebhookDelivery | None:
    """Tell the owner: call `booking.callback_url` (when set) and email them (per their
    preferences), both on commit, via RQ. Returns the webhook's delivery (None: no callback, or sent before)."""
    if event not in BOOKING_EVENTS:
        raise ValueError(f"not a booking event: {event!r}")  # a programming error, not a delivery problem
    delivery = None
    try:
        if booking.callback_url:
            delivery = deliver.record(key=f"booking:{booking.id}:{event}", user=booking.user,
                                      url=booking.callback_url, event=f"booking.{event}",
                                      payload=booking_payload(booking, event), booking=booking)
        if event in EMAILED_BOOKING_EVENTS:
            booking_id = str(booking.id)
            transaction.on_commit(lambda: enqueue.enqueue_booking_email(booking_id, event))
    except Exception:
        log.exception("booking %s: %s not recorded for webhook/email", booking.id, event)
    return delivery


# ---- booking emails -----------------------------------------------------------------------------

def _booking_headline(event: str, values: dict) -> str:
    return {
        "confirmed": _("Your booking “%(name)s” is confirmed"),
        "started": _("Your booking “%(name)s” has started"),
        "ending": _("Your booking “%(name)s” ends in 15 minutes"),
        "ended": _("Your booking “%(name)s” has ended"),
        "refused": _("Your booking “%(name)s” was refused"),
        "cancelled": _("Your booking “%(name)s” was cancelled"),
    }[event] % values


def email_booking_event(booking_id: str, event: str) -> str:
    """RQ task: email the booking's owner about `event`, once per booking and event. Returns the
    notice's status ("" when none: no such booking, or already sent)."""
    booking = Booking.objects.select_related("user", "gpu_type", "cluster").filter(pk=booking_id).first()
    if booking is None or event not in EMAILED_BOOKING_EVENTS:
        return ""
    user = booking.user
    with translation.override(booking.language or settings.LANGUAGE_CODE):
        name = " ".join(booking.task_name.split())[:80]
        headline = _booking_headline(event, {"name": name})
        notice = notices.claim(f"booking:{booking.id}:{event}", kind=NoticeKind.BOOKING, user=user, to=user.email,
                               subject=f"{SUBJECT_TAG} {headline}"[:300])
        if notice is None:
            return ""
        if not NotificationPreference.for_user(user).booking_emails:
            return notices.skip(notice, "opted out of booking emails")
        context = {
            "booking": booking, "event": event, "headline": headline, "name": name,
            "user_name": user.get_full_name() or user.get_username(),
            "gpu": booking.gpu_type.display_name if booking.gpu_type_id else "",
            "start": moment_with_zone(booking.starts_at) if booking.starts_at else "",
            "end": moment_with_zone(booking.ends_at) if booking.ends_at else "",
            "url": booking_url(booking),
            "settings_url": absolute_url(reverse("account") + "#notifications"),
        }
        return notices.send(notice, "email/booking_event", context)

