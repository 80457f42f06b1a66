"""The Django admin: cluster profiles, templates, jobs (read-mostly), API tokens and the audit log.

Changes to templates, cluster profiles and quotas are audited (`AuditedAdmin`); the audit log
itself is read-only for everyone, superusers included.
"""
from __future__ import annotations

import copy
import json
import logging
import posixpath
import uuid

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from cluster import ClusterError, render_script
from worker.manifest import make_chunks

from . import audit
from .cluster_survey import plain_error, survey_profile
from .models import ApiToken, AuditEntry, ClusterProfile, Job, Target, Task, Template

log = logging.getLogger(__name__)

#: longest text kept per value in an audit entry's details (a description or known_hosts can be long)
AUDIT_VALUE_LENGTH = 500
#: targets in the sample job the template preview renders
PREVIEW_TARGETS = 100
#: the sample job's id: all zeros, so nobody mistakes the preview for a real job
PREVIEW_JOB_ID = uuid.UUID(int=0)


# ---- auditing admin changes ---------------------------------------------------------------------

class AuditedAdmin(admin.ModelAdmin):
    """A ModelAdmin whose adds, changes and deletions go to the audit log.

    Actions are "<audit_name>.add", ".change", ".delete" (audit_name defaults to the model's
    name: "template", "quota"); a change records each changed field as {"from", "to"}. Fields
    named in `audit_secret_fields` are recorded only as changed, never with their value.
    Use it for any model: `class QuotaAdmin(AuditedAdmin): ...`.
    """

    audit_name: str = ""
    audit_secret_fields: tuple[str, ...] = ()

    def get_audit_name(self) -> str:
        return self.audit_name or self.model._meta.model_name

    def audit_values(self, obj) -> dict:
        """Every editable field's value (many-to-many included) as JSON-able text and numbers."""
        values = {}
        for field in obj._meta.get_fields():
            if not getattr(field, "editable", False) or not getattr(field, "concrete", False) or field.auto_created:
                continue
            if field.many_to_many:
                values[field.name] = sorted(str(o) for o in getattr(obj, field.name).all()) if obj.pk else []
            elif field.is_relation:  # a foreign key reads as the object's name, not its id
                related = getattr(obj, field.name, None)
                values[field.name] = None if related is None else _json_value(str(related))
            else:
                values[field.name] = _json_value(field.value_from_object(obj))
        return values

    def _secret_note(self, name: str) -> str:
        field = self.model._meta.get_field(name)
        return gettext("%(field)s changed") % {"field": field.verbose_name}

    def save_model(self, request, obj, form, change) -> None:
        if change and obj.pk:
            before = self.model._default_manager.filter(pk=obj.pk).first()
            obj._audit_before = self.audit_values(before) if before is not None else {}
        super().save_model(request, obj, form, change)

    def save_related(self, request, form, formsets, change) -> None:
        # After the many-to-many fields are saved: the entry sees the groups as they now are.
        super().save_related(request, form, formsets, change)
        obj = form.instance
        after = self.audit_values(obj)
        secret = set(self.audit_secret_fields)
        if not change:
            details = {"fields": {k: v for k, v in after.items() if k not in secret and v not in ("", None, [], {})}}
            audit.record(request.user, f"{self.get_audit_name()}.add", target=obj, details=details, request=request)
            return
        before = getattr(obj, "_audit_before", {})
        changed = {}
        for name, value in after.items():
            if name in before and before[name] == value:
                continue
            changed[name] = self._secret_note(name) if name in secret else {"from": before.get(name), "to": value}
        if changed:
            audit.record(request.user, f"{self.get_audit_name()}.change", target=obj, details={"changed": changed},
                         request=request)

    def delete_model(self, request, obj) -> None:
        gone = copy.copy(obj)  # deleting clears obj.pk; the entry needs it
        super().delete_model(request, obj)
        audit.record(request.user, f"{self.get_audit_name()}.delete", target=gone, request=request)

    def delete_queryset(self, request, queryset) -> None:
        gone = [copy.copy(obj) for obj in queryset]
        super().delete_queryset(request, queryset)
        for obj in gone:
            audit.record(request.user, f"{self.get_audit_name()}.delete", target=obj, request=request)


