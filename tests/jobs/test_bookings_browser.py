"""Booking pages in a real browser (issue 27, item 2): times in the browser's own time zone, in the
one format of the booking pages, and a Cancel dialog that says what happens to the jobs inside.
The portal's web server in its own process on this test's database, headless Chromium in
Shanghai; no cluster is needed (nothing is cancelled: the dialog is answered "Keep")."""
from __future__ import annotations

from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

import pytest

from jobs.models import Booking, BookingState, GpuType, JobStatus
from tests.e2e.shots import SHOTS
from tests.e2e.test_browser_live import running_server

from .api_helpers import make_job
from .browser_helpers import signed_in_page

pytestmark = pytest.mark.slow
#: a fixed moment, 23:48 in UTC and 07:48 the next day in Shanghai
STARTS = datetime(2027, 1, 5, 23, 48, tzinfo=dt_timezone.utc)


@pytest.fixture
def web_server(transactional_db, tmp_path):
    with running_server(tmp_path) as server:
        yield server


@pytest.mark.parametrize("locale, waiting_words, zone_words", [
    ("en-GB", "Album · waiting: joins the normal queue", "Times are in the time zone UTC+8."),
    ("zh-CN", "Album · 正在等待：将进入公共队列", "时间按 UTC+8 时区显示。"),
])
def test_booking_times_follow_the_browser_and_cancel_says_what_happens(web_server, owner, profile, template,
                                                                       monkeypatch, locale, waiting_words,
                                                                       zone_words):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    h200 = GpuType.objects.create(cluster=profile, gres_type="h200", label="H200", memory_gb=141,
                                  compute_capability="9.0", inventory=2)
    booking = Booking.objects.create(user=owner, task_name="Deadline", gpu_count=1, duration_minutes=120,
                                     cluster=profile, gpu_type=h200, starts_at=STARTS,
                                     ends_at=STARTS + timedelta(hours=2), state=BookingState.CONFIRMED,
                                     reservation_name="ffp-deadline", reservation_made=True)
    job = make_job(owner, template, status=JobStatus.PENDING, name="Album")
    job.booking = booking
    job.save()
    with signed_in_page(web_server.url, owner, timezone_id="Asia/Shanghai", locale=locale) as (page, errors):
        page.goto(f"/bookings/{booking.id}")
        # the first visit is drawn in the site's zone; the page tells the server the browser's and redraws
        page.locator("#booking-zone[data-time-zone='Asia/Shanghai']").wait_for(timeout=10_000)
        assert page.locator("#booking-zone").inner_text() == zone_words
        assert "2027-01-06 07:48" in page.locator("dl.facts").inner_text()
        page.goto("/bookings/")
        assert "2027-01-06 07:48" in page.locator("#bookings").inner_text()
        page.click(f"tr[data-booking-id='{booking.id}'] button[type=submit]")
        dialog = page.locator(f"#cancel-dialog-{booking.id}")
        dialog.wait_for(state="visible")
        assert waiting_words in dialog.inner_text()
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"booking-cancel-with-a-job-inside-{locale}.png"))
        dialog.locator("button[value=keep]").click()
        assert not errors, errors
    booking.refresh_from_db()
    assert booking.state == BookingState.CONFIRMED  # "Keep" kept it
