from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _


class Quota(models.Model):
    """Limits for ONE user or ONE group (exactly one of the two). Every limit is optional: empty
    means "no limit". A user is bound by their own quota AND by the quota of every group they are
    in; the stricter applies (see `jobs.quotas`). A group's GPU-hours and jobs at once are shared
    by all of its members; targets per job and upload size apply to each job and file."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True,
                                related_name="quota", verbose_name=_("user"),
                                error_messages={"unique": _("This user already has a quota: edit that one.")})
    group = models.OneToOneField(Group, on_delete=models.CASCADE, null=True, blank=True, related_name="quota",
                                 verbose_name=_("group"),
                                 error_messages={"unique": _("This group already has a quota: edit that one.")})
    gpu_hours_per_month = models.DecimalField(
        _("GPU-hours per month"), max_digits=10, decimal_places=2, null=True, blank=True,
        validators=[MinValueValidator(0)],
        help_text=_("Per calendar month, GPU time x GPUs. For a group: all members together. Empty: no limit."))
    max_concurrent_jobs = models.PositiveIntegerField(
        _("jobs at once"), null=True, blank=True,
        help_text=_("Jobs waiting or running at the same time. For a group: all members together. Empty: no limit."))
    max_targets_per_job = models.PositiveIntegerField(
        _("targets per job"), null=True, blank=True,
        help_text=_("Images and videos in one job (uploaded, or found in the folder). Empty: no limit."))
    max_upload_mb = models.PositiveIntegerField(
        _("upload size (MB per file)"), null=True, blank=True,
        help_text=_("Largest file a user may upload, in MB. Empty: no limit beyond the site's own."))
    booking_gpu_hours_per_month = models.DecimalField(
        _("booked GPU-hours per month"), max_digits=10, decimal_places=2, null=True, blank=True,
        validators=[MinValueValidator(0)],
        help_text=_("GPU-hours that may be booked ahead per calendar month (by a booking's start). For a group: "
                    "all members together. Empty: no limit."))
    note = models.CharField(_("note"), max_length=200, blank=True, help_text=_("Why this quota, for other admins."))
    updated_at = models.DateTimeField(_("changed"), auto_now=True)

    class Meta:
        verbose_name = _("quota")
        verbose_name_plural = _("quotas")
        ordering = [models.F("group__name").asc(nulls_last=True), "user__username"]  # groups, then users
        constraints = [
            models.CheckConstraint(
                condition=(models.Q(user__isnull=False, group__isnull=True)
                           | models.Q(user__isnull=True, group__isnull=False)),
                name="quota_user_xor_group",
                violation_error_message=_("A quota is for exactly one user or one group."),
            ),
        ]

    def __str__(self) -> str:
        return self.subject

    @property
    def subject(self) -> str:
        """Who it applies to, in words: "user alice" / "group vfx"."""
        if self.user_id:
            return gettext("user %(name)s") % {"name": self.user.get_username()}
        if self.group_id:
            return gettext("group %(name)s") % {"name": self.group.name}
        return gettext("nobody yet")

    def clean(self) -> None:
        # Errors on a field (not the whole form): Django then skips the check constraint on that
        # field, so the admin shows this sentence once, not also the constraint's generic one.
        if self.user_id and self.group_id:
            raise ValidationError({"group": gettext(
                "A quota is for one user OR one group, not both: clear one of the two (add a second quota "
                "for the other).")})
        if not self.user_id and not self.group_id:
            raise ValidationError({"user": gettext("Choose the user or the group this quota applies to.")})
