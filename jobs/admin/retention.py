"""Retention in the Django admin: how many days a finished job's files are kept, and how many days
before the deletion the owner is emailed (one row, audited, like the upload settings)."""
from __future__ import annotations

from django.contrib import admin

from jobs.admin.base import AuditedAdmin
from jobs.models import RetentionPolicy


@admin.register(RetentionPolicy)
class RetentionPolicyAdmin(AuditedAdmin):
    audit_name = "retention_policy"
    list_display = ("__str__", "days", "notice_days")

    def has_add_permission(self, request):
        return super().has_add_permission(request) and not RetentionPolicy.objects.exists()

    def has_delete_permission(self, request, obj=None):
        return False  # without the row the defaults (30 days, notice 3 days before) apply
