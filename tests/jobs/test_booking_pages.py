"""The booking pages (/bookings/...) and the off-peak suggestion (jobs.bookings.offpeak).

Views through the test client; the cluster's sacct history through a fake runner at the one seam
(`cluster.runner_for`); capacity and placement are jobs.bookings' own (no stand-ins).
"""
from __future__ import annotations

import dataclasses
import re
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from zoneinfo import ZoneInfo

import pytest
from django.urls import reverse
from django.utils import timezone

import cluster
from jobs.bookings import offpeak
from jobs.models import Booking, BookingPolicy, BookingState, GpuType

SHANGHAI = ZoneInfo("Asia/Shanghai")


@dataclasses.dataclass(frozen=True)
class Use:
    start: datetime
    end: datetime | None
    gpus: int


@pytest.fixture(autouse=True)
def _site_zone(settings):
    settings.TIME_ZONE = "Asia/Shanghai"  # not UTC: hours of the week must be the site's


@pytest.fixture
def h200(profile):
    return GpuType.objects.create(cluster=profile, gres_type="h200", label="H200 141 GB", memory_gb=141,
                                  compute_capability="9.0", inventory=2,
                                  nodes=[{"name": "vm", "gpus": 2, "cpus": 2}])


def busy_except(quiet_day: int, quiet_hours: range, start: datetime, weeks: int, gpus: int = 2) -> list[Use]:
    """History of a cluster busy with `gpus` GPUs every hour, except `quiet_hours` of `quiet_day`
    (site time): the sacct-like record of `weeks` weeks from `start`."""
    uses = []
    at = start
    while at < start + timedelta(weeks=weeks):
        local = at.astimezone(SHANGHAI)
        if not (local.weekday() == quiet_day and local.hour in quiet_hours):
            uses.append(Use(at, at + timedelta(hours=1), gpus))
        at += timedelta(hours=1)
    return uses


# ---- hour-of-week load (pure) -------------------------------------------------------------------

def test_hourly_load_averages_busy_gpus_per_hour_of_week_in_the_site_zone():
    start = datetime(2026, 11, 2, 0, 0, tzinfo=SHANGHAI)  # a Monday, local midnight
    uses = busy_except(1, range(2, 6), start, weeks=4)  # quiet Tuesdays 02:00-06:00 local
    matrix = offpeak.hourly_load(uses, start, start + timedelta(weeks=4), SHANGHAI)
    assert [matrix[1][h] for h in range(2, 6)] == [0.0] * 4
    assert matrix[1][1] == matrix[1][6] == matrix[0][2] == matrix[6][23] == 2.0
    # the same history seen from UTC: the quiet hours are Monday 18:00-22:00 there
    utc = offpeak.hourly_load(uses, start, start + timedelta(weeks=4), dt_timezone.utc)
    assert [utc[0][h] for h in range(18, 22)] == [0.0] * 4 and utc[1][2] == 2.0


def test_hourly_load_cuts_uses_to_the_period_and_averages_over_the_weeks():
    start = datetime(2026, 11, 2, 0, 0, tzinfo=SHANGHAI)
    uses = [Use(start + timedelta(hours=10, minutes=30), start + timedelta(hours=11), 1),  # half an hour, week 1
            Use(start - timedelta(days=3), start + timedelta(minutes=30), 4),  # began before the period
            Use(start + timedelta(weeks=2) - timedelta(hours=1), None, 2)]  # still running at the end
    matrix = offpeak.hourly_load(uses, start, start + timedelta(weeks=2), SHANGHAI)
    assert matrix[0][10] == 0.25  # 0.5 GPU-hours over two Monday 10:00s
    assert matrix[0][0] == 1.0  # 4 GPUs for half of one of two Monday midnights
    assert matrix[0][11] == 0.0
    assert matrix[6][23] == 1.0  # 2 GPUs in the last hour, one of two Sunday 23:00s


# ---- suggestions ----------------------------------------------------------------------------------

def test_off_peak_suggestion_over_seeded_history_picks_the_quiet_window(h200):
    now = datetime(2026, 11, 29, 12, 0, tzinfo=SHANGHAI)  # a Sunday noon
    history = busy_except(1, range(2, 6), now - timedelta(weeks=4), weeks=4)
    share = offpeak.load_share(offpeak.hourly_load(history, now - timedelta(weeks=4), now, SHANGHAI), 2)
    windows = offpeak.suggest([h200], 1, 120, now, shares={h200.cluster_id: share})
    first = windows[0]
    assert first.start.astimezone(SHANGHAI) == datetime(2026, 12, 1, 2, 0, tzinfo=SHANGHAI)  # Tuesday 02:00
    assert first.end - first.start == timedelta(hours=2) and first.expected_load == 0.0
    assert first.gpu_type == h200
    assert windows[1].start.astimezone(SHANGHAI) == datetime(2026, 12, 1, 4, 0, tzinfo=SHANGHAI)  # no overlap
    assert all(w.expected_load <= windows[-1].expected_load for w in windows)


