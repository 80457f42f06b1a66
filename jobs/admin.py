"""The Django admin: cluster profiles, templates, jobs (read-mostly) and API tokens."""
from __future__ import annotations

import uuid

from django import forms
from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from .models import ApiToken, ClusterProfile, Job, Target, Task, Template


class WriteOnlyTextarea(forms.Textarea):
    """A textarea that never renders the stored value (a password field for multi-line keys:
    `<input type=password>` would drop the line breaks of a PEM key)."""

    def format_value(self, value):
        return ""


class ClusterProfileForm(forms.ModelForm):
    private_key = forms.CharField(
        label=_("SSH private key"), required=False, strip=False,
        widget=WriteOnlyTextarea(attrs={"rows": 4, "autocomplete": "off", "spellcheck": "false"}),
        help_text=_("Paste the service user's private key (OpenSSH or PEM text). It is stored but never shown "
                    "again; leave this empty to keep the current key."),
    )

    class Meta:
        model = ClusterProfile
        fields = "__all__"

    def clean_private_key(self) -> str:
        key = self.cleaned_data["private_key"].strip()
        if key:
            return key + "\n"
        if self.instance.pk and self.instance.private_key:
            return self.instance.private_key  # empty means "keep"
        raise forms.ValidationError(_("A new cluster profile needs the SSH private key."))


@admin.register(ClusterProfile)
class ClusterProfileAdmin(admin.ModelAdmin):
    form = ClusterProfileForm
    list_display = ("name", "host", "port", "username", "work_root", "is_active", "unreachable_since")
    list_filter = ("is_active",)
    search_fields = ("name", "slug", "host")
    prepopulated_fields = {"slug": ("name",)}
    readonly_fields = ("key_status", "last_contact_at", "unreachable_since", "last_error")
    fieldsets = (
        (None, {"fields": ("name", "slug", "is_active")}),
        (_("SSH"), {"fields": ("host", "port", "username", "key_status", "private_key", "known_hosts")}),
        (_("Folders"), {"fields": ("work_root", "target_roots", "path_mapping", "worker_python", "worker_path",
                                   "models_dir")}),
        (_("Health"), {"fields": ("last_contact_at", "unreachable_since", "last_error")}),
    )

    @admin.display(description=_("current key"))
    def key_status(self, obj: ClusterProfile) -> str:
        if not obj.pk or not obj.private_key:
            return _("none yet")
        first = obj.private_key.strip().splitlines()[0] if obj.private_key.strip() else ""
        kind = first.strip("- ").replace("BEGIN ", "") or _("key")
        return _("set (%(kind)s, %(lines)d lines)") % {"kind": kind, "lines": len(obj.private_key.strip().splitlines())}


@admin.register(Template)
class TemplateAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "cluster", "partition", "gres", "time_limit", "is_active")
    list_filter = ("cluster", "is_active")
    search_fields = ("name", "slug", "description", "partition")
    prepopulated_fields = {"slug": ("name",)}
    filter_horizontal = ("groups",)
    fieldsets = (
        (None, {"fields": ("name", "slug", "description", "is_active", "order", "groups")}),
        (_("Where it runs"), {"fields": ("cluster", "partition", "qos", "container_image")}),
        (_("Resources per task"), {"fields": ("gpu_type", "gpu_count", "cpus_per_task", "mem", "time_limit",
                                              "chunk_size", "array_limit")}),
        (_("Face swap"), {"fields": ("engine", "face_selector")}),
    )

    @admin.display(description=_("GRES"))
    def gres(self, obj: Template) -> str:
        return obj.gres or "—"


class _ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


class TaskInline(_ReadOnlyInline):
    model = Task
    fields = ("index", "state", "node", "elapsed_seconds", "exit_code", "reason", "gpus")


class TargetInline(_ReadOnlyInline):
    model = Target
    classes = ("collapse",)  # a job may have thousands; folded until asked for
    fields = ("index", "name", "status", "task_index", "faces_found", "faces_swapped", "seconds", "message",
              "output_file")


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    """Read-mostly: the watcher and the RQ tasks own a job's state; admins look and may delete."""

    list_display = ("__str__", "status", "owner", "template", "slurm_job_id", "done", "failed", "total", "created_at")
    list_filter = ("status", "cluster", "template")
    list_select_related = ("owner", "template")
    search_fields = ("name", "owner__username", "owner__email", "slurm_job_id")
    date_hierarchy = "created_at"
    inlines = (TaskInline, TargetInline)
    readonly_fields = ("id",)

    class Media:
        css = {"all": ("css/admin.css",)}

    def get_fields(self, request, obj=None):
        return [f.name for f in Job._meta.fields]  # the id first, then the rest in model order

    def has_add_permission(self, request) -> bool:
        return False  # jobs start from the New job page or the API, which check quota and uploads

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # viewing only; deleting stays possible

    def get_search_results(self, request, queryset, search_term):
        queryset, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        try:
            job_id = uuid.UUID(search_term.strip())
        except ValueError:
            return queryset, may_have_duplicates
        # An id is searched as an id: UUIDs are not stored as text everywhere (SQLite drops the dashes).
        return queryset | self.model.objects.filter(pk=job_id), may_have_duplicates


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are made by `manage.py create_api_token <user>` (the key is shown once, there);
    here they are listed and revoked. The key itself is never stored, so never shown."""

    list_display = ("prefix", "user", "created_at", "last_used_at")
    list_select_related = ("user",)
    search_fields = ("prefix", "user__username")
    fields = ("prefix", "user", "created_at", "last_used_at")
    readonly_fields = fields

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
