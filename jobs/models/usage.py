from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class UsageRecord(models.Model):
    """What one finished job cost, charged once from Slurm's accounting (elapsed x allocated GPUs).

    `period` is the first day of the calendar month the job ended in: quotas count per month.
    One row per job (charging is idempotent: the watcher may see a job end twice).
    """

    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, related_name="usage")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="usage_records")
    period = models.DateField(_("month"), db_index=True)
    gpu_seconds = models.FloatField(_("GPU-seconds"), default=0)
    cpu_seconds = models.FloatField(_("CPU-seconds"), default=0)
    charged_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("usage record")
        verbose_name_plural = _("usage records")
        ordering = ["-period", "-charged_at"]

    @property
    def gpu_hours(self) -> float:
        return self.gpu_seconds / 3600.0
