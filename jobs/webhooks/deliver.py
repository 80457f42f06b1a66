"""Sending a webhook delivery: claim one attempt, sign, call, record, schedule the next try.

    record(...)            the delivery row, once per event (its key); never raises
    send(delivery_id)      the RQ task: one attempt (jobs.background.enqueue.enqueue_webhook puts it on the queue)
    send_again(delivery)   the owner's "Send again" of a failed delivery
    send_due(now)          re-queues attempts whose time passed but whose RQ job was lost (Redis down)

An attempt is claimed with a conditional UPDATE on (id, attempts, state, next_attempt_at): of two
workers running the same attempt, one gets the row and the other does nothing, so one attempt is
never sent twice. 2xx is delivered; 410 Gone gives up (the receiver said it is gone for good);
anything else is retried after 30 s, 2 min, 10 min, 30 min, 1 h, then every 2 h, until
settings.WEBHOOK_MAX_AGE hours after the event, and then given up.
"""
from __future__ import annotations

import http.client
import json
import logging
import socket
import ssl
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

import jobs.webhooks.guard as guard
import jobs.webhooks.signing as signing
import jobs.webhooks.transport as transport
from jobs import transitions
from jobs.background import enqueue
from jobs.models import DeliveryState, WebhookDelivery, WebhookSecret
from jobs.models.preferences import LanguagePreference

log = logging.getLogger(__name__)

__all__ = ["BACKOFF_SECONDS", "NO_SECRET", "record", "retry_delay", "send", "send_again", "send_due"]

#: seconds before the 1st, 2nd ... retry; the last one repeats until WEBHOOK_MAX_AGE
BACKOFF_SECONDS = (30, 120, 600, 1800, 3600, 7200)
#: a claimed attempt that never recorded its outcome (the worker died) may be claimed again after this
CLAIM_SECONDS = 300
USER_AGENT = "FaceFusion-Portal-Webhook/1"
#: the message of a delivery whose owner has no signing secret yet (an English msgid, shown translated)
NO_SECRET = gettext_noop("no signing secret: create one on your Account page")


def retry_delay(attempts: int) -> int:
    """Seconds to wait after the `attempts`-th failed attempt."""
    return BACKOFF_SECONDS[min(max(attempts, 1), len(BACKOFF_SECONDS)) - 1]


def record(*, key: str, user, url: str, event: str, payload: dict, job=None, booking=None) -> WebhookDelivery | None:
    """The delivery of one event, sent on commit of the caller's transaction; None when this
    event was recorded before (its `key`). In its own savepoint: a duplicate never spoils the
    caller's transaction."""
    try:
        with transaction.atomic():
            delivery = WebhookDelivery.objects.create(key=key, user=user, url=url, event=event, payload=payload,
                                                      job=job, booking=booking, next_attempt_at=timezone.now())
    except IntegrityError:
        return None
    transaction.on_commit(lambda: enqueue.enqueue_webhook(str(delivery.id)))
    return delivery


def _claim(delivery: WebhookDelivery, now: datetime) -> bool:
    """Take the delivery's next attempt for this worker (see the module's docstring)."""
    return WebhookDelivery.objects.filter(
        Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now),
        pk=delivery.pk, attempts=delivery.attempts, state__in=(DeliveryState.PENDING, DeliveryState.FAILED),
    ).update(attempts=F("attempts") + 1, next_attempt_at=now + timedelta(seconds=CLAIM_SECONDS)) == 1


def send(delivery_id: str, now: datetime | None = None) -> str:
    """RQ task: make the delivery's next attempt if it is due and nobody else is making it.
    Returns the delivery's state afterwards ("" when there was nothing to do)."""
    now = now or timezone.now()
    delivery = WebhookDelivery.objects.select_related("user").filter(pk=delivery_id).first()
    if delivery is None or not _claim(delivery, now):
        return ""
    attempt = delivery.attempts + 1
    with translation.override(LanguagePreference.language_of(delivery.user) or settings.LANGUAGE_CODE):
        status, error, response = _attempt(delivery, now)
        if status == DeliveryState.FAILED:
            next_at = now + timedelta(seconds=retry_delay(attempt))
            if next_at > delivery.created_at + timedelta(hours=settings.WEBHOOK_MAX_AGE):
                status, next_at = DeliveryState.GIVEN_UP, None
                error = _("%(error)s Given up after %(attempts)s attempts.") % {"error": error, "attempts": attempt}
        else:
            next_at = None
    fields = {"state": status, "last_error": error[:2000], "next_attempt_at": next_at}
    if response is not None:
        fields.update(last_status=response.status, duration_ms=response.duration_ms)
    if status == DeliveryState.DELIVERED:
        fields["delivered_at"] = timezone.now()
    WebhookDelivery.objects.filter(pk=delivery.pk, attempts=attempt).update(**fields)
    log.info("webhook %s (%s) attempt %s: %s %s", delivery.pk, delivery.event, attempt, status, error)
    if next_at is not None:
        enqueue.enqueue_webhook(str(delivery.pk), at=next_at)
    return status


