"""Bookings in the Django admin: GPU types (counted on the cluster), the booking rules (one row),
and the bookings themselves, with Approve and Refuse (with a reason). All audited."""
from __future__ import annotations

import logging

from django import forms
from django.contrib import admin, messages
from django.template.response import TemplateResponse
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from cluster import ClusterError
from jobs import bookings
from jobs.admin.base import AuditedAdmin
from jobs.clusters.survey import plain_error
from jobs.models import Booking, BookingPolicy, BookingState, GpuType

log = logging.getLogger(__name__)


class GpuTypeAdminForm(forms.ModelForm):
    """Besides the model's checks: when the cluster answers, it must have GPUs of this gres type.
    When it does not answer, the type still saves and the admin is warned (as for templates)."""

    class Meta:
        model = GpuType
        fields = "__all__"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cluster_warning = ""

    def _post_clean(self) -> None:
        super()._post_clean()
        if self.errors or not self.instance.cluster_id or not self.instance.gres_type:
            return
        gpu_type = self.instance
        try:
            found = bookings.count_gpus(gpu_type.cluster)
        except Exception as exc:  # noqa: BLE001 - no answer from the cluster never blocks saving
            kind, why = plain_error(exc) if isinstance(exc, ClusterError) else (gettext("Unexpected error"), str(exc))
            self.cluster_warning = gettext("Saved without checking the GPU type on the cluster %(cluster)s: "
                                           "%(kind)s: %(why)s") % {"cluster": gpu_type.cluster, "kind": kind,
                                                                   "why": why}
            return
        if gpu_type.gres_type not in found:
            self.add_error("gres_type", gettext("The cluster %(cluster)s has no %(type)s GPUs; its GPU types: "
                                                "%(found)s.") % {"cluster": gpu_type.cluster,
                                                                 "type": gpu_type.gres_type,
                                                                 "found": ", ".join(sorted(found)) or gettext("none")})


@admin.register(GpuType)
class GpuTypeAdmin(AuditedAdmin):
    form = GpuTypeAdminForm
    audit_name = "gpu_type"
    actions = ("count_gpus",)
    list_display = ("gres_type", "label", "cluster", "memory_gb", "compute_capability", "inventory",
                    "inventory_checked_at", "is_active")
    list_filter = ("cluster", "is_active")
    search_fields = ("gres_type", "label")
    readonly_fields = ("inventory", "nodes", "inventory_checked_at")

    def save_model(self, request, obj, form, change) -> None:
        super().save_model(request, obj, form, change)
        if getattr(form, "cluster_warning", ""):
            messages.warning(request, form.cluster_warning)
            return
        self._count(request, [obj.cluster])

    @admin.action(description=_("Count GPUs on the cluster"), permissions=["change"])
    def count_gpus(self, request, queryset):
        profiles = {t.cluster_id: t.cluster for t in queryset.select_related("cluster")}
        self._count(request, list(profiles.values()))

    def _count(self, request, profiles) -> None:
        for profile in profiles:
            try:
                counts = bookings.refresh_inventory(profile)
            except ClusterError as exc:
                kind, why = plain_error(exc)
                messages.error(request, gettext("%(cluster)s: GPUs not counted: %(kind)s: %(why)s")
                               % {"cluster": profile, "kind": kind, "why": why})
                continue
            found = ", ".join(f"{gres}: {n}" for gres, n in sorted(counts.items())) or gettext("no GPUs")
            messages.info(request, gettext("%(cluster)s: GPUs counted (%(found)s).")
                          % {"cluster": profile, "found": found})


@admin.register(BookingPolicy)
class BookingPolicyAdmin(AuditedAdmin):
    """One row: the admin edits it, never adds a second one or deletes it."""

    audit_name = "booking_policy"
    list_display = ("__str__", "unit_minutes", "min_minutes", "max_hours", "max_days_ahead", "free_percent",
                    "approval")

    def has_add_permission(self, request) -> bool:
        return super().has_add_permission(request) and not BookingPolicy.objects.exists()

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class RefuseForm(forms.Form):
    reason = forms.CharField(label=_("Reason, for the owner"), widget=forms.Textarea(attrs={"rows": 3}),
                             max_length=1000)


@admin.register(Booking)
class BookingAdmin(admin.ModelAdmin):
    """Bookings are made by users; admins approve, refuse (with a reason) or look. Every decision is
    audited by jobs.bookings.lifecycle ("booking.confirm", "booking.refuse")."""

    actions = ("approve_bookings", "refuse_bookings")
    date_hierarchy = "starts_at"
    list_display = ("task_name", "user", "state", "gpu_type", "gpu_count", "cluster", "starts_at", "ends_at",
                    "priority", "reservation_name")
    list_filter = ("state", "cluster", "gpu_type")
    list_select_related = ("user", "gpu_type", "cluster")
    search_fields = ("task_name", "user__username", "reservation_name")
    readonly_fields = [f.name for f in Booking._meta.fields] + ["reservation_made"]

    def has_add_permission(self, request) -> bool:
        return False  # bookings go through the rules (capacity, quota): the API and the booking page

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # cancel or refuse instead: the reservation must go too, and the owner be told

    @admin.action(description=_("Approve the selected bookings"), permissions=["change"])
    def approve_bookings(self, request, queryset):
        done = sum(bookings.confirm(b, actor=request.user, request=request)
                   for b in queryset.filter(state=BookingState.REQUESTED))
        skipped = queryset.count() - done
        messages.info(request, ngettext("%(count)d booking approved.", "%(count)d bookings approved.", done)
                      % {"count": done})
        if skipped:
            messages.warning(request, ngettext(
                "%(count)d booking was not waiting for approval and was left as it was.",
                "%(count)d bookings were not waiting for approval and were left as they were.", skipped)
                % {"count": skipped})

    @admin.action(description=_("Refuse the selected bookings (with a reason)"), permissions=["change"])
    def refuse_bookings(self, request, queryset):
        form = RefuseForm(request.POST if request.POST.get("confirm") else None)
        if form.is_bound and form.is_valid():
            done = sum(bookings.refuse(b, form.cleaned_data["reason"], actor=request.user, request=request)
                       for b in queryset)
            messages.info(request, ngettext("%(count)d booking refused.", "%(count)d bookings refused.", done)
                          % {"count": done})
            return None
        context = {**self.admin_site.each_context(request), "title": gettext("Refuse bookings"),
                   "opts": self.model._meta, "bookings": list(queryset.select_related("user")), "form": form}
        return TemplateResponse(request, "admin/jobs/booking/refuse.html", context)