def test_a_quiet_window_already_booked_is_not_suggested(h200, owner):
    now = datetime(2026, 11, 29, 12, 0, tzinfo=SHANGHAI)
    history = busy_except(1, range(2, 6), now - timedelta(weeks=4), weeks=4)
    share = offpeak.load_share(offpeak.hourly_load(history, now - timedelta(weeks=4), now, SHANGHAI), 2)
    tuesday = datetime(2026, 12, 1, 2, 0, tzinfo=SHANGHAI)
    Booking.objects.create(user=owner, task_name="night run", gpu_count=2, duration_minutes=120, gpu_type=h200,
                           cluster=h200.cluster, starts_at=tuesday, ends_at=tuesday + timedelta(hours=2),
                           state=BookingState.CONFIRMED)
    windows = offpeak.suggest([h200], 1, 120, now, shares={h200.cluster_id: share})
    assert windows[0].start == tuesday + timedelta(hours=2)  # the rest of the quiet hours
    assert all(not (w.start < tuesday + timedelta(hours=2) and tuesday < w.end) for w in windows)


def test_without_history_the_earliest_free_windows_are_suggested(h200):
    now = datetime(2026, 11, 29, 12, 10, tzinfo=SHANGHAI)
    windows = offpeak.suggest([h200], 1, 60, now, shares={h200.cluster_id: None})
    assert windows[0].start.astimezone(SHANGHAI) == datetime(2026, 11, 29, 12, 30, tzinfo=SHANGHAI)  # unit-aligned
    assert [w.start for w in windows] == sorted(w.start for w in windows)
    assert offpeak.suggest([h200], 3, 60, now, shares={h200.cluster_id: None}) == []  # only 2 GPUs exist


def test_load_by_hour_asks_the_cluster_once_and_caches(profile, fake_ssh):
    now = timezone.now().replace(microsecond=0)
    begun = (now - timedelta(days=2)).astimezone(dt_timezone.utc).replace(minute=0, second=0)
    line = f"{begun:%Y-%m-%dT%H:%M:%S}|{begun + timedelta(hours=1):%Y-%m-%dT%H:%M:%S}|cpu=1,gres/gpu=2,node=1\n"
    runner = fake_ssh(on_run=line)  # the cluster's side of load_by_hour: the sacct history
    first = offpeak.load_by_hour(profile, now=now)
    again = offpeak.load_by_hour(profile, now=now)
    assert len(runner.commands) == 1 and first == again
    assert runner.commands[0] == cluster.gpu_history_argv(now - timedelta(weeks=4), now)
    local = begun.astimezone(SHANGHAI)
    assert first[local.weekday()][local.hour] == pytest.approx(2 / 4)  # one of four such hours, 2 GPUs


# ---- pages ---------------------------------------------------------------------------------------

def booking(user, gpu_type, name="Episode 5", state=BookingState.CONFIRMED, start=None, hours=2, gpus=1) -> Booking:
    start = start or timezone.now() + timedelta(hours=1)
    return Booking.objects.create(user=user, task_name=name, gpu_count=gpus, duration_minutes=hours * 60,
                                  gpu_type=gpu_type, cluster=gpu_type.cluster, starts_at=start,
                                  ends_at=start + timedelta(hours=hours), state=state,
                                  reservation_name=f"ffp-{name[:4].lower()}")


@pytest.fixture
def no_history(fake_ssh):
    """The pages' heat maps: a cluster that answers with an empty history."""
    return fake_ssh(on_run="")


def test_the_pages_need_a_login(client, h200, owner):
    b = booking(owner, h200)
    for url in (reverse("booking-list"), reverse("booking-new"), reverse("booking-calendar"),
                reverse("booking-detail", args=[b.id])):
        r = client.get(url)
        assert r.status_code == 302 and "/login/" in r["Location"], url


def test_my_bookings_lists_mine_with_their_state_and_reservation(client, owner, stranger, h200):
    booking(owner, h200, "Episode 5")
    booking(owner, h200, "Old trailer", state=BookingState.REFUSED)
    booking(stranger, h200, "Secret film")
    client.force_login(owner)
    body = client.get(reverse("booking-list")).content.decode()
    assert "Episode 5" in body and "Old trailer" in body and "Secret film" not in body
    assert "ffp-epis" in body and "Confirmed" in body and "Refused" in body
    assert body.count('action="/bookings/') == 1  # Cancel only where there is something to cancel


