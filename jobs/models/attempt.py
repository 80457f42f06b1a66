from __future__ import annotations

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from cluster import compress_ranges


class JobAttempt(models.Model):
    """One submission of a job to Slurm: the first run, or a retry over some of its chunks.

    A job has attempt rows once it has been retried (jobs.job.retry): the first run is recorded then,
    next to the new attempt. `Job.attempt` is the number of the attempt that runs now.
    """

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveIntegerField(_("attempt"))
    slurm_job_id = models.CharField(_("Slurm job"), max_length=32, blank=True)
    #: the array indexes (chunks) it runs
    indexes = models.JSONField(default=list)
    #: memory per task it asks for; "" for the partition's default
    mem = models.CharField(_("memory per task"), max_length=16, blank=True)
    why = models.TextField(_("why"), blank=True)
    #: made by the watcher's automatic policy (out of memory, node failure), not by a person
    auto = models.BooleanField(_("automatic"), default=False)
    #: who asked for it (their user name); "" for the first run and automatic retries
    by = models.CharField(_("by"), max_length=150, blank=True)
    #: what an automatic retry answered ("oom", "node_fail"): each is retried automatically once
    kinds = models.JSONField(default=list, blank=True)
    at = models.DateTimeField(_("when"), default=timezone.now)
    #: {array index: end state} of its tasks, recorded when the next attempt starts
    ended = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["number"]
        constraints = [models.UniqueConstraint(fields=["job", "number"], name="unique_job_attempt")]
        verbose_name = _("job attempt")
        verbose_name_plural = _("job attempts")

    def __str__(self) -> str:
        return f"{self.job_id} #{self.number}"

    @property
    def array(self) -> str:
        """Its array indexes as Slurm writes them: "0-3,7"."""
        return compress_ranges(self.indexes) if self.indexes else ""
