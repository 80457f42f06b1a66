from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class TeamUsage(models.Model):
    """GPU-seconds a team's Slurm account used on one cluster in one month, as Slurm's own
    accounting (sacct) said when last asked (jobs.usage.team_usage).

    Stored so that pages never wait on SSH: a refresh overwrites the row, and a cluster that does
    not answer leaves it as it was, with `read_at` telling how old it is. `month` is the month's
    first day in the portal's time zone (settings.TIME_ZONE), as UsageRecord.period.
    """

    team = models.ForeignKey("jobs.Team", on_delete=models.CASCADE, related_name="usage",
                             verbose_name=_("team"))
    cluster = models.ForeignKey("jobs.ClusterProfile", on_delete=models.CASCADE, related_name="team_usage",
                                verbose_name=_("cluster"))
    month = models.DateField(_("month"))
    gpu_seconds = models.FloatField(_("GPU-seconds"), default=0)
    read_at = models.DateTimeField(_("read at"))

    class Meta:
        verbose_name = _("team usage")
        verbose_name_plural = _("team usage")
        ordering = ["-month", "team", "cluster"]
        constraints = [models.UniqueConstraint(fields=["team", "cluster", "month"], name="team_usage_once")]

    def __str__(self) -> str:
        return f"{self.team} {self.cluster} {self.month:%Y-%m}"

    @property
    def gpu_hours(self) -> float:
        return self.gpu_seconds / 3600.0