def _json_value(value):
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, (list, dict)):
        text = json.dumps(value, default=str)
        return value if len(text) <= AUDIT_VALUE_LENGTH else text[:AUDIT_VALUE_LENGTH] + "…"
    text = str(value)
    return text if len(text) <= AUDIT_VALUE_LENGTH else text[:AUDIT_VALUE_LENGTH] + "…"


# ---- cluster profiles ---------------------------------------------------------------------------

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
class ClusterProfileAdmin(AuditedAdmin):
    form = ClusterProfileForm
    audit_name = "profile"
    audit_secret_fields = ("private_key",)
    change_form_template = "admin/jobs/clusterprofile/change_form.html"
    actions = ("test_connection",)
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

    def get_urls(self):
        return [
            path("<path:object_id>/test-connection/", self.admin_site.admin_view(self.test_connection_view),
                 name="jobs_clusterprofile_test_connection"),
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
            except Exception as exc:  # noqa: BLE001 - shown on the page (and logged), not a 500
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


# ---- templates ----------------------------------------------------------------------------------

class TemplateAdminForm(forms.ModelForm):
    """Besides the model's own checks (Template.clean): when the cluster answers, the partition
    and the GPU type must exist there. When it does not answer, the template still saves and the
    admin is warned (`cluster_warning`): an outage must not stop editing presets."""

    #: fields the cluster check reads; it runs only when all of them are otherwise valid
    PLACEMENT_FIELDS = ("cluster", "partition", "gpu_type", "gpu_count")

    class Meta:
        model = Template
        fields = "__all__"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cluster_warning = ""
        self.cluster_checked = ""

    def _post_clean(self) -> None:
        super()._post_clean()  # builds the instance and runs Template.clean()
        if any(name in self.errors for name in self.PLACEMENT_FIELDS) or self.non_field_errors():
            return
        template = self.instance
        if not template.cluster_id or not template.partition:
            return
        try:
            found = survey_profile(template.cluster)
        except Exception as exc:  # noqa: BLE001 - no answer from the cluster never blocks saving a template
            if isinstance(exc, ClusterError):
                kind, message = plain_error(exc)
            else:
                log.exception("cluster check of template %s failed unexpectedly", template.slug)
                kind, message = gettext("Unexpected error"), f"{type(exc).__name__}: {exc}"
            self.cluster_warning = gettext(
                "Saved without checking the partition and GPU type on the cluster %(cluster)s: %(kind)s: %(why)s"
            ) % {"cluster": template.cluster, "kind": kind, "why": message}
            return
        for field, message in found.placement_problems(template.partition, template.gpu_type,
                                                        template.gpu_count).items():
            self.add_error(field, message)
        if not self.errors:
            self.cluster_checked = gettext("Checked on the cluster %(cluster)s: partition %(partition)s exists%(gpus)s.") % {
                "cluster": template.cluster, "partition": template.partition,
                "gpus": (gettext(" and has %(type)s GPUs") % {"type": template.gpu_type}) if template.gpu_type else ""}


@admin.register(Template)
class TemplateAdmin(AuditedAdmin):
    form = TemplateAdminForm
    change_form_template = "admin/jobs/template/change_form.html"
    list_display = ("name", "slug", "cluster", "partition", "gres", "time_limit", "is_active")
    list_filter = ("cluster", "is_active")
    search_fields = ("name", "slug", "description", "partition")
    prepopulated_fields = {"slug": ("name",)}
    filter_horizontal = ("groups",)
    fieldsets = (
        (None, {"fields": ("name", "slug", "description", "is_active", "order", "groups")}),
        (_("Where it runs"), {"fields": ("cluster", "partition", "qos", "container_image")}),
        (_("Resources per task"), {"fields": ("gpu_type", "gpu_count", "cpus_per_task", "mem", "max_mem", "time_limit",
                                              "chunk_size", "array_limit")}),
        (_("Face swap"), {"fields": ("engine", "face_selector")}),
    )

    def get_fieldsets(self, request, obj=None):
        # Fields added to the model later (by other features) still appear, at the end.
        fieldsets = super().get_fieldsets(request, obj)
        listed = {name for _title, opts in fieldsets for name in opts["fields"]}
        extra = [f.name for f in Template._meta.get_fields()
                 if getattr(f, "editable", False) and getattr(f, "concrete", False) and not f.auto_created
                 and f.name not in listed]
        return (*fieldsets, (_("Other"), {"fields": extra})) if extra else fieldsets

    @admin.display(description=_("GRES"))
    def gres(self, obj: Template) -> str:
        return obj.gres or "—"

    def save_model(self, request, obj, form, change) -> None:
        super().save_model(request, obj, form, change)
        if getattr(form, "cluster_warning", ""):
            messages.warning(request, form.cluster_warning)
        elif getattr(form, "cluster_checked", ""):
            messages.info(request, form.cluster_checked)

    def get_urls(self):
        return [
            path("<path:object_id>/preview/", self.admin_site.admin_view(self.preview_view),
                 name="jobs_template_preview"),
            *super().get_urls(),
        ]

    def preview_view(self, request: HttpRequest, object_id: str):
        """The batch script a job of PREVIEW_TARGETS targets would get from the SAVED template."""
        template = get_object_or_404(Template.objects.select_related("cluster"), pk=object_id)
        if not self.has_view_permission(request, template):
            raise PermissionDenied
        script, error = "", ""
        n_tasks = len(make_chunks(PREVIEW_TARGETS, max(1, template.chunk_size or 1)))
        try:
            script = preview_script(template, request.user)
        except ValueError as exc:  # SbatchSpec refuses a value the model let through (an old row)
            error = str(exc)
        context = {
            **self.admin_site.each_context(request),
            "title": gettext("Batch script preview: %(name)s") % {"name": template.name},
            "opts": self.model._meta,
            "original": template,
            "script": script,
            "error": error,
            "n_targets": PREVIEW_TARGETS,
            "n_tasks": n_tasks,
            "change_url": reverse("admin:jobs_template_change", args=[template.pk]),
        }
        return TemplateResponse(request, "admin/jobs/template/preview.html", context)


def preview_script(template: Template, user=None, n_targets: int = PREVIEW_TARGETS) -> str:
    """The sbatch script of a sample job (never saved) of `n_targets` targets, rendered exactly as
    a submission would (jobs.submit.sbatch_spec), from the template's snapshot."""
    from .submit import sbatch_spec

    job = Job(id=PREVIEW_JOB_ID, owner=user, template=template, template_snapshot=template.snapshot(),
              cluster=template.cluster)
    n_tasks = len(make_chunks(n_targets, max(1, template.chunk_size or 1)))
    manifest_path = posixpath.join(template.cluster.job_dir(job.id), "manifest.json")
    return render_script(sbatch_spec(job, manifest_path, n_tasks))


# ---- jobs and tokens ----------------------------------------------------------------------------

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


# ---- the audit log ------------------------------------------------------------------------------

@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    """Read-only for everyone, superusers included: a log that admins could edit proves nothing."""

    list_display = ("at", "who", "action", "target_repr", "ip")
    list_filter = ("action", ("actor", admin.RelatedOnlyFieldListFilter), "at")
    date_hierarchy = "at"
    search_fields = ("target_id", "target_repr", "actor_name")
    fields = ("at", "actor", "actor_name", "action", "target_type", "target_id", "target_repr", "details_text", "ip")
    readonly_fields = fields
    list_per_page = 100

    @admin.display(description=_("user"), ordering="actor_name")
    def who(self, obj: AuditEntry) -> str:
        return obj.actor_name or "—"

    @admin.display(description=_("details"))
    def details_text(self, obj: AuditEntry) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.details, indent=2, ensure_ascii=False, sort_keys=True))

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


from . import admin_usage  # noqa: E402,F401 - usage records, the usage report, email notices

from . import admin_quotas  # noqa: E402,F401  (Quota admin: registers itself)
