from __future__ import annotations

import re

from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from cluster import check_slurm_fields, time_limit_seconds
from jobs.bilingual import in_language
from jobs.models.snapshot import TemplateSnapshot
from worker.choices import ENGINE_NAMES, FACE_SELECTORS

#: the worker's engines and face selectors (worker/choices.py), with the words the admin reads
ENGINE_LABELS = {"auto": _("Automatic (GPU models if installed)"), "insightface": _("InsightFace (GPU)"),
                 "classic": _("Classic (CPU)")}
FACE_SELECTOR_LABELS = {"many": _("Every face"), "one": _("The largest face"),
                        "reference": _("Faces like a reference photo")}
ENGINE_CHOICES = [(name, ENGINE_LABELS[name]) for name in ENGINE_NAMES]
FACE_SELECTOR_CHOICES = [(name, FACE_SELECTOR_LABELS[name]) for name in FACE_SELECTORS]


#: the units an admin may write a time limit in, English and Chinese, as seconds
_DURATION_UNITS = {
    **dict.fromkeys(("d", "day", "days", "天", "日"), 86400),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours", "小时", "个小时", "钟头", "个钟头"), 3600),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes", "分", "分钟"), 60),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds", "秒", "秒钟"), 1),
}
# longest first, so that "minutes" is not read as "m" + "inutes"
_UNIT = "|".join(sorted(map(re.escape, _DURATION_UNITS), key=len, reverse=True))
_DURATION_PART = re.compile(rf"(\d+(?:\.\d+)?)\s*({_UNIT})(?![a-z])")
_DURATION_GLUE = re.compile(r"[\s,，、]*(?:and|和)?[\s,，、]*")


def time_limit_from_words(text: str) -> str:
    """A time limit as an admin writes it, in Slurm's form: "20 minutes" -> "00:20:00", "2 hours",
    "90 min", "1 day 6 hours" -> "1-06:00:00", "20 分钟", "2 小时", "1 天". Slurm's own forms
    ("00:20:00", "1-12:00:00", "30" for minutes) are kept as written.

    Raises ValueError when the text is neither, or is no time at all (zero)."""
    text = str(text or "").strip()
    try:
        time_limit_seconds(text)
    except ValueError:
        pass
    else:
        return text
    words, seconds, at = text.lower(), 0.0, 0
    for part in _DURATION_PART.finditer(words):
        if _DURATION_GLUE.fullmatch(words[at:part.start()]) is None:
            raise ValueError(f"not a duration: {text!r}")
        seconds += float(part.group(1)) * _DURATION_UNITS[part.group(2)]
        at = part.end()
    if at == 0 or _DURATION_GLUE.fullmatch(words[at:]) is None or round(seconds) <= 0:
        raise ValueError(f"not a duration: {text!r}")
    days, rest = divmod(round(seconds), 86400)
    clock = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{clock}" if days else clock


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

    def used_by(self, teams):
        """Those at least one of `teams` uses (Team.templates, chosen by its lead; a team that chose
        none uses every one); all of them for no team. start_job checks the job's own team again."""
        chosen = Template.teams.through.objects.filter(team__in=[t.pk for t in teams])
        if not teams or {t.pk for t in teams} - set(chosen.values_list("team_id", flat=True)):
            return self
        return self.filter(pk__in=chosen.values("template_id"))

    def default_for(self, user):
        """The template New job starts on, among these: the one of the user's last job, when it is
        still here; else the first card (`order`, then name). A template added later therefore takes
        nobody's choice away: the admin form puts it last unless the admin moves it up."""
        last = (user.jobs.filter(template__in=self.values("pk")).order_by("-created_at")
                .values_list("template_id", flat=True).first()) if user.is_authenticated else None
        return (self.filter(pk=last).first() if last else None) or self.first()


