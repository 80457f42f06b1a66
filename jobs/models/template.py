from __future__ import annotations

from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from cluster import check_slurm_fields
from jobs.models.snapshot import TemplateSnapshot
from worker.choices import ENGINE_NAMES, FACE_SELECTORS

#: the worker's engines and face selectors (worker/choices.py), with the words the admin reads
ENGINE_LABELS = {"auto": _("Automatic (GPU models if installed)"), "insightface": _("InsightFace (GPU)"),
                 "classic": _("Classic (CPU)")}
FACE_SELECTOR_LABELS = {"many": _("Every face"), "one": _("The largest face"),
                        "reference": _("Faces like a reference photo")}
ENGINE_CHOICES = [(name, ENGINE_LABELS[name]) for name in ENGINE_NAMES]
FACE_SELECTOR_CHOICES = [(name, FACE_SELECTOR_LABELS[name]) for name in FACE_SELECTORS]


#: the permission to start jobs with any active template, whatever its groups (Template.Meta.permissions)
USE_ANY_TEMPLATE = "jobs.use_any_template"


class TemplateQuerySet(models.QuerySet):
    def usable_by(self, user):
        """Active templates the user may pick: open to all, or to one of the user's groups; every
        active one with the explicit permission USE_ANY_TEMPLATE (superusers hold it; the staff
        flag alone does not: an admin trying a template out before opening it to a group)."""
        qs = self.filter(is_active=True, cluster__is_active=True)
        if user.has_perm(USE_ANY_TEMPLATE):
            return qs
        return qs.filter(models.Q(groups__isnull=True) | models.Q(groups__in=user.groups.all())).distinct()


