"""A team: a user group (Django's Group: its members, quota and priority level) that is also a
Slurm account on the clusters. Every job of the team is submitted with `--account=<account>`, so
Slurm's fair share weighs teams against each other and its accounting counts per team.

A group without a Team row is a plain group (quotas, priority): its members' jobs carry no
account, and Slurm uses the service user's default one. A user in several teams picks one at
Start; without a choice, the team of their last job, else the first by name (`Team.objects.default_for`).
"""
from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from cluster.slurm.accounts import ACCOUNT_MAX, checked_account
from jobs.models.cluster_profile import check_roots


def validate_account(value: str) -> None:
    try:
        checked_account(value)
    except ValueError:
        raise ValidationError(gettext("Use at most %(n)s lower-case letters, digits, dots, dashes or underscores, "
                                      "e.g. vfx-team.") % {"n": ACCOUNT_MAX}) from None


class TeamQuerySet(models.QuerySet):
    def of(self, user):
        """The teams `user` may run jobs for, by name: those they are a member of, and those they lead
        (a lead runs a member's job again for the team, jobs.access)."""
        if not user.is_authenticated:
            return self.none()
        ids = self.filter(models.Q(group__user=user) | models.Q(leads=user)).values("pk")
        return self.filter(pk__in=ids).select_related("group").order_by("group__name")

    def led_by(self, user):
        """The teams `user` leads, by name."""
        if not user.is_authenticated:
            return self.none()
        return self.filter(leads=user).select_related("group").order_by("group__name")

    def default_for(self, user):
        """The team a Start without a choice uses: that of the user's last job still theirs, else the first."""
        mine = self.of(user)
        last = user.jobs.filter(team__in=mine.values("pk")).order_by("-created_at").values_list(
            "team_id", flat=True).first() if user.is_authenticated else None
        return (mine.filter(pk=last).first() if last else None) or mine.first()


class Team(models.Model):
    group = models.OneToOneField(Group, on_delete=models.CASCADE, related_name="team", verbose_name=_("group"),
                                 help_text=_("Its members are the team. The group's quota and priority level stay "
                                             "as they are."))
    slurm_account = models.CharField(
        _("Slurm account"), max_length=ACCOUNT_MAX, unique=True, validators=[validate_account],
        help_text=_("The account the team's jobs are charged to on every cluster. The portal creates it there "
                    "before the team's first job. Lower case, e.g. vfx."))
    target_roots = models.JSONField(
        _("team folders"), default=list, blank=True, validators=[check_roots],
        help_text=_("Cluster folders only this team's members may pick targets from, e.g. [\"/data/vfx\"], on "
                    "every cluster, besides the cluster's own allowed folders. Other teams' members are refused "
                    "here, even where the folder lies inside a cluster's allowed folder."))
    leads = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="teams_led", verbose_name=_("team leads"),
        help_text=_("They look after the team: its jobs, its members' usage and quotas, its bookings and the "
                    "templates it sees. A lead needs no staff rights."))
    templates = models.ManyToManyField(
        "jobs.Template", blank=True, related_name="teams", verbose_name=_("templates the team sees"),
        help_text=_("Only these templates are offered to the team's jobs. None chosen: every active template."))
    #: {cluster profile slug: when the account was found or made there}: asked of the cluster once
    accounts_made = models.JSONField(default=dict, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TeamQuerySet.as_manager()

    class Meta:
        verbose_name = _("team")
        verbose_name_plural = _("teams")
        ordering = ["group__name"]

    def __str__(self) -> str:
        return self.group.name

    @property
    def name(self) -> str:
        return self.group.name

    def offers(self, template) -> bool:
        """Whether the team's jobs may use `template`: any, unless its lead chose some (Team.templates)."""
        chosen = self.templates.values_list("pk", flat=True)
        return not chosen.exists() or template.pk in set(chosen)
