"""Files sent ahead of Start, in the Django admin: how long unused ones are kept (one row, audited),
and what is waiting, per user, for an admin who needs to see why a disk fills (read-only)."""
from __future__ import annotations

from django.contrib import admin
from django.template.defaultfilters import filesizeformat
from django.utils.translation import gettext_lazy as _

from jobs.admin.base import AuditedAdmin
from jobs.models import Upload, UploadPolicy


@admin.register(UploadPolicy)
class UploadPolicyAdmin(AuditedAdmin):
    audit_name = "upload_policy"
    list_display = ("__str__", "expiry_hours")

    def has_add_permission(self, request):
        return super().has_add_permission(request) and not UploadPolicy.objects.exists()

    def has_delete_permission(self, request, obj=None):
        return False  # without the row the default (24 hours) applies: nothing to delete


@admin.register(Upload)
class UploadAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "kind", "status", "size_text", "created_at", "expires_at")
    list_filter = ("kind", "status")
    search_fields = ("name", "owner__username")
    readonly_fields = [f.name for f in Upload._meta.fields]
    list_select_related = ("owner",)

    @admin.display(description=_("size"), ordering="size")
    def size_text(self, obj: Upload) -> str:
        return filesizeformat(obj.size)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
