"""An email the portal sends once: claimed as an `EmailNotice` row, then sent, skipped or failed.

    notice = claim(f"job:{job.id}", kind=..., user=user, job=job, to=user.email, subject=...)
    if notice is None:          # another worker has it (or it was sent before)
        return ""
    return send(notice, "email/job_finished", context)   # or skip(notice, "opted out ...")

Shared by every email that must go at most once: the job and quota emails (jobs.usage.notifications),
the booking emails (jobs.webhooks.events) and the retention notice (jobs.results.retention).
A failing SMTP server is recorded on the notice, never raised; its error never holds the SMTP password.
"""
from __future__ import annotations

import logging

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.db import IntegrityError, transaction
from django.template.loader import render_to_string
from django.utils import timezone

from jobs.models import EmailNotice, NoticeStatus

log = logging.getLogger("jobs.usage.notifications")  # the logger these lines were always written to

__all__ = ["claim", "skip", "send", "multipart_email", "without_secrets"]


def claim(key: str, **fields) -> EmailNotice | None:
    """Insert the notice `key` with `fields` (this worker sends it), or take over one that failed
    before; None when another worker holds it or it was sent or skipped already."""
    try:
        with transaction.atomic():
            return EmailNotice.objects.create(key=key, **fields)
    except IntegrityError:
        if EmailNotice.objects.filter(key=key, status=NoticeStatus.FAILED).update(status=NoticeStatus.SENDING, error=""):
            return EmailNotice.objects.get(key=key)
        return None


def skip(notice: EmailNotice, why: str) -> str:
    """Record that the claimed `notice` is not sent, and why; returns its status (skipped)."""
    EmailNotice.objects.filter(pk=notice.pk).update(status=NoticeStatus.SKIPPED, error=why)
    return NoticeStatus.SKIPPED


def multipart_email(subject: str, to: str, template: str, context: dict) -> EmailMultiAlternatives:
    """`<template>.txt` with `<template>.html` as its alternative, from DEFAULT_FROM_EMAIL to `to`,
    marked as sent by a machine (Auto-Submitted: no out-of-office replies)."""
    message = EmailMultiAlternatives(subject=subject, body=render_to_string(f"{template}.txt", context),
                                     from_email=settings.DEFAULT_FROM_EMAIL, to=[to],
                                     headers={"Auto-Submitted": "auto-generated"})
    message.attach_alternative(render_to_string(f"{template}.html", context), "text/html")
    return message


def send(notice: EmailNotice, template: str, context: dict) -> str:
    """Render `<template>.txt` and `.html`, send both as one multipart email to the claimed
    `notice`'s address, record the outcome; returns the notice's status (sent, failed, or skipped
    when there is no address). Never raises for a send error."""
    if not notice.to:
        return skip(notice, "the user has no email address")
    message = multipart_email(notice.subject, notice.to, template, context)
    try:
        message.send()
    except Exception as exc:  # noqa: BLE001 - any SMTP or network error: record it, never raise
        error = without_secrets(f"{type(exc).__name__}: {exc}")
        log.warning("email %s to %s not sent via %s:%s: %s", notice.key, notice.to, settings.EMAIL_HOST,
                    settings.EMAIL_PORT, error)
        EmailNotice.objects.filter(pk=notice.pk).update(status=NoticeStatus.FAILED, error=error[:2000])
        return NoticeStatus.FAILED
    EmailNotice.objects.filter(pk=notice.pk).update(status=NoticeStatus.SENT, sent_at=timezone.now(), error="")
    log.info("email %s sent to %s", notice.key, notice.to)
    return NoticeStatus.SENT


def without_secrets(text: str) -> str:
    """`text` (an SMTP error) with the SMTP password, when it appears, replaced by ***."""
    password = getattr(settings, "EMAIL_HOST_PASSWORD", "")
    return text.replace(password, "***") if password else text
