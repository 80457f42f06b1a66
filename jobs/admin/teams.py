"""Teams in the Django admin: which groups are teams, and the Slurm account each is charged to
(registered from jobs/admin/__init__.py; changes audited as "team.*"). The account is made on each
cluster before the team's first job there (jobs.clusters.team_accounts)."""
from __future__ import annotations

from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from jobs.admin.base import AuditedAdmin
from jobs.models import Team


@admin.register(Team)
class TeamAdmin(AuditedAdmin):
    list_display = ["__str__", "slurm_account", "member_count", "lead_names", "clusters"]
    search_fields = ["group__name", "slurm_account"]
    autocomplete_fields = ["group"]
    filter_horizontal = ["leads", "templates"]
    fields = ["group", "slurm_account", "target_roots", "leads", "templates"]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("group").prefetch_related("leads")

    @admin.display(description=_("members"))
    def member_count(self, obj) -> int:
        return obj.group.user_set.count()

    @admin.display(description=_("team leads"))
    def lead_names(self, obj) -> str:
        return ", ".join(sorted(u.get_username() for u in obj.leads.all())) or "—"

    @admin.display(description=_("set up on"))
    def clusters(self, obj) -> str:
        return ", ".join(sorted(obj.accounts_made or {})) or "—"
