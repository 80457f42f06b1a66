"""Content check settings in the Django admin: one row, audited, like the retention settings."""
from __future__ import annotations

from django.contrib import admin

from jobs.admin.base import AuditedAdmin
from jobs.models import SafetyPolicy


@admin.register(SafetyPolicy)
class SafetyPolicyAdmin(AuditedAdmin):
    audit_name = "safety_policy"
    list_display = ("__str__", "enabled", "check_sources", "check_outputs", "min_score", "plugin")
    fields = ("enabled", "check_sources", "check_outputs", "refuse", "min_score", "plugin")

    def has_add_permission(self, request):
        return super().has_add_permission(request) and not SafetyPolicy.objects.exists()

    def has_delete_permission(self, request, obj=None):
        return False  # without the row the defaults apply: the check is off