def test_someone_elses_booking_answers_404_and_cannot_be_cancelled(client, owner, stranger, staff, h200):
    b = booking(owner, h200)
    client.force_login(stranger)
    assert client.get(reverse("booking-detail", args=[b.id])).status_code == 404
    assert client.post(reverse("booking-cancel", args=[b.id])).status_code == 404
    b.refresh_from_db()
    assert b.state == BookingState.CONFIRMED
    client.force_login(staff)  # a superuser: the flags grant nothing outside the admin (jobs.access)
    assert client.get(reverse("booking-detail", args=[b.id])).status_code == 404
    assert client.post(reverse("booking-cancel", args=[b.id])).status_code == 404


def test_the_owner_sees_the_booking_in_plain_words_and_can_cancel_it(client, owner, h200):
    b = booking(owner, h200)
    client.force_login(owner)
    body = client.get(reverse("booking-detail", args=[b.id])).content.decode()
    assert "the GPUs are held for you" in body and "H200 141 GB" in body and "ffp-epis" in body
    r = client.post(reverse("booking-cancel", args=[b.id]), follow=True)
    b.refresh_from_db()
    assert b.state == BookingState.CANCELLED
    assert "Booking cancelled" in r.content.decode()


def field_errors(body: str, field: str) -> str:
    """The text of the problems shown right under `field`'s input."""
    m = re.search(rf'id="id_{field}-errors">(.*?)</ul>', body, re.S)
    return re.sub(r"<[^>]+>", " ", m.group(1)) if m else ""


def test_form_problems_are_shown_next_to_their_fields(client, owner, h200, no_history):
    client.force_login(owner)
    r = client.post(reverse("booking-new"), {"task_name": "", "gpu_count": "0", "duration_hours": "1",
                                             "min_memory_gb": "0", "priority": "0", "start": "at"})
    body = r.content.decode()
    assert r.status_code == 200 and not Booking.objects.exists()
    assert "required" in field_errors(body, "task_name")
    assert "greater than or equal to 1" in field_errors(body, "gpu_count")
    assert "Say when it should start" in field_errors(body, "start_at")


def test_the_booking_rules_problems_are_shown_next_to_their_fields(client, owner, h200, no_history):
    BookingPolicy.objects.create(max_hours=4)
    client.force_login(owner)
    r = client.post(reverse("booking-new"), {"task_name": "Too long", "gpu_count": "1", "duration_hours": "9",
                                             "min_memory_gb": "0", "priority": "0", "start": "asap"})
    assert "between" in field_errors(r.content.decode(), "duration_hours")
    r = client.post(reverse("booking-new"), {"task_name": "Too big", "gpu_count": "1", "duration_hours": "1",
                                             "min_memory_gb": "500", "priority": "0", "start": "asap"})
    assert r.status_code == 200 and not Booking.objects.exists()
    assert "Nothing was booked" in r.content.decode()


@pytest.mark.parametrize("start_at", ["9999-12-31T23:59", "0001-01-01T00:00"])
def test_a_start_at_the_ends_of_the_calendar_or_huge_numbers_are_form_problems(client, owner, h200, no_history,
                                                                               settings, start_at):
    """Not a server error (a start near year 9999 was rounded past it), in a zone east of UTC too."""
    settings.TIME_ZONE = "Asia/Shanghai"
    client.force_login(owner)
    assert client.get(reverse("booking-new") + f"?start={start_at}").status_code == 200
    r = client.post(reverse("booking-new"), {"task_name": "Far", "gpu_count": "1", "duration_hours": "1",
                                             "min_memory_gb": "0", "priority": "0", "start": "at",
                                             "start_at": start_at})
    assert r.status_code == 200 and not Booking.objects.exists()
    assert re.search(r"at most 30 days ahead|has passed", field_errors(r.content.decode(), "start_at"))
    huge = "9" * 30
    r = client.post(reverse("booking-new"), {"task_name": "Huge", "gpu_count": huge, "duration_hours": "9999.99",
                                             "min_memory_gb": huge, "priority": huge, "start": "asap"})
    body = r.content.decode()
    assert r.status_code == 200 and not Booking.objects.exists()
    assert "1 to 64" in field_errors(body, "gpu_count") and "between" in field_errors(body, "duration_hours")