class Template(models.Model):
    """An admin-defined preset: where and how a job runs. Jobs keep a snapshot of it."""

    name = models.CharField(_("name"), max_length=100)
    slug = models.SlugField(_("slug"), unique=True)
    description = models.TextField(_("description"), blank=True, help_text=_("Plain words shown on the template card."))
    cluster = models.ForeignKey("jobs.ClusterProfile", on_delete=models.PROTECT, verbose_name=_("cluster profile"))
    partition = models.CharField(_("partition"), max_length=64)
    gpu_type = models.CharField(_("GPU type"), max_length=64, blank=True)
    gpu_count = models.PositiveIntegerField(_("GPUs per task"), default=1)
    cpus_per_task = models.PositiveIntegerField(_("CPUs per task"), default=1)
    mem = models.CharField(_("memory per task"), max_length=16, default="4G")
    max_mem = models.CharField(
        _("memory ceiling"), max_length=16, blank=True, default="", db_default="",
        help_text=_("A task that runs out of memory is retried once, automatically, with twice the memory, "
                    "up to this much. Empty: twice the memory per task."))
    time_limit = models.CharField(_("time limit"), max_length=16, default="00:30:00",
                                  help_text=_("Always set: [D-]HH:MM:SS. Jobs without one never fit before a reservation."))
    chunk_size = models.PositiveIntegerField(_("images per task"), default=10)
    seconds_per_image = models.FloatField(
        _("seconds per image"), default=3.0, validators=[MinValueValidator(0)],
        help_text=_("About how long one image takes on this template's GPUs. Only used to estimate the "
                    "GPU-hours of a job before Start (quota check and the New job page)."))
    array_limit = models.PositiveIntegerField(_("tasks at once"), null=True, blank=True)
    container_image = models.CharField(_("container image"), max_length=500, blank=True)
    engine = models.CharField(_("engine"), max_length=16, choices=ENGINE_CHOICES, default="auto")
    face_selector = models.CharField(_("faces to swap"), max_length=16, choices=FACE_SELECTOR_CHOICES, default="many")
    qos = models.CharField(_("QOS"), max_length=64, blank=True)
    #: provenance and model versions (issue 14): a visible corner text, and the pinned model files
    watermark = models.CharField(
        _("watermark"), max_length=60, blank=True, default="", db_default="",
        help_text=_("Optional short text drawn small in the bottom-right corner of every result, e.g. "
                    "“Made with AI”. Letters, digits and punctuation of the Latin alphabet only."))
    model_set = models.ForeignKey(
        "jobs.ModelSet", on_delete=models.PROTECT, null=True, blank=True, related_name="templates",
        verbose_name=_("model set"),
        help_text=_("Pin the template to these model files: jobs use this folder and refuse a file whose "
                    "SHA-256 differs. Empty: the cluster profile's models folder."))
    groups = models.ManyToManyField(Group, blank=True, verbose_name=_("groups"),
                                    help_text=_("Only these groups may use it; none means everyone."))
    is_active = models.BooleanField(_("active"), default=True)
    order = models.PositiveIntegerField(_("order"), default=0)

    objects = TemplateQuerySet.as_manager()

    class Meta:
        ordering = ["order", "name"]
        verbose_name = _("template")
        verbose_name_plural = _("templates")
        permissions = [("use_any_template", _("Can use every template, whatever its groups"))]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """Refuse what Slurm would refuse at submission, so it fails here, in front of the admin,
        not on a user's Start. The rules are the cluster package's (`check_slurm_fields`), the same
        ones every batch script is checked against; here each problem is said in the admin's words.

        Whether the partition and the GPU type exist needs the cluster: the admin form checks
        that when the cluster answers (jobs.clusters.survey), since a model must save offline.
        """
        problems = check_slurm_fields(
            partition=self.partition, qos=self.qos, time_limit=self.time_limit, mem=self.mem,
            max_mem=self.max_mem, gres=self.gres, cpus_per_task=self.cpus_per_task, array_limit=self.array_limit,
            chunk_size=self.chunk_size, container_image=self.container_image)
        if not self.partition:
            problems.pop("partition", None)  # the form's own "This field is required" says it
        if self.cpus_per_task is None:
            problems.pop("cpus_per_task", None)
        words = {
            "partition": lambda why: _("%(name)s is not a Slurm partition name (letters, digits, _ . - only).") % {
                "name": repr(self.partition)},
            "qos": lambda why: _("%(name)s is not a Slurm QOS name (letters, digits, _ . - only).") % {
                "name": repr(self.qos)},
            # The GPU request is built from type and count; a bad type is where the fix goes.
            "gres": lambda why: _("%(why)s. The GPU type is one word, like h200 or a100.") % {"why": why},
            "chunk_size": lambda why: _("Each task needs at least one image: set 1 or more."),
            "array_limit": lambda why: _("Allow at least 1 task at once, or leave it empty for no limit."),
            "cpus_per_task": lambda why: _("Each task needs at least 1 CPU."),
            "container_image": lambda why: _("The container image must be a single line."),
        }
        errors = {("gpu_type" if field == "gres" else field): words.get(field, str)(why)
                  for field, why in problems.items()}
        if self.watermark and any(not 32 <= ord(c) < 127 for c in self.watermark):
            errors.setdefault("watermark", _("The watermark can only use Latin letters, digits and punctuation "
                                             "(the cluster draws it without other fonts)."))
        if self.gpu_type and not self.gpu_count:
            errors.setdefault("gpu_count", _("A GPU type is set but no GPUs are asked for: set the count to 1 or more, "
                                             "or clear the GPU type."))
        if errors:
            raise ValidationError(errors)

    @property
    def gres(self) -> str:
        if not self.gpu_count:
            return ""
        return f"gpu:{self.gpu_type}:{self.gpu_count}" if self.gpu_type else f"gpu:{self.gpu_count}"

    def snapshot(self) -> TemplateSnapshot:
        """What a job runs with, frozen at Start: later edits never change a submitted job."""
        return TemplateSnapshot(
            slug=self.slug, name=self.name, cluster=self.cluster.slug, partition=self.partition, gres=self.gres,
            gpu_count=self.gpu_count, cpus_per_task=self.cpus_per_task, mem=self.mem, max_mem=self.max_mem,
            time_limit=self.time_limit, chunk_size=self.chunk_size, array_limit=self.array_limit,
            container_image=self.container_image, engine=self.engine, face_selector=self.face_selector, qos=self.qos,
            seconds_per_image=self.seconds_per_image, watermark=self.watermark,
            model_set=self.model_set.pin() if self.model_set_id else {})
