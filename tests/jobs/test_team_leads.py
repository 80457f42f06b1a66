"""Team leads (jobs.models.Team.leads, jobs.access.led_by, jobs.teams.lead, /teams/): a lead sees and
manages the team's jobs (open, files, cancel, retry, run again), sets members' limits within the
team's quota, approves the members' bookings waiting for approval and chooses the templates the
team sees; everything audited. No one else, staff included, reaches a team page or a member's job."""
from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group, User
from django.urls import reverse
from django.utils import timezone

from jobs.bookings import lifecycle
from jobs.errors import StartError
from jobs.job.start import start_job
from jobs.models import (
    AuditEntry,
    Booking,
    BookingState,
    Job,
    JobStatus,
    Quota,
    Team,
    TeamUsage,
    Template,
    UsageRecord,
)
from jobs.usage.accounting import month_of

from .api_helpers import make_job, token_client


@pytest.fixture
def vfx(team, owner, colleague):
    t = Team.objects.create(group=team, slurm_account="vfx")
    t.leads.add(colleague)  # bob leads vfx; alice is a member
    return t


@pytest.fixture
def post(db, stranger):
    group = Group.objects.create(name="post")
    stranger.groups.add(group)
    return Team.objects.create(group=group, slurm_account="post")


@pytest.fixture
def alices_job(owner, template, vfx):
    job = make_job(owner, template, status=JobStatus.RUNNING, name="Alice's shoot", targets=2)
    Job.objects.filter(pk=job.pk).update(team=vfx, slurm_account="vfx")
    return Job.objects.get(pk=job.pk)


def login(client, user):
    client.force_login(user)
    return client


# ---- who reaches what ----------------------------------------------------------------------------

def test_a_lead_opens_a_members_job_but_it_stays_out_of_the_leads_own_list(client, colleague, alices_job):
    c = login(client, colleague)
    page = c.get(reverse("job-detail", args=[alices_job.id]))
    assert page.status_code == 200 and "Alice&#x27;s shoot" in page.content.decode()
    assert 'id="job-for-lead"' in page.content.decode()  # whose job it is, and that actions are recorded
    assert 'id="job-for-lead"' not in login(client, alices_job.owner).get(
        reverse("job-detail", args=[alices_job.id])).content.decode()
    c = login(client, colleague)
    assert "Alice" not in c.get(reverse("job-list")).content.decode()
    team_page = c.get(reverse("team-detail", args=["vfx"])).content.decode()
    assert f'data-job-id="{alices_job.id}"' in team_page and ">alice<" in team_page


@pytest.mark.parametrize("who", ["stranger", "staff", "owner"])
def test_no_one_but_a_lead_reaches_the_team_page(client, request, who, vfx):
    c = login(client, request.getfixturevalue(who))
    for name, args in [("team-detail", ["vfx"]), ("team-list", [])]:
        assert c.get(reverse(name, args=args)).status_code == 404
    assert c.post(reverse("team-templates", args=["vfx"])).status_code == 404


def test_a_lead_of_another_team_gets_404_for_this_teams_jobs(client, stranger, post, alices_job):
    post.leads.add(stranger)
    c = login(client, stranger)
    assert c.get(reverse("job-detail", args=[alices_job.id])).status_code == 404
    assert c.post(reverse("job-cancel", args=[alices_job.id])).status_code == 404
    assert c.get(reverse("team-detail", args=["vfx"])).status_code == 404
    assert c.get(reverse("team-list")).status_code == 302  # one team led: straight to it
    alices_job.refresh_from_db()
    assert alices_job.status == JobStatus.RUNNING


def test_what_only_the_owner_may_do_stays_the_owners(client, colleague, alices_job):
    c = login(client, colleague)
    Job.objects.filter(pk=alices_job.pk).update(status=JobStatus.COMPLETED)
    assert c.post(reverse("job-delete", args=[alices_job.id])).status_code == 404
    assert c.post(reverse("job-target-replace", args=[alices_job.id, 0])).status_code == 404


