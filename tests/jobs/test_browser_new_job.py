"""New job in a real browser: the portal's web server (portal/server.py) in its own process against
this test's database file, headless Chromium, files sent over tus as a user sends them. No cluster is
needed: the folder check's answer is played by the test (the server's refusal of a folder over the
limit is tested in tests/jobs/test_quotas_start.py).

- keyboard only: Tab reaches "Choose photos" and "Choose a folder", and the button shows the focus
  ring its hidden input holds;
- switching the language keeps the typed name and folder and the face photo attached, both ways;
- a quota of 2 photos and videos per job: a folder counted with 11 (the cluster's answer played by
  the test) and a third file are refused next to their fields at once, in English and in Chinese,
  and Start waits; one file removed, Start is possible again;
- a file the page refuses (not a photo) is said to be left out, next to its area and under Start;
- "All files sent (…)" counts every file of the batch.
Screenshots: <screenshots>/new-job-*.png (tests/e2e/shots.py).
"""
from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client

from jobs.models import Quota
from tests.e2e.shots import SHOTS
from tests.e2e.test_browser_live import CHROMIUM, CHROMIUM_ARGS, _sync_playwright, running_server, wait_for

pytestmark = pytest.mark.slow

FOLDER = "/srv/ffportal/storage/beach day"
OVER_EN = ("This job has 3 images and videos; your limit is 2 per job (your own quota). "
           "Split them into several jobs or ask an admin.")
OVER_ZH = "这个任务包含 3 个照片/视频，而您的上限是每个任务 2 个（您的个人配额）。请拆分成多个任务，或联系管理员。"


@pytest.fixture
def web_server(transactional_db, tmp_path):
    with running_server(tmp_path) as server:
        yield server


def shown_size(n: int) -> str:
    """Bytes as static/js/uploads/words.js writes them ("1.2 MB")."""
    value, unit = float(n), 0
    units = ["B", "kB", "MB", "GB", "TB"]
    while value >= 1000 and unit < len(units) - 1:
        value, unit = value / 1000, unit + 1
    return f"{round(value) if unit == 0 or value >= 100 else f'{value:.1f}'} {units[unit]}"


def ring(page, selector: str) -> str:
    """The outline the element shows: "solid 3px" when the focus ring is drawn."""
    return page.evaluate("""(sel) => { const s = getComputedStyle(document.querySelector(sel));
        return s.outlineStyle === 'none' ? 'none' : s.outlineStyle + ' ' + s.outlineWidth; }""", selector)


def tab_to(page, test: str, most: int = 80) -> None:
    """Press Tab until `test` (JavaScript, on document.activeElement as `el`) holds."""
    for _ in range(most):
        page.keyboard.press("Tab")
        if page.evaluate(f"(() => {{ const el = document.activeElement; return Boolean({test}); }})()"):
            return
    raise AssertionError(f"Tab never reached {test}")


def ready(page, zone: str, n: int) -> None:
    wait_for(page, f"document.querySelectorAll('{zone} .upload-item.upload-ready').length === {n}", 30_000)


def switch_language(page, code: str) -> None:
    page.locator(f"form.langs button[value='{code}']").click()
    page.wait_for_load_state("load")
    wait_for(page, f"document.documentElement.lang === '{code}'", 10_000)
    wait_for(page, "!document.querySelector('#zone-source .choose').hidden", 10_000)  # uploads/main.js ran


