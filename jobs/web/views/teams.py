"""The team page (/teams/<account>/), a team lead's view of their team: its jobs (everyone's), its
members with this month's GPU-hours and their own limits, bookings waiting for approval, and the
templates the team sees. Only the team's leads reach it: anyone else gets 404, staff included
(jobs.access). The rules live in jobs.teams.lead; these views only read forms and redirect."""
from __future__ import annotations

from decimal import Decimal, InvalidOperation

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST, require_safe

from jobs.models import Job, Team, Template
from jobs.teams import lead
from jobs.usage.team_usage import team_usage_rows

JOBS_PER_PAGE = 25


def _team(request: HttpRequest, account: str) -> Team:
    team = lead.team_for_lead(request.user, account)
    if team is None:
        raise Http404("No such team")
    return team


@login_required
@require_safe
def team_list(request: HttpRequest) -> HttpResponse:
    """The teams the user leads; straight to the team page when there is one."""
    teams = list(Team.objects.led_by(request.user))
    if not teams:
        raise Http404("Not a team lead")
    if len(teams) == 1:
        return redirect("team-detail", account=teams[0].slurm_account)
    return render(request, "jobs/team_list.html", {"teams": teams})


@login_required
@require_safe
def team_detail(request: HttpRequest, account: str) -> HttpResponse:
    team = _team(request, account)
    # The lead was checked (`_team`): the team's jobs straight, newest first (index job_team_newest)
    jobs = Job.objects.filter(team=team).select_related("owner").order_by("-created_at", "-pk")
    chosen = set(team.templates.values_list("pk", flat=True))
    context = {
        "team": team,
        "page": Paginator(jobs, JOBS_PER_PAGE).get_page(request.GET.get("page")),
        "anchor": "#team-jobs",
        "members": lead.members(team),
        "team_quota": lead.team_quota(team),
        "bookings": list(lead.waiting_bookings(team)),
        "templates": [(t, t.pk in chosen) for t in Template.objects.filter(is_active=True).order_by("name")],
        "templates_chosen": bool(chosen),
        "led_teams": list(Team.objects.led_by(request.user)),
        "team_usage": team_usage_rows(team),
    }
    return render(request, "jobs/team_detail.html", context)


def _limit(raw: str, kind):
    raw = (raw or "").strip()
    if not raw:
        return None
    value = kind(raw)
    if value < 0:
        raise ValueError(raw)
    return value


@require_POST
@login_required
def member_limits(request: HttpRequest, account: str, user_id: int) -> HttpResponse:
    team = _team(request, account)
    try:
        hours = _limit(request.POST.get("gpu_hours_per_month"), Decimal)
        jobs = _limit(request.POST.get("max_concurrent_jobs"), int)
    except (InvalidOperation, ValueError):
        messages.error(request, _("Give whole numbers (jobs) or hours such as 12.5, or leave a box empty for no "
                                  "limit of their own."))
    else:
        try:
            quota = lead.set_member_limits(team, request.user, user_id, hours, jobs, request=request)
        except lead.QuotaRefused as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, _("Limits of %(name)s saved.") % {"name": quota.user.get_username()})
    return redirect(reverse("team-detail", args=[team.slurm_account]) + "#team-members")


@require_POST
@login_required
def team_templates(request: HttpRequest, account: str) -> HttpResponse:
    team = _team(request, account)
    ids = [i for i in request.POST.getlist("template") if i.isdigit()]
    chosen = list(Template.objects.filter(is_active=True, pk__in=ids))
    lead.set_templates(team, request.user, chosen, request=request)
    if chosen:
        messages.success(request, _("The team now sees %(n)s templates.") % {"n": len(chosen)})
    else:
        messages.success(request, _("The team now sees every template."))
    return redirect(reverse("team-detail", args=[team.slurm_account]) + "#team-templates")


@require_POST
@login_required
def team_booking(request: HttpRequest, account: str, booking_id) -> HttpResponse:
    team = _team(request, account)
    approve = request.POST.get("decision") == "approve"
    done = lead.decide_booking(team, request.user, booking_id, approve, request.POST.get("reason", "").strip(),
                               request=request)
    if done is None:
        raise Http404("No such booking waiting")
    if not done:
        messages.info(request, _("This booking was no longer waiting for approval; nothing changed."))
    elif approve:
        messages.success(request, _("Booking approved. Its owner is told."))
    else:
        messages.success(request, _("Booking refused. Its owner is told why."))
    return redirect(reverse("team-detail", args=[team.slurm_account]) + "#team-bookings")
