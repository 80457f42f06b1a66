"""The audit log in the admin: read-only for everyone."""
from __future__ import annotations

from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from jobs.admin.base import LogAdmin
from jobs.models import AuditEntry


@admin.register(AuditEntry)
class AuditEntryAdmin(LogAdmin):
    """Read-only for everyone, superusers included: a log that admins could edit proves nothing."""

    list_display = ("at", "who", "action", "target_repr", "ip")
    list_filter = ("action", ("actor", admin.RelatedOnlyFieldListFilter), "at")
    date_hierarchy = "at"
    search_fields = ("target_id", "target_repr", "actor_name")
    fields = ("at", "actor", "actor_name", "action", "target_type", "target_id", "target_repr", "details_text", "ip")
    readonly_fields = fields
    list_per_page = 100

    @admin.display(description=_("user"), ordering="actor_name")
    def who(self, obj: AuditEntry) -> str:
        return obj.actor_name or "—"

    @admin.display(description=_("details"))
    def details_text(self, obj: AuditEntry) -> str:
        return self.json_block(obj.details)