def test_the_form_refuses_early_keeps_what_was_typed_and_shows_focus(web_server, owner, template, jpeg_bytes,
                                                                      tmp_path, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    Quota.objects.create(user=owner, max_targets_per_job=2)
    face = tmp_path / "anna.jpg"
    face.write_bytes(jpeg_bytes)
    targets = []
    for i, padding in enumerate((0, 150_000, 300_000)):  # still JPEGs, of three sizes
        path = tmp_path / f"shot-{i + 1}.jpg"
        path.write_bytes(jpeg_bytes + b"\0" * padding)
        targets.append(path)
    notes = tmp_path / "notes.txt"
    notes.write_text("not a photo\n")
    sync_playwright = _sync_playwright()
    session = Client()
    session.force_login(owner)
    cookie = session.cookies[settings.SESSION_COOKIE_NAME].value
    SHOTS.mkdir(parents=True, exist_ok=True)

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(base_url=web_server.url, viewport={"width": 1280, "height": 1000})
            context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": web_server.url},
                                 {"name": settings.LANGUAGE_COOKIE_NAME, "value": "en", "url": web_server.url}])
            # the folder check's answer (jobs/web/views/folders.py), as the cluster would count the folder
            context.route("**/folders/check?*", lambda route: route.fulfill(json={
                "ok": True, "reachable": True, "images": 10, "videos": 1, "path": FOLDER,
                "summary": "10 photos and 1 video found."}))
            page = context.new_page()
            errors = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 500 else None)
            page.goto("/jobs/new")
            wait_for(page, "!document.querySelector('#zone-source .choose').hidden", 10_000)

            # ---- keyboard only: the focus shows on the buttons that stand for hidden inputs ----
            choose = "#zone-source label.choose"
            folder_button = "#zone-target label:has([data-folder-input])"
            assert ring(page, choose) == "none" and ring(page, folder_button) == "none"
            page.locator("body").focus()
            tab_to(page, "el.id === 'id_source'")
            assert ring(page, choose) == "solid 3px"
            page.locator("#zone-source").screenshot(path=str(SHOTS / "new-job-focus-choose-photos.png"))
            tab_to(page, "el.matches('[data-folder-input]')")
            assert ring(page, folder_button) == "solid 3px" and ring(page, choose) == "none"
            page.locator("#zone-target").screenshot(path=str(SHOTS / "new-job-focus-choose-folder.png"))

            # ---- a face, a name, a folder: kept over a switch of language, both ways ----
            page.set_input_files("#id_source", str(face))
            ready(page, "#zone-source", 1)
            face_id = page.locator("#zone-source input[name=source_uploads]").get_attribute("value")
            page.fill("#id_name", "Beach day")
            page.fill("#id_target_folder", FOLDER)
            wait_for(page, "document.getElementById('folder-check').classList.contains('bad')", 10_000)
            assert page.locator("#folder-check").inner_text() == (
                "10 photos and 1 video found. The folder has 11 images and videos; your limit is 2 per job "
                "(your own quota). Split the folder or ask an admin.")
            assert page.locator("#start-button").is_disabled() and page.locator("#start-over").is_visible()
            page.screenshot(path=str(SHOTS / "new-job-folder-over-limit-en.png"), full_page=True)
            switch_language(page, "zh-hans")
            ready(page, "#zone-source", 1)
            assert page.input_value("#id_name") == "Beach day" and page.input_value("#id_target_folder") == FOLDER
            assert page.locator("#zone-source input[name=source_uploads]").get_attribute("value") == face_id
            assert "anna.jpg" in page.locator("#zone-source .upload-item").inner_text()
            assert page.locator("#zone-source [data-earlier]").is_hidden()  # attached, not offered as "earlier"
            page.screenshot(path=str(SHOTS / "new-job-after-language-switch-zh.png"), full_page=True)

            # ---- over the limit: said next to the field at once, in Chinese; Start waits ----
            wait_for(page, "document.getElementById('folder-check').classList.contains('bad')", 10_000)
            assert "该文件夹包含 11 个照片/视频，而您的上限是每个任务 2 个" in page.locator("#folder-check").inner_text()
            page.fill("#id_target_folder", "")
            wait_for(page, "!document.getElementById('start-button').disabled", 5_000)  # no folder, no file yet
            page.set_input_files("#id_targets", [str(t) for t in targets] + [str(notes)])
            ready(page, "#zone-target", 3)
            assert page.locator("#targets-limit").inner_text() == OVER_ZH
            assert page.locator("#start-button").is_disabled()
            assert "现在还不能开始" in page.locator("#start-over").inner_text()
            assert page.locator("#zone-target [data-refused-note]").inner_text().startswith("有 1 个文件未被接受")
            assert page.locator("#start-refused").inner_text() == "开始时将略过 1 个未被接受的文件。"
            total = sum(t.stat().st_size for t in targets)  # every file of the batch, the refused one aside
            assert shown_size(total) in page.locator("#zone-target .upload-total-text").inner_text()
            page.screenshot(path=str(SHOTS / "new-job-over-limit-zh.png"), full_page=True)

            # ---- and in English, after switching back: the same files, the same refusal ----
            switch_language(page, "en")
            ready(page, "#zone-target", 3)
            ready(page, "#zone-source", 1)
            assert page.input_value("#id_name") == "Beach day"
            assert page.locator("#targets-limit").inner_text() == OVER_EN
            assert page.locator("#targets-limit").is_visible() and page.locator("#start-button").is_disabled()
            page.screenshot(path=str(SHOTS / "new-job-over-limit-en.png"), full_page=True)

            # ---- one file removed: within the limit, Start is possible ----
            page.locator("#zone-target .upload-item", has_text="shot-3.jpg").get_by_role("button", name="Remove").click()
            wait_for(page, "document.getElementById('targets-limit').hidden", 5_000)
            assert page.locator("#start-button").is_enabled()

            # ---- a refused file is said to be left out; the total counts every file of its batch ----
            page.set_input_files("#id_targets", [str(notes)])
            wait_for(page, "!document.getElementById('start-refused').hidden", 5_000)
            assert page.locator("#start-refused").inner_text() == "Start leaves out 1 refused file."
            assert page.locator("#zone-target [data-refused-note]").inner_text() == (
                "1 file was refused and will not be included in the job. Remove it, or replace it with a good file.")
            for name in ("shot-1.jpg", "shot-2.jpg"):
                page.locator("#zone-target .upload-item", has_text=name).get_by_role("button", name="Remove").click()
            page.set_input_files("#id_targets", [str(targets[0]), str(targets[2])])
            ready(page, "#zone-target", 2)
            wait_for(page, "document.querySelector('#zone-target .upload-total-text').textContent.startsWith('All files sent')",
                     10_000)
            both = targets[0].stat().st_size + targets[2].stat().st_size
            assert page.locator("#zone-target .upload-total-text").inner_text() == f"All files sent ({shown_size(both)})."
            assert page.locator("#start-refused").inner_text() == "Start leaves out 1 refused file."
            assert page.locator("#start-button").is_enabled()
            page.screenshot(path=str(SHOTS / "new-job-refused-left-out-en.png"), full_page=True)
            assert not errors, errors
        finally:
            browser.close()