def _attempt(delivery: WebhookDelivery, now: datetime) -> tuple[str, str, transport.Response | None]:
    """One call: (state, plain-words error or "", the answer when there was one)."""
    secret = WebhookSecret.secret_of(delivery.user_id)
    if not secret:
        return DeliveryState.FAILED, _(NO_SECRET), None
    try:
        callback = guard.checked_callback(delivery.url)
    except guard.Refused as exc:
        return (DeliveryState.FAILED if exc.retry else DeliveryState.GIVEN_UP), exc.message, None
    body = json.dumps(delivery.payload, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()
    headers = {
        "Content-Type": "application/json", "User-Agent": USER_AGENT,
        "X-FFP-Event": delivery.event, "X-FFP-Delivery": str(delivery.pk),
        signing.HEADER: signing.signature_header(secret, int(now.timestamp()), body),
    }
    timeout = float(settings.WEBHOOK_TIMEOUT)
    try:
        response = transport.post(callback, body, headers, timeout)
    except (socket.timeout, TimeoutError):
        return DeliveryState.FAILED, _("The receiver did not answer within %(seconds)s seconds.") % {"seconds": f"{timeout:g}"}, None
    except ConnectionRefusedError:
        return DeliveryState.FAILED, _("The receiver refused the connection (nothing listens on that port)."), None
    except ssl.SSLError as exc:
        return DeliveryState.FAILED, _("The secure connection failed: %(why)s") % {"why": exc.reason or exc}, None
    except (OSError, http.client.HTTPException) as exc:
        return DeliveryState.FAILED, _("The call failed: %(why)s") % {"why": exc or type(exc).__name__}, None
    return (*_judge(response), response)


def _judge(response: transport.Response) -> tuple[str, str]:
    code = response.status
    if 200 <= code < 300:
        return DeliveryState.DELIVERED, ""
    if code == 410:
        return DeliveryState.GIVEN_UP, _("The receiver answered 410 Gone: no more calls are sent.")
    if 300 <= code < 400:
        return DeliveryState.FAILED, _("The receiver answered %(code)s, pointing to %(location)s; the portal does "
                                       "not follow redirects. Give the final address as the callback.") % {
            "code": code, "location": response.location[:300] or "?"}
    hint = response.body[:300].decode("utf-8", "replace").strip()
    text = _("The receiver answered HTTP %(code)s.") % {"code": code}
    return DeliveryState.FAILED, f"{text} {hint}".strip()


def send_again(delivery: WebhookDelivery) -> bool:
    """The owner's "Send again": one more attempt now for a failed or given-up delivery (its
    retries continue while it is younger than WEBHOOK_MAX_AGE). False when it was not failed."""
    moved = transitions.update_if(delivery, "state", (DeliveryState.FAILED, DeliveryState.GIVEN_UP),
                                  DeliveryState.PENDING, next_attempt_at=timezone.now())
    if moved:
        transaction.on_commit(lambda: enqueue.enqueue_webhook(str(delivery.pk)))
    return moved


def send_due(now: datetime | None = None, grace: int = 60) -> int:
    """Queue again every attempt due for more than `grace` seconds (its RQ job was lost). Returns how many."""
    now = now or timezone.now()
    ids = list(WebhookDelivery.objects.filter(state__in=(DeliveryState.PENDING, DeliveryState.FAILED),
                                              next_attempt_at__lte=now - timedelta(seconds=grace))
               .values_list("pk", flat=True)[:500])
    for pk in ids:
        enqueue.enqueue_webhook(str(pk))
    return len(ids)
