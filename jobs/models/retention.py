"""How long a job's files are kept: face photos are personal data (docs/privacy.md).

`RetentionPolicy` is one row, edited in the admin: after `days` from a job's end its files (the
uploads, outputs, thumbnails on the portal, the job folder on the cluster) are deleted; the owner is
emailed `notice_days` before. The job row itself stays as a tombstone (`Job.files_deleted_at`), so
usage and the audit log keep their history. The rules live in `jobs.results.retention`.
"""
from __future__ import annotations

from datetime import timedelta

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from jobs.models.single_row import SingleRow


class RetentionPolicy(SingleRow):
    """How many days a finished job's files are kept, and how many days before the deletion the owner hears of it."""

    days = models.PositiveIntegerField(
        _("keep a job's files for (days)"), default=30, validators=[MinValueValidator(1), MaxValueValidator(3650)],
        help_text=_("Counted from the end of the job. Then its photos, videos and results are deleted from the "
                    "portal and from the cluster; the job stays listed, marked “files deleted”."))
    notice_days = models.PositiveIntegerField(
        _("tell the owner (days before)"), default=3, validators=[MaxValueValidator(365)],
        help_text=_("The owner is emailed this many days before the deletion (0: no email). Files are never "
                    "deleted sooner than this after the email."))

    class Meta:
        verbose_name = _("retention settings")
        verbose_name_plural = _("retention settings")

    def __str__(self) -> str:
        return str(_("Retention settings"))

    @property
    def keep(self) -> timedelta:
        return timedelta(days=self.days)

    @property
    def notice(self) -> timedelta:
        return timedelta(days=min(self.notice_days, self.days))
