"""Priorities: the Slurm QOS levels the admin offers, and which user groups get which.

    QosLevel       one Slurm QOS (its name on the cluster), the plain word users see ("urgent"),
                   and its rank among the others (higher runs first, and may preempt lower)
    GroupPriority  a user group -> the QOS level its members' jobs run at

A job's QOS is decided once, at Start (`jobs.job.priority.qos_for`), and frozen in its template
snapshot: later changes never move a job already queued.
"""
from __future__ import annotations

from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext_lazy as _

from cluster.resources import validate_slurm_name


def _check_qos_name(value: str) -> None:
    try:
        validate_slurm_name("qos", value)
    except ValueError:
        raise ValidationError(_("%(name)s is not a Slurm QOS name (letters, digits, _ . - only).")
                              % {"name": repr(value)}) from None


class QosLevel(models.Model):
    """One Slurm QOS the portal may submit jobs with, e.g. urgent (rank 30) above high (20) above normal (10)."""

    name = models.CharField(_("Slurm QOS"), max_length=64, unique=True, validators=[_check_qos_name],
                            help_text=_("The QOS as the cluster knows it (sacctmgr show qos), e.g. urgent."))
    label = models.CharField(_("name shown to users"), max_length=64,
                             help_text=_("Plain words, e.g. normal, high, urgent."))
    rank = models.IntegerField(
        _("rank"), default=0,
        help_text=_("Higher ranks win: a job runs at the higher-ranked of its template's QOS and the best QOS "
                    "of its owner's groups. Give each level the order its Slurm priority has."))

    class Meta:
        ordering = ["-rank", "name"]
        verbose_name = _("priority level")
        verbose_name_plural = _("priority levels")

    def __str__(self) -> str:
        return f"{self.label} ({self.name})"


class GroupPriority(models.Model):
    """The QOS level a user group's jobs run at (when it ranks above their template's)."""

    group = models.OneToOneField(Group, on_delete=models.CASCADE, related_name="priority", verbose_name=_("group"))
    qos = models.ForeignKey(QosLevel, on_delete=models.CASCADE, related_name="groups", verbose_name=_("priority level"))

    class Meta:
        ordering = ["group__name"]
        verbose_name = _("group priority")
        verbose_name_plural = _("group priorities")

    def __str__(self) -> str:
        return f"{self.group} → {self.qos}"
