"""Webhooks: signed HTTP calls to a user's `callback_url` when a job or booking
changes state.

    WebhookSecret    the user's signing secret (one per user, encrypted in the database, shown once)
    WebhookDelivery  one call the portal decided to make, with every attempt's outcome

A delivery's `key` ("job:<uuid>:<attempt>:<status>", "booking:<uuid>:<event>") is unique, so one
event is never called twice, even when two workers decide it at once. Sending is
`jobs.webhooks.deliver`; the rules (signature, retries, SSRF guard) are in docs/api.md.
"""
from __future__ import annotations

import secrets as pysecrets
import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from jobs.access import owned_by
from jobs.secrets import EncryptedTextField

#: what every signing secret starts with, so a user recognises one pasted in the wrong place
SECRET_PREFIX = "whsec_"


def new_secret() -> str:
    """A fresh signing secret: 256 random bits, url-safe text."""
    return SECRET_PREFIX + pysecrets.token_urlsafe(32)


class WebhookSecret(models.Model):
    """The key a user's webhooks are signed with (HMAC-SHA256). Shown once, when made or rotated."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="webhook_secret",
                                verbose_name=_("user"))
    secret = EncryptedTextField(_("signing secret"))
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    rotated_at = models.DateTimeField(_("last changed"), default=timezone.now)

    class Meta:
        verbose_name = _("webhook signing secret")
        verbose_name_plural = _("webhook signing secrets")

    def __str__(self) -> str:
        return str(self.user)

    @classmethod
    def rotate(cls, user) -> str:
        """Make (or replace) the user's secret; returns the new one, the only time anyone sees it."""
        secret = new_secret()
        cls.objects.update_or_create(user=user, defaults={"secret": secret, "rotated_at": timezone.now()})
        return secret

    @classmethod
    def secret_of(cls, user_id: int) -> str | None:
        return cls.objects.filter(user_id=user_id).values_list("secret", flat=True).first()


class DeliveryState(models.TextChoices):
    PENDING = "pending", _("waiting to be sent")
    DELIVERED = "delivered", _("delivered")
    FAILED = "failed", _("failed, will try again")
    GIVEN_UP = "given_up", _("given up")


class WebhookDeliveryQuerySet(models.QuerySet):
    def visible_to(self, user):
        """Every lookup of a delivery outside the admin goes through here: the user's own (jobs.access)."""
        return self.filter(owned_by(user, "user"))


class WebhookDelivery(models.Model):
    """One webhook call: what, where, and how its attempts went."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    key = models.CharField(max_length=120, unique=True, null=True, blank=True, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="webhook_deliveries",
                             verbose_name=_("user"))
    url = models.URLField(_("URL"), max_length=2000)
    event = models.CharField(_("event"), max_length=40, db_index=True)
    job = models.ForeignKey("jobs.Job", on_delete=models.SET_NULL, null=True, blank=True,
                            related_name="webhook_deliveries", verbose_name=_("job"))
    booking = models.ForeignKey("jobs.Booking", on_delete=models.SET_NULL, null=True, blank=True,
                                related_name="webhook_deliveries", verbose_name=_("booking"))
    payload = models.JSONField(_("payload"), default=dict)
    state = models.CharField(_("state"), max_length=16, choices=DeliveryState.choices, default=DeliveryState.PENDING,
                             db_index=True)
    attempts = models.PositiveIntegerField(_("attempts"), default=0)
    last_status = models.PositiveSmallIntegerField(_("HTTP status"), null=True, blank=True)
    last_error = models.TextField(_("last error"), blank=True)
    duration_ms = models.PositiveIntegerField(_("duration (ms)"), null=True, blank=True)
    next_attempt_at = models.DateTimeField(_("next attempt"), null=True, blank=True, db_index=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True, db_index=True)
    delivered_at = models.DateTimeField(_("delivered"), null=True, blank=True)

    objects = WebhookDeliveryQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        verbose_name = _("webhook delivery")
        verbose_name_plural = _("webhook deliveries")

    def __str__(self) -> str:
        return f"{self.event} → {self.url}"

    @property
    def can_send_again(self) -> bool:
        return self.state in (DeliveryState.FAILED, DeliveryState.GIVEN_UP)
