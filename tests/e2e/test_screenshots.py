"""Every page a user meets, in English and in Chinese, on a desktop and on a phone, after a real job
ran on the local cluster: the pictures the docs show (`make screenshots` writes them to
docs/screenshots/, a test run to artifacts/screenshots/: tests/e2e/shots.py), named
`page-<page>-<desktop|phone>-<en|zh>.png`. Each page must answer 200, be in the language asked
for, and fit a phone's width (no sideways scrolling).
"""
from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from jobs.models import Job, JobStatus
from tests.e2e.conftest import SAMPLES, fill
from tests.e2e.shots import SHOTS
from tests.e2e.test_browser_live import CHROMIUM, CHROMIUM_ARGS, WatcherThread, _sync_playwright, web_server  # noqa: F401 - web_server is a fixture

DEVICES = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}
LANGUAGES = {"en": ("en-US", "en"), "zh": ("zh-CN", "zh-hans")}


def test_every_page_in_both_languages_on_desktop_and_phone(api, local, folder, redis_queue, web_server, monkeypatch):
    sync_playwright = _sync_playwright()
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    SHOTS.mkdir(parents=True, exist_ok=True)
    fill(folder, {"beach.jpg": SAMPLES / "t1.jpg", "portrait.png": SAMPLES / "astronaut.png"})
    with open(SAMPLES / "Tom_Hanks_54745.png", "rb") as face:
        r = api.post("/api/v1/jobs", {"template": "gpu-batch", "source": face, "target_folder": str(folder),
                                      "consent": "true", "name": "Beach shoot"})
    job = Job.objects.get(pk=r.json()["id"])
    watcher = WatcherThread(job.id, redis_queue)
    watcher.start()
    watcher.join(timeout=150)
    assert not watcher.error, watcher.error
    job.refresh_from_db()
    assert job.status == JobStatus.COMPLETED, job.error

    session = Client()
    session.force_login(User.objects.get(username="demo"))
    cookie = session.cookies[settings.SESSION_COOKIE_NAME].value
    pages = {"jobs": "/", "new-job": "/jobs/new", "job": f"/jobs/{job.id}", "result": f"/jobs/{job.id}/targets/0",
             "usage": "/usage", "account": "/account", "folders": f"/folders?path={folder}"}
    taken, problems = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for lang, (locale, html_lang) in LANGUAGES.items():
                for device, viewport in DEVICES.items():
                    # logged out: the login page
                    context = browser.new_context(base_url=web_server.url, locale=locale, viewport=viewport)
                    page = context.new_page()
                    shoot(page, "/login/", f"login-{device}-{lang}", html_lang, device, taken, problems)
                    context.close()
                    context = browser.new_context(base_url=web_server.url, locale=locale, viewport=viewport)
                    context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": web_server.url}])
                    page = context.new_page()
                    for name, url in pages.items():
                        shoot(page, url, f"{name}-{device}-{lang}", html_lang, device, taken, problems)
                    context.close()
        finally:
            browser.close()
    assert not problems, problems
    assert len(taken) == 2 * 2 * (len(pages) + 1)


def shoot(page, url: str, name: str, html_lang: str, device: str, taken: list, problems: list) -> None:
    response = page.goto(url)
    page.wait_for_load_state("networkidle")
    if response is None or response.status != 200:
        problems.append(f"{name}: {url} answered {response and response.status}")
    if page.get_attribute("html", "lang") != html_lang:
        problems.append(f"{name}: the page is not in {html_lang}")
    if device == "phone":
        wide = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        if wide > 1:
            problems.append(f"{name}: {wide} px wider than the phone")
    page.screenshot(path=str(SHOTS / f"page-{name}.png"), full_page=True)
    taken.append(name)
