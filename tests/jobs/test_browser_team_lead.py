"""A team lead's day in a real browser (headless Chromium, the portal's own web server process):
"Team" in the top bar opens the team page, which lists a member's job; the lead opens it and cancels
it, gives the member a limit (one above the team's quota is refused in plain words) and approves a
booking. English and Chinese, desktop and phone. Screenshots: <screenshots>/team-lead-*.png
(tests/e2e/shots.py)."""
from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from jobs.bookings import lifecycle
from jobs.models import AuditEntry, Booking, BookingState, GpuType, Job, JobStatus, Quota, Team
from tests.e2e.shots import SHOTS
from tests.e2e.test_browser_live import running_server

from .api_helpers import make_job
from .browser_helpers import signed_in_page

pytestmark = pytest.mark.slow

WORDS = {
    "en": {"nav": "Team", "title": "Team vfx", "too_much": "At most 10", "saved": "Limits of alice saved.",
           "cancel": "Cancel", "approve": "Approve", "approved": "Booking approved."},
    "zh-hans": {"nav": "团队", "title": "团队 vfx", "too_much": "每月最多 10", "saved": "已保存 alice 的限额。",
                "cancel": "取消", "approve": "批准", "approved": "预约已批准"},
}


@pytest.fixture
def web_server(transactional_db, tmp_path):
    with running_server(tmp_path) as server:
        yield server


@pytest.mark.parametrize("language, viewport", [
    ("en", {"width": 1280, "height": 1000}),
    ("zh-hans", {"width": 390, "height": 844}),
])
def test_a_lead_looks_after_the_team(web_server, owner, colleague, team, template, monkeypatch, language, viewport):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    monkeypatch.setattr(lifecycle, "notify", lambda b, event: None)
    monkeypatch.setattr(lifecycle, "after_commit_make_reservation", lambda b: None)
    words = WORDS[language]
    vfx = Team.objects.create(group=team, slurm_account="vfx")
    vfx.leads.add(colleague)
    Quota.objects.create(group=team, gpu_hours_per_month=Decimal("10"))
    job = make_job(owner, template, status=JobStatus.RUNNING, name="Wedding shoot", targets=4)
    Job.objects.filter(pk=job.pk).update(team=vfx, slurm_account="vfx")
    start = timezone.now().replace(microsecond=0) + timedelta(days=2)
    h200 = GpuType.objects.create(cluster=template.cluster, gres_type="h200", memory_gb=141,
                                  compute_capability="9.0", inventory=2, nodes=[{"name": "node1", "gpus": 2, "cpus": 2}])
    booking = Booking.objects.create(user=owner, task_name="Trailer", gpu_count=1, duration_minutes=60,
                                     gpu_type=h200, cluster=template.cluster,
                                     starts_at=start, ends_at=start + timedelta(hours=1),
                                     state=BookingState.REQUESTED)
    SHOTS.mkdir(parents=True, exist_ok=True)
    with signed_in_page(web_server.url, colleague, language=language, viewport=viewport) as (page, errors):
        page.goto("/")
        page.locator(".mainnav a", has_text=words["nav"]).click()
        page.wait_for_url("**/teams/vfx/")
        assert page.locator("h1").inner_text() == words["title"]
        row = page.locator(f'#team-jobs tr[data-job-id="{job.id}"]')
        assert "alice" in row.inner_text() and "Wedding shoot" in row.inner_text()
        page.screenshot(path=str(SHOTS / f"team-lead-{language}-{viewport['width']}.png"), full_page=True)

        limits = page.locator('#team-members tr[data-member="alice"] form')
        limits.locator("input[name=gpu_hours_per_month]").fill("25")
        limits.locator("button").click()
        page.wait_for_url("**/teams/vfx/#team-members")
        assert words["too_much"] in page.locator(".messages").inner_text()
        limits = page.locator('#team-members tr[data-member="alice"] form')
        limits.locator("input[name=gpu_hours_per_month]").fill("4")
        limits.locator("button").click()
        page.wait_for_url("**/teams/vfx/#team-members")
        assert words["saved"] in page.locator(".messages").inner_text()
        assert Quota.objects.get(user=owner).gpu_hours_per_month == Decimal("4")

        page.locator(f'#team-bookings tr[data-booking-id="{booking.id}"] button[value=approve]').click()
        page.wait_for_url("**/teams/vfx/#team-bookings")
        assert words["approved"] in page.locator(".messages").inner_text()
        assert Booking.objects.get(pk=booking.pk).state == BookingState.CONFIRMED

        page.locator(f'#team-jobs tr[data-job-id="{job.id}"] a').click()
        page.wait_for_url(f"**/jobs/{job.id}")
        assert "alice" in page.locator("#job-for-lead").inner_text()
        page.screenshot(path=str(SHOTS / f"team-lead-job-{language}-{viewport['width']}.png"), full_page=True)
        assert not errors, errors
    entry = AuditEntry.objects.filter(action="team.member_quota").get()
    assert entry.actor == colleague and entry.details["member"] == "alice"
