"""Booking GPUs in a real browser, on the real local cluster (its GPUs counted with sinfo, its
history read with sacct over SSH): pick the start from the heat map, book, find the booking in the
list and in the calendar. Screenshots of the booking pages in English and Chinese, desktop and phone
(<screenshots>/page-booking*-<device>-<lang>.png, tests/e2e/shots.py), each checked as the other pages
are (answers 200, in the language asked, no sideways scrolling on a phone).
"""
from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client

from jobs.bookings import offpeak, refresh_inventory
from jobs.models import Booking, BookingState, GpuType
from tests.e2e.shots import SHOTS
from tests.e2e.test_browser_live import CHROMIUM, CHROMIUM_ARGS, _sync_playwright, web_server  # noqa: F401 - fixture
from tests.e2e.test_screenshots import DEVICES, LANGUAGES, shoot


def test_book_from_the_page_with_a_heat_map_start_and_see_it_in_the_list_and_calendar(local, web_server, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    gpu_type = GpuType.objects.create(cluster=local, gres_type="h200", label="H200", memory_gb=141,
                                      compute_capability="9.0")
    refresh_inventory(local)
    gpu_type.refresh_from_db()
    assert gpu_type.inventory >= 1, "the local cluster's GPUs were not counted"
    session = Client()
    session.force_login(User.objects.get(username="demo"))
    cookie = session.cookies[settings.SESSION_COOKIE_NAME].value

    with _sync_playwright()() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(base_url=web_server.url, viewport=DEVICES["desktop"], locale="en-US")
            context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": web_server.url}])
            page = context.new_page()
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto("/bookings/new")
            assert page.locator("a.hm-cell").count() == 7 * 24
            assert page.locator("#start-at-box").is_hidden()  # "as soon as possible" is the default
            # Wednesday 03:00 by keyboard: Tab into the grid, then the arrow keys
            page.locator("a.hm-cell").first.focus()
            for key in ["ArrowDown", "ArrowDown"] + ["ArrowRight"] * 3:
                page.keyboard.press(key)
            cell = page.locator("a.hm-cell[data-day='2'][data-hour='3']")
            assert cell.evaluate("e => e === document.activeElement")
            page.keyboard.press("Enter")
            wanted = cell.get_attribute("data-start")
            assert page.url.endswith("/bookings/new")  # filled in place: no page load
            assert page.input_value("#id_start_at") == wanted
            assert page.is_checked("input[name=start][value=at]") and page.locator("#start-at-box").is_visible()
            assert wanted.replace("T", " ") in page.text_content("#picked")
            # a click picks another hour (Friday 22:00)
            other = page.locator("a.hm-cell[data-day='4'][data-hour='22']")
            other.click()
            wanted = other.get_attribute("data-start")
            assert page.input_value("#id_start_at") == wanted
            assert "is-picked" in other.get_attribute("class") and "is-picked" not in cell.get_attribute("class")
            page.fill("#id_task_name", "Episode 5 retouch")
            page.fill("#id_duration_hours", "1")
            page.click("#book-button")
            page.wait_for_url("**/bookings/*-*")
            assert "Episode 5 retouch" in page.text_content("h1")
            booking = Booking.objects.get(task_name="Episode 5 retouch")
            assert booking.state in (BookingState.REQUESTED, BookingState.CONFIRMED), booking.reason
            start = datetime.strptime(wanted, "%Y-%m-%dT%H:%M")
            assert start.strftime("%Y-%m-%d %H:%M") in page.text_content(".facts")  # the start picked, site time
            page.goto("/bookings/")
            row = page.locator(f"tr[data-booking-id='{booking.id}']")
            assert "Episode 5 retouch" in row.text_content() and start.strftime("%Y-%m-%d %H:%M") in row.text_content()
            page.goto("/bookings/calendar")
            bar = page.locator("a.cal-bar.mine")
            assert bar.count() == 1 and "Episode 5 retouch" in bar.text_content()
            bar.click()
            page.wait_for_url(f"**/bookings/{booking.id}")
            assert not errors, errors
            context.close()
            screenshots(browser, web_server, cookie, booking, local)
        finally:
            browser.close()


def office_week(gpus: int) -> list[list[float]]:
    """Busy GPUs of a studio's usual week: full in working hours, half in the evening, quiet at night
    and on Sunday."""
    def busy(day: int, hour: int) -> float:
        if day == 6 or hour < 7:
            return 0.1 * gpus
        if day == 5 or hour >= 20:
            return 0.5 * gpus
        return 0.9 * gpus if 9 <= hour < 18 else 0.7 * gpus
    return [[busy(d, h) for h in range(24)] for d in range(7)]


def screenshots(browser, server, cookie: str, booking: Booking, profile) -> None:
    """The booking pages in both languages on a desktop and a phone (the docs show them). The heat
    map shows a studio's week: the local cluster's own history is a few minutes of test jobs, so its
    hour-of-week load is put where the server reads it (the cache of offpeak.load_by_hour)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    key = offpeak._cache_key(profile, offpeak.DEFAULT_WEEKS)
    cache.set(key, office_week(GpuType.objects.get(cluster=profile).inventory), 600)
    try:
        _shoot_all(browser, server, cookie, booking)
    finally:
        cache.delete(key)


def _shoot_all(browser, server, cookie: str, booking: Booking) -> None:
    pages = {"booking-new": "/bookings/new", "bookings": "/bookings/", "booking-calendar": "/bookings/calendar",
             "booking": f"/bookings/{booking.id}"}
    taken, problems = [], []
    for lang, (locale, html_lang) in LANGUAGES.items():
        for device, viewport in DEVICES.items():
            context = browser.new_context(base_url=server.url, locale=locale, viewport=viewport)
            context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": server.url}])
            page = context.new_page()
            for name, url in pages.items():
                shoot(page, url, f"{name}-{device}-{lang}", html_lang, device, taken, problems)
            context.close()
    assert not problems, problems
    assert len(taken) == 2 * 2 * len(pages)