def test_a_lead_cancels_a_members_job_and_the_audit_says_for_whom(client, colleague, alices_job):
    c = login(client, colleague)
    r = c.post(reverse("job-cancel", args=[alices_job.id]))
    assert r.status_code == 302
    alices_job.refresh_from_db()
    assert alices_job.cancel_requested or alices_job.status == JobStatus.CANCELLED
    entry = AuditEntry.objects.get(action="job.cancel")
    assert entry.actor == colleague and entry.details["owner"] == "alice" and entry.details["team"] == "vfx"


def test_the_api_lists_a_leads_team_jobs_on_request_only(colleague, stranger, post, alices_job):
    api, _key = token_client(colleague)
    assert api.get("/api/v1/jobs").json()["count"] == 0
    listed = api.get("/api/v1/jobs?team=vfx").json()
    assert [(j["id"], j["owner"], j["team"]) for j in listed["results"]] == [(str(alices_job.id), "alice", "vfx")]
    assert api.get(f"/api/v1/jobs/{alices_job.id}").status_code == 200
    other, _key = token_client(stranger)
    assert other.get("/api/v1/jobs?team=vfx").json()["count"] == 0
    assert other.get(f"/api/v1/jobs/{alices_job.id}").status_code == 404


def test_a_lead_runs_a_members_job_again_for_the_team(client, colleague, alices_job):
    c = login(client, colleague)
    page = c.get(reverse("job-new") + f"?again={alices_job.id}").content.decode()
    assert "Alice&#x27;s shoot" in page
    assert Team.objects.of(colleague).filter(slurm_account="vfx").exists()  # a lead may run jobs for the team


# ---- limits within the team's quota --------------------------------------------------------------

def test_a_lead_sets_a_members_limits_within_the_teams_quota(client, colleague, owner, vfx):
    Quota.objects.create(group=vfx.group, gpu_hours_per_month=Decimal("100"), max_concurrent_jobs=5)
    c = login(client, colleague)
    url = reverse("team-member-limits", args=["vfx", owner.pk])
    too_much = c.post(url, {"gpu_hours_per_month": "150", "max_concurrent_jobs": "2"}, follow=True)
    assert "At most 100" in too_much.content.decode()
    assert not Quota.objects.filter(user=owner).exists()
    c.post(url, {"gpu_hours_per_month": "12.5", "max_concurrent_jobs": ""})
    quota = Quota.objects.get(user=owner)
    assert (quota.gpu_hours_per_month, quota.max_concurrent_jobs) == (Decimal("12.5"), None)
    entry = AuditEntry.objects.get(action="team.member_quota")
    assert entry.actor == colleague and entry.details["member"] == "alice"
    assert entry.details["after"]["gpu_hours_per_month"] == "12.5"


def test_a_lead_cannot_set_limits_of_someone_outside_the_team(client, colleague, stranger, vfx):
    c = login(client, colleague)
    r = c.post(reverse("team-member-limits", args=["vfx", stranger.pk]), {"gpu_hours_per_month": "1"}, follow=True)
    assert "not in the team" in r.content.decode()
    assert not Quota.objects.filter(user=stranger).exists()


# ---- bookings ------------------------------------------------------------------------------------

def _booking(user, state=BookingState.REQUESTED) -> Booking:
    start = timezone.make_aware(timezone.datetime(2031, 3, 4, 10, 0))
    return Booking.objects.create(user=user, task_name="night run", gpu_count=1, duration_minutes=60,
                                  starts_at=start, ends_at=start + timedelta(hours=1), state=state)


