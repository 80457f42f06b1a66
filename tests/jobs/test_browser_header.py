"""The phone header in a real browser (headless Chromium, the portal's web server, no cluster): at
390 x 844 the brand, the pages, the language switch and the user fit in two rows, in English and in
Chinese, for an admin (the most links). Screenshots: <screenshots>/header-phone-<lang>.png.
"""
from __future__ import annotations

import pytest

from tests.e2e.shots import SHOTS
from tests.e2e.test_browser_live import running_server
from tests.jobs.browser_helpers import signed_in_page

pytestmark = pytest.mark.slow

#: the rows the header's pieces sit on: their tops, any two within this many pixels are one row
ROW_PX = 12


@pytest.fixture
def web_server(transactional_db, tmp_path):
    with running_server(tmp_path) as server:
        yield server


def header_rows(page) -> list[int]:
    """The distinct rows (their tops) of the brand, each page link, each language button and the user's links."""
    tops = page.evaluate("""Array.from(document.querySelectorAll(
        '.topbar .brand, .topbar .mainnav a, .topbar .langs button, .topbar .who, .topbar .logout button'))
      .filter((e) => e.offsetParent !== null).map((e) => Math.round(e.getBoundingClientRect().top))""")
    rows: list[int] = []
    for top in sorted(tops):
        if not rows or top - rows[-1] > ROW_PX:
            rows.append(top)
    return rows


@pytest.mark.parametrize("lang", ["en", "zh-hans"])
def test_it_keeps_the_phone_header_to_two_rows(web_server, owner, monkeypatch, lang):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    owner.is_staff = True  # the Admin link too: the longest header a user sees
    owner.save()
    SHOTS.mkdir(parents=True, exist_ok=True)
    with signed_in_page(web_server.url, owner, lang, viewport={"width": 390, "height": 844}) as (page, errors):
        page.goto("/")
        assert page.locator("html").get_attribute("lang") == lang
        page.screenshot(path=str(SHOTS / f"header-phone-{lang}.png"), clip={"x": 0, "y": 0, "width": 390, "height": 160})
        assert len(header_rows(page)) <= 2, header_rows(page)
        # nothing pushed sideways off a phone's screen
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        # the short switch still names each language in full for a screen reader
        names = page.locator(".langs button").evaluate_all("(bs) => bs.map((b) => b.getAttribute('aria-label'))")
        assert names == ["English", "简体中文"]
        assert page.locator(".langs button .lang-short").all_inner_texts() == ["EN", "中文"]
        assert not errors, errors
