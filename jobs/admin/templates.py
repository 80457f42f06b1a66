"""Templates in the admin: checked on the cluster when it answers, and a preview of the batch script."""
from __future__ import annotations

import logging
import re
import uuid

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Max
from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from cluster import ClusterError, render_script
from jobs.admin.base import AuditedAdmin
from jobs.clusters.survey import ClusterSurvey, PartitionSummary, plain_error, survey_profile
from jobs.job.submit import sbatch_spec
from jobs.models import ClusterProfile, Job, QosLevel, Template
from jobs.models.template import time_limit_from_words
from worker.manifest import make_chunks

log = logging.getLogger(__name__)

#: targets in the sample job the template preview renders
PREVIEW_TARGETS = 100
#: the sample job's id: all zeros, so nobody mistakes the preview for a real job
PREVIEW_JOB_ID = uuid.UUID(int=0)


#: a GPU kind and count in a node's gres, "gpu:h200:2" or "gpu:h200:2(S:0-1)"
_GRES_GPU = re.compile(r"gpu:([^:,(]+):(\d+)")


def partition_words(row: PartitionSummary) -> str:
    """A partition as an admin who never saw a cluster reads it: "gpu — 2 computers, 4 × H200 GPUs"."""
    computers = ngettext("%(count)d computer", "%(count)d computers", len(row.nodes)) % {"count": len(row.nodes)}
    if not row.gpus_total:
        gpus = gettext("no GPUs")
    elif len(row.gpu_types) == 1:
        gpus = ngettext("%(count)d × %(type)s GPU", "%(count)d × %(type)s GPUs", row.gpus_total) % {
            "count": row.gpus_total, "type": row.gpu_types[0].upper()}
    else:
        gpus = ngettext("%(count)d GPU", "%(count)d GPUs", row.gpus_total) % {"count": row.gpus_total}
    words = gettext("%(name)s — %(computers)s, %(gpus)s") % {"name": row.name, "computers": computers, "gpus": gpus}
    if row.is_default:
        words += gettext(" (the cluster's default)")
    if row.state and row.state.upper() != "UP":
        words += gettext(" (not taking jobs now)")
    return words


def gone_words(value: str) -> str:
    return gettext("%(name)s — no longer on the cluster") % {"name": value}


def keep_current(choices: list[tuple[str, str]], current: str, words) -> list[tuple[str, str]]:
    """`choices`, with the template's current value added when the list lacks it: a value the
    cluster no longer has stays chosen until the admin picks another, never silently replaced."""
    if current and current not in {value for value, _words in choices}:
        return [*choices, (current, words(current))]
    return choices


def partition_choices(found: ClusterSurvey, current: str) -> list[tuple[str, str]]:
    choices = [(row.name, partition_words(row)) for row in found.summary()]
    blank = [] if current else [("", gettext("Choose where it runs"))]
    return blank + keep_current(choices, current, gone_words)


def gpu_type_choices(found: ClusterSurvey, current: str) -> list[tuple[str, str]]:
    """Every GPU type of the cluster's computers, with how many there are and in which partitions."""
    counts: dict[str, int] = {}
    partitions: dict[str, list[str]] = {}
    for node in found.nodes:
        for kind, count in _GRES_GPU.findall(node.gres or ""):
            counts[kind] = counts.get(kind, 0) + int(count)
            partitions.setdefault(kind, [])
            partitions[kind] += [p for p in node.partitions if p not in partitions[kind]]
        for kind in node.gpu_types:  # a type sinfo named without a count in its gres
            counts.setdefault(kind, 0)
            partitions.setdefault(kind, [p for p in node.partitions])
    choices = [("", gettext("Any type the partition has"))]
    for kind, count in counts.items():
        where = ", ".join(partitions[kind])
        choices.append((kind, ngettext("%(type)s — %(count)d GPU (partitions %(where)s)",
                                       "%(type)s — %(count)d GPUs (partitions %(where)s)", count)
                        % {"type": kind.upper(), "count": count, "where": where}))
    return keep_current(choices, current, gone_words)


def qos_choices(levels: list[QosLevel], current: str) -> list[tuple[str, str]]:
    """The admin's priority levels (Priority levels in the admin), highest first."""
    choices = [("", gettext("Normal: the cluster's default"))]
    choices += [(level.name, gettext("%(label)s (QOS %(name)s)") % {"label": level.label, "name": level.name})
                for level in levels]
    return keep_current(choices, current,
                        lambda value: gettext("%(name)s — not one of the priority levels") % {"name": value})


