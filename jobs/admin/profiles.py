"""Cluster profiles in the admin: the SSH key is write-only; "Test connection" logs in now.

The key is never shown back, to anyone: the change form's field renders empty; a page that cannot
edit (the "view" permission alone) has no key field at all, because Django renders read-only
fields itself, value included; and the change list refuses filters on it (`?private_key__...=`
would tell, a character at a time, what the key starts with)."""
from __future__ import annotations

import logging

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models.constants import LOOKUP_SEP
from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from cluster import ClusterError
from jobs.admin.base import AuditedAdmin
from jobs.admin.clusters import cluster_page_urls
from jobs.clusters.survey import plain_error, survey_profile
from jobs.models import ClusterProfile
from jobs.secrets import SecretText

log = logging.getLogger(__name__)


class WriteOnlyTextarea(forms.Textarea):
    """A textarea that never renders the stored value (a password field for multi-line keys:
    `<input type=password>` would drop the line breaks of a PEM key)."""

    def format_value(self, value):
        return ""


class ClusterProfileForm(forms.ModelForm):
    private_key = forms.CharField(
        label=_("SSH private key"), required=False, strip=False,
        widget=WriteOnlyTextarea(attrs={"rows": 4, "autocomplete": "off", "spellcheck": "false"}),
        help_text=_("Paste the service user's private key (OpenSSH or PEM text). It is stored encrypted and never "
                    "shown again; leave this empty to keep the current key."),
    )

    class Meta:
        model = ClusterProfile
        fields = "__all__"

    def clean_private_key(self) -> str:
        key = self.cleaned_data["private_key"].strip()
        if key:
            return SecretText(key + "\n")
        if self.instance.pk and self.instance.private_key:
            return self.instance.private_key  # empty means "keep"
        raise forms.ValidationError(_("A new cluster profile needs the SSH private key."))


@admin.register(ClusterProfile)
class ClusterProfileAdmin(AuditedAdmin):
    form = ClusterProfileForm
    audit_name = "profile"
    audit_secret_fields = ("private_key",)
    change_form_template = "admin/jobs/clusterprofile/change_form.html"
    actions = ("test_connection",)
    list_display = ("name", "host", "port", "username", "work_root", "is_active", "unreachable_since")
    list_filter = ("is_active",)
    search_fields = ("name", "name_zh", "slug", "host")
    prepopulated_fields = {"slug": ("name",)}
    readonly_fields = ("key_status", "last_contact_at", "unreachable_since", "last_error", "max_array_size",
                       "max_job_count", "slurm_release")
    fieldsets = (
        (None, {"fields": ("name", "name_zh", "slug", "is_active")}),
        (_("SSH"), {"fields": ("host", "port", "username", "key_status", "private_key", "known_hosts")}),
        (_("Folders"), {"fields": ("work_root", "target_roots", "path_mapping", "worker_python", "worker_path",
                                   "models_dir")}),
        (_("Job size"), {"fields": ("max_targets_per_job", "max_array_size", "max_job_count", "slurm_release")}),
        (_("Power saving"), {"fields": ("node_boot_seconds",)}),
        (_("Health"), {"fields": ("last_contact_at", "unreachable_since", "last_error")}),
    )

    def get_fieldsets(self, request: HttpRequest, obj: ClusterProfile | None = None):
        fieldsets = super().get_fieldsets(request, obj)
        editable = self.has_change_permission(request, obj) if obj is not None else self.has_add_permission(request)
        if editable:
            return fieldsets
        # View only: Django would render the key as a read-only field, in clear.
        return [(name, {**options, "fields": tuple(f for f in options["fields"] if f != "private_key")})
                for name, options in fieldsets]

    def lookup_allowed(self, lookup: str, value, request=None) -> bool:
        if lookup.split(LOOKUP_SEP)[0] == "private_key":
            return False
        return super().lookup_allowed(lookup, value, request)

    @admin.display(description=_("current key"))
    def key_status(self, obj: ClusterProfile) -> str:
        # Whether a key is set, and nothing of it: its label or length would be a piece of it.
        if not obj.pk or not obj.private_key:
            return _("none yet")
        return _("set, stored encrypted")

    def get_urls(self):
        return [
            path("<path:object_id>/test-connection/", self.admin_site.admin_view(self.test_connection_view),
                 name="jobs_clusterprofile_test_connection"),
            *cluster_page_urls(self),  # the Clusters page (jobs.admin.clusters), before "<object_id>/"
            *super().get_urls(),
        ]

    @admin.action(description=_("Test connection (sinfo and scontrol over SSH)"), permissions=["view"])
    def test_connection(self, request: HttpRequest, queryset):
        return self.connection_report(request, list(queryset.order_by("name")))

    def test_connection_view(self, request: HttpRequest, object_id: str):
        profile = get_object_or_404(ClusterProfile, pk=object_id)
        if not self.has_view_permission(request, profile):
            raise PermissionDenied
        return self.connection_report(request, [profile])

    def connection_report(self, request: HttpRequest, profiles: list[ClusterProfile]) -> TemplateResponse:
        """Log in to each cluster on a NEW connection (so the host key and the login are tested
        now) and show its partitions, GPU types and free GPUs, or exactly why it failed."""
        results = []
        for profile in profiles:
            try:
                found = survey_profile(profile, fresh=True)
            except ClusterError as exc:
                kind, message = plain_error(exc)
                results.append({"profile": profile, "ok": False, "kind": kind, "error": message})
            except Exception as exc:
                log.exception("test connection of cluster profile %s failed unexpectedly", profile.slug)
                results.append({"profile": profile, "ok": False, "kind": gettext("Unexpected error"),
                                "error": f"{type(exc).__name__}: {exc}"})
            else:
                results.append({"profile": profile, "ok": True, "partitions": found.summary(), "nodes": found.nodes})
        context = {
            **self.admin_site.each_context(request),
            "title": gettext("Test connection"),
            "opts": self.model._meta,
            "results": results,
        }
        return TemplateResponse(request, "admin/jobs/clusterprofile/test_connection.html", context)
