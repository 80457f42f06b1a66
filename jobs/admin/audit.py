"""The audit log in the admin: read-only for everyone; each action in words (jobs.audit.ACTION_WORDS),
its code kept in the database and shown on the entry's own page."""
from __future__ import annotations

from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from jobs.admin.base import LogAdmin
from jobs.audit import action_words
from jobs.models import AuditEntry


class ActionFilter(admin.SimpleListFilter):
    """The actions found in the log, by their words rather than their codes."""

    title = _("action")
    parameter_name = "action"

    def lookups(self, request, model_admin):
        codes = model_admin.get_queryset(request).order_by().values_list("action", flat=True).distinct()
        return sorted(((code, action_words(code)) for code in codes), key=lambda pair: str(pair[1]))

    def queryset(self, request, queryset):
        return queryset.filter(action=self.value()) if self.value() else queryset


@admin.register(AuditEntry)
class AuditEntryAdmin(LogAdmin):
    """Read-only for everyone, superusers included: a log that admins could edit proves nothing."""

    list_display = ("at", "who", "what", "target_repr", "ip")
    list_filter = (ActionFilter, ("actor", admin.RelatedOnlyFieldListFilter), "at")
    date_hierarchy = "at"
    search_fields = ("target_id", "target_repr", "actor_name")
    fields = ("at", "actor", "actor_name", "what", "action", "target_type", "target_id", "target_repr",
              "details_text", "ip")
    readonly_fields = fields
    list_per_page = 100

    @admin.display(description=_("user"), ordering="actor_name")
    def who(self, obj: AuditEntry) -> str:
        return obj.actor_name or "—"

    @admin.display(description=_("what happened"), ordering="action")
    def what(self, obj: AuditEntry) -> str:
        return action_words(obj.action, obj.target_type)

    @admin.display(description=_("details"))
    def details_text(self, obj: AuditEntry) -> str:
        return self.json_block(obj.details)
