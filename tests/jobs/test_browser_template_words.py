"""Template cards and the admin's template form in a real browser, in English and Simplified Chinese,
on a desktop and a phone (issue 27): each card in the reader's language and in plain words, the
template of the user's last job chosen (not a template added since), and a time limit typed in
words ("20 分钟") saved in Slurm's form. No cluster is needed: nothing here runs a job.
Screenshots: <screenshots>/template-cards-*.png, admin-template-form-*.png (tests/e2e/shots.py).
"""
from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client

from jobs.models import Template
from tests.e2e.shots import SHOTS
from tests.e2e.test_browser_live import CHROMIUM, CHROMIUM_ARGS, _sync_playwright, running_server

from .api_helpers import make_job

pytestmark = pytest.mark.slow

SIZES = ((1280, 900, "desktop"), (390, 844, "phone"))
JARGON = ("per task", "batch of", "GPU-hours", "GPU 小时", "about 6 minutes", "约 6 分钟")


@pytest.fixture
def web_server(transactional_db, tmp_path):
    with running_server(tmp_path) as server:
        yield server


@pytest.fixture
def cards(template, profile, owner):
    """Quick GPU (bilingual), a CPU template alice used last, and a newer one whose name sorts first."""
    Template.objects.filter(pk=template.pk).update(
        name_zh="快速显卡", description="Uses a graphics card; good for big folders.",
        description_zh="使用显卡，适合大文件夹。", order=1)
    cpu = Template.objects.create(name="Small jobs", name_zh="少量照片", slug="small", cluster=profile,
                                  partition="cpu", gpu_count=0, time_limit="00:30:00", chunk_size=5, order=2,
                                  description="Works without a graphics card.", description_zh="无需显卡。")
    make_job(owner, cpu)
    Template.objects.create(name="Aardvark", slug="aardvark", cluster=profile, partition="gpu", gpu_type="h200",
                            time_limit="00:10:00", order=3)
    return cpu


def _cookie(user) -> str:
    session = Client()
    session.force_login(user)
    return session.cookies[settings.SESSION_COOKIE_NAME].value


def _context(browser, web_server, user, language, width, height):
    context = browser.new_context(base_url=web_server.url, viewport={"width": width, "height": height})
    context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": _cookie(user), "url": web_server.url},
                         {"name": settings.LANGUAGE_COOKIE_NAME, "value": language, "url": web_server.url}])
    return context


def test_the_cards_read_in_each_language_and_start_on_the_last_template_used(web_server, cards, owner, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    SHOTS.mkdir(parents=True, exist_ok=True)
    expected = {"en": ("Small jobs", "Works without a graphics card.", "Speed not measured yet", "Needs no GPU"),
                "zh-hans": ("少量照片", "无需显卡。", "速度尚未测量", "无需 GPU")}
    with _sync_playwright()() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for language, (name, description, speed, gpu) in expected.items():
                for width, height, size in SIZES:
                    context = _context(browser, web_server, owner, language, width, height)
                    page = context.new_page()
                    page.goto("/jobs/new")
                    chosen = page.locator(".template-card:has(input:checked)")
                    assert chosen.count() == 1
                    assert chosen.locator(".template-name").inner_text().strip() == name
                    text = " ".join(chosen.inner_text().split())
                    assert description in text and speed in text and gpu in text, text
                    every = " ".join(page.locator(".template-grid").inner_text().split())
                    for word in JARGON:
                        assert word not in every, (language, word)
                    if language == "zh-hans":
                        assert "快速显卡" in every and "Quick GPU" not in every
                        assert "Aardvark" in every  # no Chinese name written: the English one
                    page.locator(".template-grid").scroll_into_view_if_needed()
                    page.screenshot(path=str(SHOTS / f"template-cards-{language}-{size}.png"), full_page=False)
                    context.close()
        finally:
            browser.close()


def test_the_admin_types_a_time_limit_in_words_and_chinese_fields_under_english(web_server, template, staff,
                                                                                  monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with _sync_playwright()() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for language, typed, stored, help_words in (("en", "2 hours", "02:00:00", "“20 minutes”, “2 hours”"),
                                                        ("zh-hans", "20 分钟", "00:20:00", "“20 分钟”或“2 小时”")):
                context = _context(browser, web_server, staff, language, 1280, 900)
                page = context.new_page()
                page.goto(f"/admin/jobs/template/{template.pk}/change/")
                name_box = page.locator("#id_name").bounding_box()
                zh_box = page.locator("#id_name_zh").bounding_box()
                assert zh_box["y"] > name_box["y"]  # right under the English name
                assert help_words in page.locator(".field-time_limit").inner_text()
                page.fill("#id_name_zh", "快速显卡")
                page.fill("#id_time_limit", typed)
                page.locator(".field-time_limit").scroll_into_view_if_needed()
                page.screenshot(path=str(SHOTS / f"admin-template-form-{language}.png"), full_page=False)
                page.locator("input[name=_continue]").click()
                page.wait_for_load_state()
                assert page.locator("#id_time_limit").input_value() == stored
                template.refresh_from_db()
                assert (template.time_limit, template.name_zh) == (stored, "快速显卡")
                context.close()
        finally:
            browser.close()