def test_booking_from_the_page_places_it_and_shows_it(client, owner, h200, no_history):
    client.force_login(owner)
    start = (timezone.localtime() + timedelta(days=1)).replace(hour=3, minute=0, second=0, microsecond=0)
    r = client.post(reverse("booking-new"), {"task_name": "Episode 5", "image_resolution": "1920x1080",
                                             "gpu_count": "1", "duration_hours": "2", "min_memory_gb": "24",
                                             "compute_capability": "8.0", "priority": "10", "start": "at",
                                             "start_at": start.strftime("%Y-%m-%dT%H:%M"),
                                             "callback_url": "https://example.org/hook"})
    b = Booking.objects.get(user=owner)
    assert r.status_code == 302 and r["Location"] == reverse("booking-detail", args=[b.id])
    assert b.gpu_type == h200 and b.starts_at == start and b.ends_at == start + timedelta(hours=2)
    assert b.priority == 10 and b.callback_url == "https://example.org/hook" and b.image_resolution == "1920x1080"
    assert b.state in (BookingState.REQUESTED, BookingState.CONFIRMED)


def test_the_new_booking_page_shows_the_heat_map_and_quiet_windows(client, owner, h200, monkeypatch):
    now = timezone.now()
    history = busy_except(1, range(2, 6), now - timedelta(weeks=4), weeks=4)

    def seeded(profile, weeks=4, now=None):
        now = now or timezone.now()
        return offpeak.hourly_load(history, now - timedelta(weeks=weeks), now, SHANGHAI)

    monkeypatch.setattr(offpeak, "load_by_hour", seeded)
    client.force_login(owner)
    body = client.get(reverse("booking-new")).content.decode()
    cells = re.findall(r'class="hm-cell hm-(\d)" href="\?start=([\dT:-]+)#when" data-start="[^"]+" data-day="(\d)" '
                       r'data-hour="(\d+)"', body)
    assert len(cells) == 7 * 24
    steps = {(int(d), int(h)): int(s) for s, _start, d, h in cells}
    assert steps[(1, 3)] == 0 and steps[(1, 7)] == 4  # quiet Tuesday night, busy morning
    tuesday_3 = next(start for _s, start, d, h in cells if (d, h) == ("1", "3"))
    assert datetime.strptime(tuesday_3, "%Y-%m-%dT%H:%M").weekday() == 1
    suggested = re.findall(r'data-start="([\dT:-]+)" class="suggestion"', body)
    assert suggested and datetime.strptime(suggested[0], "%Y-%m-%dT%H:%M").weekday() == 1
    assert datetime.strptime(suggested[0], "%Y-%m-%dT%H:%M").hour in (2, 3, 4)
    # following a cell's link (no JavaScript) fills the start
    page = client.get(reverse("booking-new"), {"start": tuesday_3}).content.decode()
    assert f'value="{tuesday_3}"' in page and re.search(r'value="at"[^>]*checked', page)


def test_the_calendar_names_my_bookings_and_hides_others(client, owner, stranger, h200, no_history):
    # tomorrow 10:00 on the site's clock: "now + 1 day" crossed midnight (two bars each) when the
    # tests ran between 22:00 and 24:00 in Shanghai, as a CI run did
    tomorrow = (timezone.localtime() + timedelta(days=1)).replace(hour=10, minute=0, second=0, microsecond=0)
    mine = booking(owner, h200, "Episode 5", start=tomorrow)
    booking(stranger, h200, "Secret film", start=tomorrow, gpus=1)
    client.force_login(owner)
    body = client.get(reverse("booking-calendar")).content.decode()
    assert "Secret film" not in body and "Episode 5" in body
    assert f'href="{reverse("booking-detail", args=[mine.id])}"' in body
    assert body.count('class="cal-bar other') == 1 and body.count('class="cal-bar mine') == 1
    free = [int(n) for n in re.findall(r'data-free="(\d+)"', body)]
    assert len(free) == 7 and free[0] == 2 and 0 in free[1:3]  # both GPUs held tomorrow (one each)


def test_the_calendar_places_bookings_on_a_day_of_25_hours(client, owner, h200, no_history, settings, monkeypatch):
    # Berlin's clocks go back at 03:00 on 25 October 2026: that day has 25 hours, and its 22:00 comes
    # 23 of them after midnight (92 % of the day, not 23 of 24 hours, which put the bar at 96 %)
    settings.TIME_ZONE = "Europe/Berlin"
    berlin = ZoneInfo("Europe/Berlin")
    monkeypatch.setattr(timezone, "now", lambda: datetime(2026, 10, 25, 1, 0, tzinfo=berlin))
    booking(owner, h200, "Night run", start=datetime(2026, 10, 25, 22, 0, tzinfo=berlin), hours=1)
    client.force_login(owner)
    body = client.get(reverse("booking-calendar")).content.decode()
    assert 'style="left: 92.0%; width: 4.0%"' in body
