from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class AuditEntry(models.Model):
    """Who did what and when: one row per audited action, never changed after it is written.

    `action` is a short dotted code ("auth.login", "job.cancel", "template.change" ...; see
    jobs.audit). The actor's name is copied so the entry still says who it was after the user
    is deleted; the target is kept as type + id + text for the same reason (a deleted template
    or job still reads correctly in the log).
    """

    at = models.DateTimeField(_("when"), default=timezone.now, db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                              related_name="audit_entries", verbose_name=_("user"))
    actor_name = models.CharField(_("user name"), max_length=150, blank=True)
    action = models.CharField(_("action"), max_length=64, db_index=True)
    target_type = models.CharField(_("target type"), max_length=64, blank=True)
    target_id = models.CharField(_("target id"), max_length=64, blank=True, db_index=True)
    target_repr = models.CharField(_("target"), max_length=300, blank=True)
    details = models.JSONField(_("details"), default=dict, blank=True)
    ip = models.GenericIPAddressField(_("IP address"), null=True, blank=True)

    class Meta:
        ordering = ["-at", "-pk"]
        verbose_name = _("audit entry")
        verbose_name_plural = _("audit log")

    def __str__(self) -> str:
        who = self.actor_name or "-"
        what = f" {self.target_repr}" if self.target_repr else ""
        return f"{self.at:%Y-%m-%d %H:%M:%S} {who} {self.action}{what}"
