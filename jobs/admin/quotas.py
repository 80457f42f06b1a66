"""Quotas in the Django admin (registered from jobs/admin/__init__.py). Changes are audited
("quota.add/change/delete", `AuditedAdmin`); the rules that use them live in `jobs.quotas`."""
from __future__ import annotations

from django.contrib import admin
from django.db.models import Q
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from jobs.admin.base import AuditedAdmin
from jobs.models import Quota
from jobs.quotas import active_jobs_count, format_hours, gpu_hours_used, members_of


class AppliesToFilter(admin.SimpleListFilter):
    title = _("applies to")
    parameter_name = "applies_to"

    def lookups(self, request, model_admin):
        return [("user", _("a user")), ("group", _("a group"))]

    def queryset(self, request, queryset):
        if self.value() == "user":
            return queryset.filter(user__isnull=False)
        if self.value() == "group":
            return queryset.filter(group__isnull=False)
        return queryset


class LimitSetFilter(admin.SimpleListFilter):
    title = _("limit set")
    parameter_name = "limit"
    FIELDS = {"gpu": "gpu_hours_per_month", "jobs": "max_concurrent_jobs", "targets": "max_targets_per_job",
              "upload": "max_upload_mb"}

    def lookups(self, request, model_admin):
        return [("gpu", _("GPU-hours per month")), ("jobs", _("jobs at once")), ("targets", _("targets per job")),
                ("upload", _("upload size")), ("none", _("no limit at all"))]

    def queryset(self, request, queryset):
        if self.value() in self.FIELDS:
            return queryset.filter(**{f"{self.FIELDS[self.value()]}__isnull": False})
        if self.value() == "none":
            return queryset.filter(**{f"{f}__isnull": True for f in self.FIELDS.values()})
        return queryset


@admin.register(Quota)
class QuotaAdmin(AuditedAdmin):
    """One row per user or group. Empty limits mean "no limit"; the stricter of a user's own and
    their groups' quotas applies (jobs.quotas). Usage shown is this month's, jobs still running
    counted at their estimate, as the Start check counts it."""

    list_display = ("subject", "gpu_hours", "max_concurrent_jobs", "max_targets_per_job", "max_upload_mb",
                    "used_this_month", "running_now", "note")
    list_display_links = ("subject",)
    list_filter = (AppliesToFilter, LimitSetFilter, ("group", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("user", "group")
    search_fields = ("user__username", "user__email", "group__name", "note")
    autocomplete_fields = ("user", "group")
    readonly_fields = ("used_this_month", "running_now", "updated_at")
    fieldsets = (
        (_("Who"), {"fields": ("user", "group", "note"),
                    "description": _("One user OR one group. A user is bound by their own quota and by the quota "
                                     "of each group they are in: the stricter limit applies.")}),
        (_("Limits (empty: no limit)"), {"fields": ("gpu_hours_per_month", "max_concurrent_jobs",
                                                     "max_targets_per_job", "max_upload_mb")}),
        (_("Now"), {"fields": ("used_this_month", "running_now", "updated_at")}),
    )

    @admin.display(description=_("applies to"), ordering="group__name")
    def subject(self, obj: Quota) -> str:
        return obj.subject

    @admin.display(description=_("GPU-hours per month"), ordering="gpu_hours_per_month")
    def gpu_hours(self, obj: Quota) -> str | None:
        return None if obj.gpu_hours_per_month is None else format_hours(obj.gpu_hours_per_month)

    @admin.display(description=_("GPU-hours used this month"))
    def used_this_month(self, obj: Quota) -> str:
        if not obj.pk:
            return "—"
        used = format_hours(gpu_hours_used(members_of(obj)))
        if obj.gpu_hours_per_month is None:
            return used
        return gettext("%(used)s of %(limit)s") % {"used": used, "limit": format_hours(obj.gpu_hours_per_month)}

    @admin.display(description=_("jobs waiting or running"))
    def running_now(self, obj: Quota) -> int | str:
        return active_jobs_count(members_of(obj)) if obj.pk else "—"

    def get_search_results(self, request, queryset, search_term):
        # Searching "alice" also finds the quotas of alice's groups: the ones that bind her.
        queryset, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        term = search_term.strip()
        if term:
            queryset = queryset | self.model.objects.filter(Q(group__user__username__iexact=term))
            may_have_duplicates = True
        return queryset, may_have_duplicates