class TemplateAdminForm(forms.ModelForm):
    """Besides the model's own checks (Template.clean): when the cluster answers, the partition
    and the GPU type must exist there. When it does not answer, the template still saves and the
    admin is warned (`cluster_warning`): an outage must not stop editing presets.

    Partition and GPU type are offered as a list of what the template's cluster has (asked once
    per form, when it is built), QOS as a list of the admin's priority levels; when the cluster
    does not answer, or nobody has defined priority levels, the names are typed as before."""

    #: fields the cluster check reads; it runs only when all of them are otherwise valid
    PLACEMENT_FIELDS = ("cluster", "partition", "gpu_type", "gpu_count")

    class Meta:
        model = Template
        fields = "__all__"
        widgets = {"description": forms.Textarea(attrs={"rows": 3}),
                   "description_zh": forms.Textarea(attrs={"rows": 3})}
        labels = {"partition": _("Where it runs (partition)"), "gpu_type": _("GPU type"), "qos": _("Priority (QOS)")}
        help_texts = {
            "partition": _("The group of the cluster's computers that runs this template's jobs."),
            "gpu_type": _("The kind of GPU each task gets. Empty: any kind the partition has."),
            "qos": _("How soon this template's jobs start when the cluster is busy. Empty: the cluster's normal "
                     "priority. A user group with a higher priority level still gets its own."),
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cluster_warning = ""
        self.cluster_checked = ""
        self._surveys: dict[int, tuple[ClusterSurvey | None, Exception | None]] = {}
        if "time_limit" in self.fields:
            # Longer than the stored "[D-]HH:MM:SS": "1 hour and 30 minutes" is read, then saved short.
            self.fields["time_limit"].max_length = 60
            self.fields["time_limit"].widget.attrs["maxlength"] = "60"
            self.fields["time_limit"].validators = []
        if not self.instance.pk and "order" in self.fields:
            # A new template goes after the others: it must not become the first card, everyone's
            # default on New job (Template.objects.default_for), unless the admin moves it up.
            last = Template.objects.aggregate(last=Max("order"))["last"]
            self.fields["order"].initial = 0 if last is None else last + 1
        self._offer_choices()

    def _current(self, name: str) -> str:
        """The field's value as the page will show it: the one posted, else the saved one."""
        if self.is_bound:
            return str(self.data.get(self.add_prefix(name)) or "").strip()
        return str(self.get_initial_for_field(self.fields[name], name) or "").strip()

    def _chosen_cluster(self) -> ClusterProfile | None:
        if "cluster" not in self.fields:
            return None
        if not self.is_bound and not self.instance.pk and not self.initial.get("cluster"):
            only = list(ClusterProfile.objects.filter(is_active=True)[:2])
            if len(only) == 1:  # one cluster: a new template runs there unless the admin says otherwise
                self.fields["cluster"].initial = only[0].pk
        pk = self._current("cluster")
        try:
            return ClusterProfile.objects.filter(pk=int(pk)).first() if pk else None
        except ValueError:
            return None

    def survey_of(self, profile: ClusterProfile) -> tuple[ClusterSurvey | None, Exception | None]:
        """What the cluster answered, or why it did not: asked once per form and cluster."""
        if profile.pk not in self._surveys:
            try:
                self._surveys[profile.pk] = (survey_profile(profile), None)
            except Exception as exc:
                if not isinstance(exc, ClusterError):
                    log.exception("cluster check of cluster profile %s failed unexpectedly", profile.slug)
                self._surveys[profile.pk] = (None, exc)
        return self._surveys[profile.pk]

    def _offer_choices(self) -> None:
        if "qos" in self.fields:
            levels = list(QosLevel.objects.all())
            if levels:
                self.fields["qos"].widget = forms.Select(choices=qos_choices(levels, self._current("qos")))
        profile = self._chosen_cluster()
        if profile is None or not {"partition", "gpu_type"} <= set(self.fields):
            return
        found, _trouble = self.survey_of(profile)
        if found is None:
            note = gettext("The cluster %(cluster)s did not answer just now, so its list cannot be shown: "
                           "type the name.") % {"cluster": profile}
            for name in ("partition", "gpu_type"):
                self.fields[name].help_text = f"{self.fields[name].help_text} {note}"
            return
        self.fields["partition"].widget = forms.Select(choices=partition_choices(found, self._current("partition")))
        self.fields["gpu_type"].widget = forms.Select(choices=gpu_type_choices(found, self._current("gpu_type")))
        note = gettext("The list is what the cluster %(cluster)s has now.") % {"cluster": profile}
        self.fields["partition"].help_text = f"{self.fields['partition'].help_text} {note}"

    def clean_time_limit(self) -> str:
        text = self.cleaned_data.get("time_limit", "")
        try:
            return time_limit_from_words(text)
        except ValueError:
            return text  # Template.clean says what is accepted, next to the field

    def _post_clean(self) -> None:
        super()._post_clean()  # builds the instance and runs Template.clean()
        if any(name in self.errors for name in self.PLACEMENT_FIELDS) or self.non_field_errors():
            return
        template = self.instance
        if not template.cluster_id or not template.partition:
            return
        found, exc = self.survey_of(template.cluster)
        if exc is not None:
            if isinstance(exc, ClusterError):
                kind, message = plain_error(exc)
            else:
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
    search_fields = ("name", "name_zh", "slug", "description", "description_zh", "partition")
    prepopulated_fields = {"slug": ("name",)}
    filter_horizontal = ("groups",)
    fieldsets = (
        (None, {"fields": ("name", "name_zh", "slug", "description", "description_zh", "is_active", "order",
                           "groups")}),
        (_("Where it runs"), {"fields": ("cluster", "partition", "qos", "container_image")}),
        (_("Resources per task"), {"fields": ("gpu_type", "gpu_count", "cpus_per_task", "mem", "max_mem", "time_limit",
                                              "chunk_size", "array_limit")}),
        (_("Face swap"), {"fields": ("engine", "face_selector", "model_set", "watermark", "self_check")}),
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
