"""Templates in the admin: checked on the cluster when it answers, and a preview of the batch script."""
from __future__ import annotations

import logging
import uuid

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from cluster import ClusterError, render_script
from jobs.admin.base import AuditedAdmin
from jobs.clusters.survey import plain_error, survey_profile
from jobs.job.submit import sbatch_spec
from jobs.models import Job, Template
from worker.manifest import make_chunks

log = logging.getLogger(__name__)

#: targets in the sample job the template preview renders
PREVIEW_TARGETS = 100
#: the sample job's id: all zeros, so nobody mistakes the preview for a real job
PREVIEW_JOB_ID = uuid.UUID(int=0)


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
        except Exception as exc:
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
        (_("Face swap"), {"fields": ("engine", "face_selector", "model_set", "watermark")}),
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
    a submission would (jobs.job.submit.sbatch_spec), from the template's snapshot."""
    job = Job(id=PREVIEW_JOB_ID, owner=user, template=template, template_snapshot=template.snapshot().to_json(),
              cluster=template.cluster)
    n_tasks = len(make_chunks(n_targets, max(1, template.chunk_size or 1)))
    return render_script(sbatch_spec(job, n_tasks))
