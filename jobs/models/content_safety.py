"""Content safety settings: whether face photos and results are checked by a detector model.

`SafetyPolicy` is one row, edited in the admin, like the retention settings. Off by default: the
model (NudeNet, AGPL-3.0) is an optional extra a site installs only when it wants the check
(docs/content-safety.md). The checks themselves are `jobs.content_safety` (source photos, in the portal)
and `worker.content_safety` (each result, on the cluster).
"""
from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils.text import format_lazy
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from jobs.models.single_row import SingleRow
from worker.content_safety import BUILTIN_PLUGIN, DEFAULT_MIN_SCORE, DEFAULT_REFUSE, NUDENET_LABELS, SafetySpec


def default_refuse() -> str:
    return ", ".join(DEFAULT_REFUSE)


class SafetyPolicy(SingleRow):
    """Whether the content check runs, on what, and what it refuses."""

    enabled = models.BooleanField(
        _("check photos and results"), default=False,
        help_text=_("Off by default. Needs the optional content-check model installed on the portal and the "
                    "cluster (docs/content-safety.md)."))
    check_sources = models.BooleanField(
        _("check face photos"), default=True,
        help_text=_("Each face photo a user sends is checked; a refused one cannot be used."))
    check_outputs = models.BooleanField(
        _("check results"), default=True,
        help_text=_("Each result is checked on the cluster right after it is made; a refused one is deleted "
                    "and never delivered."))
    refuse = models.TextField(
        _("labels to refuse"), default=default_refuse,
        help_text=format_lazy("{} {}.", _("The model's labels that refuse an image, separated by commas. "
                                          "The built-in model knows:"), ", ".join(NUDENET_LABELS)))
    min_score = models.FloatField(
        _("minimum score"), default=DEFAULT_MIN_SCORE, validators=[MinValueValidator(0.01), MaxValueValidator(1.0)],
        help_text=_("How sure the model must be (0.01 to 1) before a label refuses an image."))
    plugin = models.CharField(
        _("model plug-in"), max_length=200, default=BUILTIN_PLUGIN,
        help_text=_("“nudenet” for the built-in model, or “package.module:callable” for another one "
                    "(docs/content-safety.md)."))

    class Meta:
        verbose_name = _("content check settings")
        verbose_name_plural = _("content check settings")

    def __str__(self) -> str:
        return str(_("Content check settings"))

    @property
    def refused_labels(self) -> tuple[str, ...]:
        return tuple(x.strip() for x in self.refuse.replace("\n", ",").split(",") if x.strip())

    def spec(self) -> SafetySpec:
        """The settings as the checkers take them (the manifest's `safety`)."""
        return SafetySpec(plugin=self.plugin.strip(), refuse=self.refused_labels, min_score=float(self.min_score))

    @property
    def checks_sources(self) -> bool:
        return self.enabled and self.check_sources

    @property
    def checks_outputs(self) -> bool:
        return self.enabled and self.check_outputs

    def clean(self) -> None:
        spec, errors = self.spec(), {}
        if SafetySpec(plugin=spec.plugin).problem():
            errors["plugin"] = gettext("Write “nudenet”, or a plug-in as “package.module:callable”.")
        unknown = [x for x in spec.refuse if x not in NUDENET_LABELS] if spec.plugin == BUILTIN_PLUGIN else []
        if not spec.refuse:
            errors["refuse"] = gettext("List at least one label to refuse.")
        elif unknown:
            errors["refuse"] = gettext("The model has no label %(label)s; use the labels listed below.") % {
                "label": unknown[0]}
        elif "plugin" not in errors and spec.problem():
            errors["refuse"] = gettext("Write labels in capitals, digits and _, separated by commas.")
        if errors:
            raise ValidationError(errors)