def test_a_lead_approves_or_refuses_only_the_teams_waiting_bookings(client, colleague, owner, stranger, vfx,
                                                                   monkeypatch):
    monkeypatch.setattr(lifecycle, "notify", lambda b, event: None)
    monkeypatch.setattr(lifecycle, "after_commit_make_reservation", lambda b: None)
    mine, other, refused = _booking(owner), _booking(stranger), _booking(owner)
    c = login(client, colleague)
    page = c.get(reverse("team-detail", args=["vfx"])).content.decode()
    assert f'data-booking-id="{mine.id}"' in page and str(other.id) not in page
    c.post(reverse("team-booking", args=["vfx", mine.id]), {"decision": "approve"})
    c.post(reverse("team-booking", args=["vfx", refused.id]), {"decision": "refuse", "reason": "Not this week"})
    assert c.post(reverse("team-booking", args=["vfx", other.id]), {"decision": "approve"}).status_code == 404
    states = {b.pk: (b.state, b.reason, b.decided_by_id) for b in Booking.objects.all()}
    assert states[mine.pk][0] == BookingState.CONFIRMED and states[mine.pk][2] == colleague.pk
    assert states[refused.pk][:2] == (BookingState.REFUSED, "Not this week")
    assert states[other.pk][0] == BookingState.REQUESTED


# ---- templates -----------------------------------------------------------------------------------

def test_a_teams_template_choice_is_what_its_new_job_offers_and_start_accepts(client, colleague, owner, vfx,
                                                                              template):
    other = Template.objects.create(name="Slow CPU", slug="slow-cpu", cluster=template.cluster, partition="cpu",
                                    gpu_count=0, mem="2G", time_limit="00:10:00", chunk_size=2, engine="classic")
    login(client, colleague).post(reverse("team-templates", args=["vfx"]), {"template": [str(other.pk)]})
    assert list(vfx.templates.all()) == [other]
    assert AuditEntry.objects.filter(action="team.templates", actor=colleague).exists()
    client.force_login(owner)
    page = client.get(reverse("job-new")).content.decode()
    assert "Slow CPU" in page and "Quick GPU" not in page
    with pytest.raises(StartError) as refused:
        start_job(user=owner, template=template, target_folder="/srv/ffportal/storage/x", consent=True)
    assert any(field == "template" and "does not use this template" in str(msg) for field, msg in refused.value.problems)


def test_the_lead_sees_members_gpu_hours_this_month(client, colleague, owner, vfx, alices_job):
    UsageRecord.objects.create(job=alices_job, user=owner, period=month_of(), gpu_seconds=3 * 3600)
    page = login(client, colleague).get(reverse("team-detail", args=["vfx"])).content.decode()
    row = page[page.index('data-member="alice"'):]
    assert 'data-usage="member-gpu-hours">3' in row[:800]
    assert User.objects.get(username="bob") == colleague


def test_the_usage_page_gives_a_lead_the_teams_slurm_figure_this_month(client, colleague, owner, vfx, profile):
    TeamUsage.objects.create(team=vfx, cluster=profile, month=month_of(), gpu_seconds=7.5 * 3600,
                             read_at=timezone.now())
    page = login(client, colleague).get(reverse("usage")).content.decode()
    item = page[page.index('data-team="vfx"'):]
    assert 'href="/teams/vfx/"' in item[:200] and 'data-usage="team-gpu-hours">7.5' in item[:400]
    assert 'id="led-teams"' not in login(client, owner).get(reverse("usage")).content.decode()


def test_the_api_offers_the_templates_the_team_sees(client, colleague, owner, vfx, template):
    other = Template.objects.create(name="Slow CPU", slug="slow-cpu", cluster=template.cluster, partition="cpu",
                                    gpu_count=0, mem="2G", time_limit="00:10:00", chunk_size=2, engine="classic")
    api, _key = token_client(owner)
    assert {t["slug"] for t in api.get("/api/v1/templates").json()} == {"quick-gpu", "slow-cpu"}
    vfx.templates.set([other])
    assert [t["slug"] for t in api.get("/api/v1/templates").json()] == ["slow-cpu"]
