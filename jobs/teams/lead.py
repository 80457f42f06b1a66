"""A team lead's powers, each scoped to the team and audited ("team.*" entries, actor the lead):

- set a member's own limits (GPU-hours a month, jobs at once) WITHIN the team's own quota: a lead
  can tighten a member, never give them more than the whole team has;
- choose the templates the team's jobs are offered (none chosen: every active template);
- approve or refuse the bookings of the team's members that wait for approval.

A lead's reach over the team's jobs (open, cancel, retry, run again) is the access rule's
(jobs.access.led_by); this module holds the rest.
"""
from __future__ import annotations

import dataclasses
from decimal import Decimal

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Count, Sum
from django.utils.translation import gettext as _

from jobs import audit
from jobs.bookings import lifecycle
from jobs.models import Booking, BookingState, Job, Quota, Team, Template, UsageRecord
from jobs.quotas.limits import ACTIVE_JOB_STATUSES
from jobs.usage.accounting import month_of

__all__ = ["MemberRow", "QuotaRefused", "members", "set_member_limits", "set_templates", "waiting_bookings",
           "decide_booking", "team_for_lead"]


class QuotaRefused(ValueError):
    """A member limit the lead may not set; the message says what to do."""


def team_for_lead(user, account: str) -> Team | None:
    """The team with Slurm account `account` if `user` leads it, else None (the page answers 404)."""
    return Team.objects.led_by(user).filter(slurm_account=account).first()


@dataclasses.dataclass(frozen=True)
class MemberRow:
    user: object
    gpu_hours: float  # this month, the portal's own charge of the member's ended jobs for THIS team
    active_jobs: int
    quota: Quota | None  # the member's own quota row, if any

    @property
    def gpu_hours_limit(self):
        return self.quota.gpu_hours_per_month if self.quota else None

    @property
    def jobs_limit(self):
        return self.quota.max_concurrent_jobs if self.quota else None


def members(team: Team) -> list[MemberRow]:
    """The team's members by name, with this month's GPU-hours of their jobs for the team (as Slurm's
    figures for the team's account, beside them), jobs waiting or running (any team: what their
    limit counts) and their own limits: four queries, however many members."""
    people = list(team.group.user_set.order_by("username"))
    ids = [u.pk for u in people]
    hours = dict(UsageRecord.objects.filter(user__in=ids, job__team=team, period=month_of()).values("user")
                 .annotate(s=Sum("gpu_seconds")).values_list("user", "s"))
    active = dict(Job.objects.filter(owner__in=ids, status__in=ACTIVE_JOB_STATUSES).values("owner")
                  .annotate(n=Count("pk")).values_list("owner", "n"))
    quotas = {q.user_id: q for q in Quota.objects.filter(user__in=ids)}
    return [MemberRow(u, round((hours.get(u.pk) or 0) / 3600, 2), active.get(u.pk) or 0, quotas.get(u.pk))
            for u in people]


def team_quota(team: Team) -> Quota | None:
    return Quota.objects.filter(group=team.group).first()


def set_member_limits(team: Team, lead, member_id: int, gpu_hours: Decimal | None, jobs: int | None,
                      request=None) -> Quota:
    """Set `member`'s own GPU-hours a month and jobs at once (None: no limit of their own; the
    team's still applies). Refused above the team's own quota, or for someone not in the team."""
    member = get_user_model().objects.filter(pk=member_id, groups=team.group).first()
    if member is None:
        raise QuotaRefused(_("This person is not in the team."))
    own = team_quota(team)
    if own is not None and own.gpu_hours_per_month is not None and gpu_hours is not None \
            and gpu_hours > own.gpu_hours_per_month:
        raise QuotaRefused(_("At most %(n)s GPU-hours a month: that is the whole team's quota. Ask an admin to "
                             "raise the team's quota first.") % {"n": own.gpu_hours_per_month})
    if own is not None and own.max_concurrent_jobs is not None and jobs is not None \
            and jobs > own.max_concurrent_jobs:
        raise QuotaRefused(_("At most %(n)s jobs at once: that is the whole team's quota. Ask an admin to raise "
                             "the team's quota first.") % {"n": own.max_concurrent_jobs})
    with transaction.atomic():
        quota, _made = Quota.objects.select_for_update().get_or_create(user=member)
        before = {"gpu_hours_per_month": _plain(quota.gpu_hours_per_month), "max_concurrent_jobs": quota.max_concurrent_jobs}
        quota.gpu_hours_per_month, quota.max_concurrent_jobs = gpu_hours, jobs
        if not quota.note:
            quota.note = _("Set by %(lead)s, lead of %(team)s") % {"lead": lead.get_username(), "team": team.name}
        quota.save()
        audit.record(lead, "team.member_quota", target=team, request=request, details={
            "member": member.get_username(), "before": before,
            "after": {"gpu_hours_per_month": _plain(gpu_hours), "max_concurrent_jobs": jobs}})
    return quota


def _plain(value):
    return None if value is None else str(value)


def set_templates(team: Team, lead, templates: list[Template], request=None) -> None:
    """The templates the team's jobs are offered (an empty list: every active template)."""
    with transaction.atomic():
        before = sorted(team.templates.values_list("slug", flat=True))
        team.templates.set(templates)
        audit.record(lead, "team.templates", target=team, request=request,
                     details={"before": before, "after": sorted(t.slug for t in templates)})


def waiting_bookings(team: Team):
    """The members' bookings that wait for approval, soonest first."""
    return (Booking.objects.filter(user__groups=team.group, state=BookingState.REQUESTED)
            .select_related("user", "gpu_type", "cluster").order_by("starts_at"))


def decide_booking(team: Team, lead, booking_id, approve: bool, reason: str = "", request=None) -> bool | None:
    """Approve or refuse a member's booking that waits for approval (audited by the booking's own
    lifecycle, actor the lead). None: no such booking waiting in this team; False: it moved meanwhile."""
    booking = waiting_bookings(team).filter(pk=booking_id).first()
    if booking is None:
        return None
    if approve:
        return lifecycle.confirm(booking, actor=lead, request=request)
    return lifecycle.refuse(booking, reason or _("Refused by your team lead."), actor=lead, request=request)