class Template(models.Model):
    """An admin-defined preset: where and how a job runs. Jobs keep a snapshot of it."""

    name = models.CharField(_("name"), max_length=100)
    name_zh = models.CharField(_("Chinese name (简体中文)"), max_length=100, blank=True, default="", db_default="",
                               help_text=_("Shown to people who read the portal in Chinese. Empty: they see the name above."))
    slug = models.SlugField(_("slug"), unique=True)
    description = models.TextField(
        _("description"), blank=True,
        help_text=_("Plain words shown on the template card: what it is good for, with no cluster words."))
    description_zh = models.TextField(
        _("Chinese description (简体中文)"), blank=True, default="", db_default="",
        help_text=_("Shown to people who read the portal in Chinese. Empty: they see the description above."))
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
    time_limit = models.CharField(
        _("time limit"), max_length=16, default="00:30:00",
        help_text=_("How long each task may run before the cluster stops it. Write it in words, such as "
                    "“20 minutes”, “2 hours”, “1 day 6 hours”, “20 分钟” or “2 小时”, or as [D-]HH:MM:SS, "
                    "such as 00:20:00; it is saved as [D-]HH:MM:SS. Always set: jobs without one never fit "
                    "before a reservation."))
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
    self_check = models.BooleanField(
        _("check each result"), default=True, db_default=True,
        help_text=_("Look at each photo's result again with the engine's own face recogniser, and mark the faces "
                    "that did not take as needing a look on the job page. Without a GPU this takes about as long "
                    "as the swap itself; with one, a few milliseconds a face."))
    groups = models.ManyToManyField(Group, blank=True, verbose_name=_("groups"),
                                    help_text=_("Only these groups may use it; none means everyone."))
    is_active = models.BooleanField(_("active"), default=True)
    order = models.PositiveIntegerField(
        _("order"), default=0,
        help_text=_("Cards are shown lowest first. Someone who has not started a job yet finds the first card "
                    "chosen; everyone else finds the template of their last job chosen."))

    objects = TemplateQuerySet.as_manager()

    class Meta:
        ordering = ["order", "name"]
        verbose_name = _("template")
        verbose_name_plural = _("templates")
        permissions = [("use_any_template", _("Can use every template, whatever its groups"))]

    def __str__(self) -> str:
        return self.name

    @property
    def shown_name(self) -> str:
        """The name in the reader's language (jobs.bilingual)."""
        return in_language(self.name, self.name_zh)

    @property
    def shown_description(self) -> str:
        return in_language(self.description, self.description_zh)

    def clean(self) -> None:
        """Refuse what Slurm would refuse at submission, so it fails here, in front of the admin,
        not on a user's Start. The rules are the cluster package's (`check_slurm_fields`), the same
        ones every batch script is checked against; here each problem is said in the admin's words.

        Whether the partition and the GPU type exist needs the cluster: the admin form checks
        that when the cluster answers (jobs.clusters.survey), since a model must save offline.
        """
        try:  # "20 minutes" is kept as Slurm reads it ("00:20:00"); what is no duration is said below
            self.time_limit = time_limit_from_words(self.time_limit)
        except ValueError:
            pass
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
            "time_limit": lambda why: _("Write the time limit in words, such as “20 minutes”, “2 hours”, “1 day” or "
                                        "“20 分钟”, or as [D-]HH:MM:SS, such as 00:20:00. It must be longer than zero."),
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
            slug=self.slug, name=self.name, name_zh=self.name_zh, cluster=self.cluster.slug, partition=self.partition, gres=self.gres,
            gpu_count=self.gpu_count, cpus_per_task=self.cpus_per_task, mem=self.mem, max_mem=self.max_mem,
            time_limit=self.time_limit, chunk_size=self.chunk_size, array_limit=self.array_limit,
            container_image=self.container_image, engine=self.engine, face_selector=self.face_selector, qos=self.qos,
            seconds_per_image=self.seconds_per_image, watermark=self.watermark, self_check=self.self_check,
            model_set=self.model_set.pin() if self.model_set_id else {})
