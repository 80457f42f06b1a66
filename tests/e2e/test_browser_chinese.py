"""A media-team member whose browser asks for Chinese walks the whole way, on the real portal and the
real cluster: New job (files sent, face found, folder checked) -> Start -> the job page while it runs
and when it is done -> a result's before/after page -> the job list. On every page the words a
person reads are Chinese: the test collects the visible text (closed "Technical details" are not
visible) and fails on any English word that is not a name (the user's, the template's, file names,
the product's) or a unit and format people read as they are (GPU, MB, JPEG ...).

Screenshots: <screenshots>/zh-*.png (Chromium here has no CJK fonts: the pictures show boxes; the test
reads the text itself).
"""
from __future__ import annotations

import re

from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from jobs.models import Job, JobStatus, Template
from tests.e2e.conftest import SAMPLES, fill
from tests.e2e.shots import SHOTS
from tests.e2e.test_browser_live import (  # noqa: F401 - web_server is a fixture
    CHROMIUM,
    CHROMIUM_ARGS,
    Tab,
    WatcherThread,
    _sync_playwright,
    wait_for,
    web_server,
)
from tests.e2e.test_browser_uploads import drop_files, item, wait_until

#: words people read as they are in a Chinese page: units, formats, the product, the other language's name
KEPT_AS_THEY_ARE = {"GPU", "GPUs", "CPU", "B", "kB", "MB", "GB", "TB", "JPEG", "PNG", "WebP", "MP4", "MOV", "MKV",
                    "WebM", "zip", "CSV", "FaceFusion", "Portal", "English", "EN", "s", "h", "min", "x", "NVIDIA", "H200", "ID"}
#: GPU model names (H200, A100, L40): names, not words, in any language
GPU_MODEL = re.compile(r"[A-Z]{1,2}\d{2,4}")


def english_words(text: str, names: list[str]) -> list[str]:
    for name in sorted(names, key=len, reverse=True):
        text = text.replace(name, " ")
    return [text[max(0, m.start() - 30):m.end() + 30] for m in re.finditer(r"[A-Za-z][A-Za-z0-9'’-]*", text)
            if m.group() not in KEPT_AS_THEY_ARE and not GPU_MODEL.fullmatch(m.group())]


def visible_text(page) -> str:
    return page.evaluate("() => document.body.innerText")


def test_a_chinese_reader_meets_no_english_from_new_job_to_results(local, folder, redis_queue, web_server, monkeypatch):
    sync_playwright = _sync_playwright()
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    SHOTS.mkdir(parents=True, exist_ok=True)
    fill(folder, {"beach.jpg": SAMPLES / "t1.jpg", "portrait.png": SAMPLES / "astronaut.png"})
    demo = User.objects.get(username="demo")
    session = Client()
    session.force_login(demo)
    cookie = session.cookies[settings.SESSION_COOKIE_NAME].value
    # names: the user's, the files', the admin's template and team names (docs/teams.md)
    names = [demo.email, "demo", "beach.jpg", "portrait.png", "Tom_Hanks_54745.png", str(folder),
             *demo.groups.values_list("name", flat=True),
             *Template.objects.values_list("name", flat=True), *Template.objects.values_list("description", flat=True)]
    seen: dict[str, list[str]] = {}

    def check(page, what: str) -> None:
        page.screenshot(path=str(SHOTS / f"zh-{what}.png"), full_page=True)
        words = english_words(visible_text(page), names)
        if words:
            seen[what] = words

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        watcher = None
        try:
            # The browser asks for Chinese; the user never chose a language: the portal follows the browser.
            context = browser.new_context(base_url=web_server.url, locale="zh-CN", viewport={"width": 1280, "height": 1000})
            context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": web_server.url}])
            tab = Tab(context)
            page = tab.page
            page.goto("/jobs/new")
            assert page.get_attribute("html", "lang") == "zh-hans"
            drop_files(page, "#zone-source", [SAMPLES / "Tom_Hanks_54745.png"])
            wait_until(lambda: "已找到人脸" in item(page, "#zone-source", "Tom_Hanks_54745.png").inner_text(), 30,
                       "the face is found, said in Chinese")
            page.fill("#id_target_folder", str(folder))
            wait_until(lambda: "找到" in page.locator("#folder-check").inner_text(), 30, "the folder is checked")
            page.check("#id_consent")
            check(page, "new-job")

            page.click("#start-button")
            page.wait_for_url("**/jobs/*")
            job = Job.objects.get()
            names.append(str(job.id)[:8])  # an untitled job is called by the start of its id
            watcher = WatcherThread(job.id, redis_queue)
            watcher.start()
            page.wait_for_selector("#live-indicator[data-mode=live]", timeout=15_000)
            check(page, "job-running")
            wait_for(page, f"document.getElementById('job-live').dataset.status === '{JobStatus.COMPLETED}' || "
                           "document.querySelectorAll('#target-grid img').length === 2", 120_000)
            watcher.join(timeout=120)
            page.reload()
            check(page, "job-done")

            page.goto(f"/jobs/{job.id}/targets/0")
            page.wait_for_selector("img")
            check(page, "result")
            page.goto("/")
            check(page, "job-list")
            page.goto("/usage")
            check(page, "usage")
            page.goto("/account")
            check(page, "account")
            assert not [p for p in tab.problems if "favicon" not in p]
        finally:
            if watcher is not None:
                watcher.halt.set()
                watcher.join(timeout=30)
            browser.close()
    assert not watcher.error, watcher.error
    job.refresh_from_db()
    assert job.status == JobStatus.COMPLETED, job.error
    assert seen == {}, f"English words on Chinese pages: {seen}"
