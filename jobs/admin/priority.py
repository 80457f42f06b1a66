"""Priorities in the Django admin: the Slurm QOS levels users' jobs may run at, and which groups get
which (registered from jobs/admin/__init__.py; changes audited as "qoslevel.*" / "grouppriority.*").
The rule that applies them is `jobs.job.priority.qos_for`."""
from __future__ import annotations

from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from jobs.admin.base import AuditedAdmin
from jobs.models import GroupPriority, QosLevel

RULE = _("A job runs at the higher-ranked of its template's QOS and the best level of its owner's groups, "
         "decided when it is started. A template QOS not listed here ranks below every listed level. Urgent work "
         "may pause (requeue) running tasks of lower levels when the GPUs are full: Slurm does it, as the "
         "cluster's QOS settings say (sacctmgr show qos: Priority, Preempt).")


class GroupPriorityInline(admin.TabularInline):
    model = GroupPriority
    extra = 0
    autocomplete_fields = ["group"]


@admin.register(QosLevel)
class QosLevelAdmin(AuditedAdmin):
    list_display = ["label", "name", "rank", "group_names"]
    ordering = ["-rank", "name"]
    search_fields = ["name", "label"]
    inlines = [GroupPriorityInline]

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)
        form.base_fields["rank"].help_text = f"{form.base_fields['rank'].help_text} {RULE}"
        return form

    @admin.display(description=_("groups"))
    def group_names(self, obj) -> str:
        return ", ".join(sorted(g.group.name for g in obj.groups.select_related("group")))


@admin.register(GroupPriority)
class GroupPriorityAdmin(AuditedAdmin):
    list_display = ["group", "qos"]
    autocomplete_fields = ["group"]
    list_select_related = ["group", "qos"]

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)
        form.base_fields["qos"].help_text = RULE
        return form
