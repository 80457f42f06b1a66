"""Model sets in the Django admin (issue 14): folders of model files identified by their SHA-256,
which a template can be pinned to (registered from jobs/admin/__init__.py; changes audited as
"modelset.*"). The worker side is `worker.modelset`; what each job used shows on the job's page."""
from __future__ import annotations

from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from jobs.admin.base import AuditedAdmin
from jobs.models import ModelSet


@admin.register(ModelSet)
class ModelSetAdmin(AuditedAdmin):
    list_display = ["name", "folder", "file_count", "template_names", "created_at"]
    search_fields = ["name", "folder", "description"]
    readonly_fields = ["created_at"]

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("templates")  # one query for the list's templates

    @admin.display(description=_("files"))
    def file_count(self, obj: ModelSet) -> int:
        return len(obj.files or [])

    @admin.display(description=_("pinned templates"))
    def template_names(self, obj: ModelSet) -> str:
        return ", ".join(t.name for t in obj.templates.all()) or "—"
