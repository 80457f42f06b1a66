"""Phone layout and accessibility of the main pages, measured in a real browser.

The portal's web server (as `make up` runs it) serves jobs made here in every state; headless
Chromium opens login, the job list, New job, a job page, usage and the account page, and:
- computes the contrast of every visible piece of text from its COMPUTED styles (its colour, with
  the opacity of its ancestors, against the nearest opaque background below it, half-transparent
  layers blended in) and fails listing each offender under 4.5:1;
- at 390 px wide finds no sideways scrolling, and the tables marked `stack` drawn as cards whose
  cells say their column;
- finds "Skip to content" first in the tab order, and a visible outline on everything Tab reaches.
Screenshots (desktop 1280 and phone 390, English and Chinese): <screenshots>/access-*.png.
"""
from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone

from jobs.models import Job, JobStatus, Quota, Target, Task, Template, UsageRecord
from jobs.usage.accounting import month_of

from .shots import SHOTS as SCREENSHOTS
from .test_browser_live import CHROMIUM, CHROMIUM_ARGS, _sync_playwright, web_server  # noqa: F401 - fixture

MIN_CONTRAST = 4.5

# Every visible text of the page whose contrast is under the minimum: [{text, element, colour, background, ratio}].
CONTRAST_JS = r"""(minimum) => {
  const parse = (c) => {
    const m = /rgba?\(([^)]+)\)/.exec(c || "");
    if (!m) return null;
    const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const over = (top, bottom) => {  // top (with alpha) over an opaque bottom
    const a = top[3];
    return [0, 1, 2].map(i => top[i] * a + bottom[i] * (1 - a)).concat([1]);
  };
  const luminance = (c) => {
    const [r, g, b] = c.slice(0, 3).map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const ratio = (a, b) => { const [x, y] = [luminance(a), luminance(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
  const background = (el) => {  // the layers below el's text, blended down to the first opaque one
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const style = getComputedStyle(e);
      if (style.backgroundImage && style.backgroundImage !== "none" && !(e instanceof SVGElement)) return null;
      const bg = parse(style.backgroundColor);
      if (bg && bg[3] > 0) { layers.push(bg); if (bg[3] >= 1) break; }
    }
    let result = [255, 255, 255, 1];  // the canvas
    for (let i = layers.length - 1; i >= 0; i--) result = over(layers[i], result);
    return result;
  };
  const opacity = (el) => { let o = 1; for (let e = el; e; e = e.parentElement) o *= Number(getComputedStyle(e).opacity); return o; };
  const offenders = [], seen = new Set();
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (!el || !node.textContent.trim() || seen.has(el)) continue;
    seen.add(el);
    if (el.closest("[hidden], script, style, template, noscript, title")) continue;
    if (el.closest("button[disabled], input[disabled], select[disabled], [aria-disabled=true]")) continue;  // exempt
    const style = getComputedStyle(el);
    if (style.visibility !== "visible" || style.display === "none") continue;
    const range = document.createRange(); range.selectNodeContents(node);
    const rect = range.getBoundingClientRect();
    if (rect.width <= 1 || rect.height <= 1 || rect.bottom < 0 || rect.right < 0) continue;  // off screen, visually hidden
    const colour = parse(el instanceof SVGElement ? style.fill : style.color);
    const bg = background(el);
    if (!colour || !bg) continue;
    const text = over([colour[0], colour[1], colour[2], colour[3] * opacity(el)], bg);
    const r = ratio(text, bg);
    if (r < minimum) offenders.push({text: node.textContent.trim().slice(0, 40), element: el.tagName.toLowerCase() +
      (el.className && typeof el.className === "string" ? "." + el.className.trim().split(/\s+/).join(".") : ""),
      colour: el instanceof SVGElement ? style.fill : style.color, background: "rgb(" + bg.slice(0, 3).map(Math.round).join(", ") + ")", ratio: Math.round(r * 100) / 100});
  }
  return offenders;
}"""

# Cards on a phone: each row of a table.stack drawn as a block, its cells labelled by data-label.
STACK_JS = r"""() => Array.from(document.querySelectorAll("table.stack")).filter(t => t.offsetParent).map(t => {
  const row = t.querySelector("tbody tr"), cell = row && row.querySelector("td[data-label]");
  return {row: row ? getComputedStyle(row).display : null, label: cell ? getComputedStyle(cell, "::before").content : null,
          want: cell ? cell.getAttribute("data-label") : null, head: t.tHead ? t.tHead.getBoundingClientRect().height : 0};
})"""

# What sticks out past the right edge of the window (the innermost such elements first).
WIDE_JS = r"""() => Array.from(document.querySelectorAll("body *")).filter(e => e.getBoundingClientRect().right > innerWidth + 0.5
  && !Array.from(e.children).some(c => c.getBoundingClientRect().right > innerWidth + 0.5)).slice(0, 8)
  .map(e => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + (typeof e.className === "string" && e.className ? "." + e.className.trim().split(/\s+/).join(".") : "")
       + " " + Math.round(e.getBoundingClientRect().right))"""

FOCUS_JS = r"""() => {
  const e = document.activeElement, s = getComputedStyle(e);
  return {tag: e.tagName.toLowerCase(), text: (e.textContent || e.value || e.name || "").trim().slice(0, 30),
          outline: s.outlineStyle !== "none" && parseFloat(s.outlineWidth) >= 2, cls: e.className || ""};
}"""


def make_job(owner, template, status, name, **fields) -> Job:
    now = timezone.now()
    return Job.objects.create(owner=owner, template=template, template_snapshot=template.snapshot().to_json(), name=name,
                              cluster=template.cluster, status=status, finished_at=now if status in (
                                  JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.PARTIALLY_FAILED,
                                  JobStatus.CANCELLED) else None, **fields)


@pytest.fixture
def pages(local):
    """A user with jobs in every state, usage this month and a quota; the main pages' paths."""
    from django.contrib.auth.models import User

    owner = User.objects.get(username="demo")
    owner.email = "demo@example.org"
    owner.save()
    template = Template.objects.get(slug="gpu-batch")
    Quota.objects.create(user=owner, gpu_hours_per_month=10)
    for status in (JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.CANCELLED, JobStatus.FAILED, JobStatus.COMPLETED):
        make_job(owner, template, status, f"Holiday set, {status}", total=4, done=2 if status != JobStatus.FAILED else 0,
                 failed=2 if status == JobStatus.FAILED else 0, slurm_job_id="4242")
    job = make_job(owner, template, JobStatus.PARTIALLY_FAILED, "Wedding photos", total=3, done=2, failed=1,
                   slurm_job_id="4243")
    Task.objects.create(job=job, index=0, state="COMPLETED", node="vm", exit_code=0, elapsed_seconds=75)
    Task.objects.create(job=job, index=1, state="OUT_OF_MEMORY", node="vm", exit_code=137, reason="ran out of memory")
    for i, (name, status) in enumerate([("bride.jpg", "done"), ("groom.jpg", "failed"), ("guests.jpg", "done")]):
        Target.objects.create(job=job, index=i, name=name, output_name=name, status=status, task_index=i // 2,
                              message="no face found" if status == "failed" else "")
    for j in Job.objects.filter(owner=owner, finished_at__isnull=False):
        UsageRecord.objects.create(job=j, user=owner, period=month_of(j.finished_at), gpu_seconds=180, cpu_seconds=600)
    session = Client()
    session.force_login(owner)
    return {"cookie": session.cookies[settings.SESSION_COOKIE_NAME].value,
            "paths": {"jobs": "/", "new-job": "/jobs/new", "job": f"/jobs/{job.id}", "usage": "/usage",
                      "account": "/account"}}


def open_browser(p):
    return p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def logged_in(browser, server, cookie: str, width: int, locale: str = "en-US"):
    context = browser.new_context(base_url=server.url, viewport={"width": width, "height": 900}, locale=locale)
    context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": server.url}])
    return context


def test_every_text_of_the_main_pages_has_a_contrast_of_4_5(pages, web_server, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    offenders = {}
    with _sync_playwright()() as p:
        browser = open_browser(p)
        try:
            anonymous = browser.new_context(base_url=web_server.url, viewport={"width": 1280, "height": 900})
            page = anonymous.new_page()
            page.goto("/login/")
            offenders["login"] = page.evaluate(CONTRAST_JS, MIN_CONTRAST)
            page = logged_in(browser, web_server, pages["cookie"], 1280).new_page()
            for name, path in pages["paths"].items():
                page.goto(path)
                page.wait_for_load_state("networkidle")
                page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
                offenders[name] = page.evaluate(CONTRAST_JS, MIN_CONTRAST)
        finally:
            browser.close()
    found = {name: items for name, items in offenders.items() if items}
    assert not found, "text under 4.5:1:\n" + "\n".join(
        f"  {name}: {o['ratio']} {o['element']} “{o['text']}” {o['colour']} on {o['background']}"
        for name, items in found.items() for o in items)


def test_a_phone_scrolls_no_page_sideways_and_tables_become_cards(pages, web_server, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    wide, stacks = {}, {}
    with _sync_playwright()() as p:
        browser = open_browser(p)
        try:
            for locale in ("en-US", "zh-CN"):
                page = logged_in(browser, web_server, pages["cookie"], 390, locale).new_page()
                for name, path in pages["paths"].items():
                    page.goto(path)
                    page.wait_for_load_state("networkidle")
                    page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")  # tables inside too
                    width = page.evaluate("document.documentElement.scrollWidth")
                    if width > 390:
                        wide[f"{name} ({locale})"] = (width, page.evaluate(WIDE_JS))
                    stacks[name] = page.evaluate(STACK_JS)
        finally:
            browser.close()
    assert not wide, f"pages wider than the 390 px phone: {wide}"
    assert len(stacks["usage"]) == 2 and stacks["job"], "the usage page's and the job page's tables are marked stack"
    for name, tables in stacks.items():
        for t in tables:
            assert t["row"] == "block" and t["head"] <= 1, f"{name}: a table.stack is not drawn as cards: {t}"
            assert t["label"] == f'"{t["want"]}"', f"{name}: a card's cell does not say its column: {t}"


def test_skip_link_first_and_focus_always_visible(pages, web_server, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with _sync_playwright()() as p:
        browser = open_browser(p)
        try:
            page = logged_in(browser, web_server, pages["cookie"], 1280).new_page()
            page.goto(pages["paths"]["account"])
            page.keyboard.press("Tab")
            first = page.evaluate(FOCUS_JS)
            assert first["text"] == "Skip to content" and first["outline"], first
            assert page.evaluate("document.activeElement.getBoundingClientRect().top") >= 0  # shown when focused
            page.keyboard.press("Enter")
            assert page.evaluate("location.hash") == "#content"
            page.keyboard.press("Tab")
            after = page.evaluate(FOCUS_JS)
            assert page.evaluate("document.querySelector('main').contains(document.activeElement)"), after
            unseen = []
            for path in (pages["paths"]["account"], pages["paths"]["jobs"], pages["paths"]["new-job"]):
                page.goto(path)
                for _ in range(30):
                    page.keyboard.press("Tab")
                    focus = page.evaluate(FOCUS_JS)
                    if focus["tag"] == "body":
                        break
                    if not focus["outline"]:
                        unseen.append((path, focus))
        finally:
            browser.close()
    assert not unseen, f"focus not visible on: {unseen}"


def test_screenshots_of_login_account_usage_and_jobs(pages, web_server, monkeypatch):
    """Desktop and phone, English and Chinese (Chromium here has no CJK fonts: the Chinese words are
    checked in the HTML by tests/jobs/test_translations.py, the layout here)."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shots = {"login": "/login/", "account": pages["paths"]["account"], "usage": pages["paths"]["usage"],
             "jobs": pages["paths"]["jobs"]}
    with _sync_playwright()() as p:
        browser = open_browser(p)
        try:
            for lang, locale in (("en", "en-US"), ("zh", "zh-CN")):
                for device, width in (("desktop", 1280), ("phone", 390)):
                    context = logged_in(browser, web_server, pages["cookie"], width, locale)
                    anonymous = browser.new_context(base_url=web_server.url, viewport={"width": width, "height": 900},
                                                    locale=locale)
                    for name, path in shots.items():
                        page = (anonymous if name == "login" else context).new_page()
                        page.goto(path)
                        page.wait_for_load_state("networkidle")
                        assert page.evaluate("document.documentElement.lang") == ("zh-hans" if lang == "zh" else "en")
                        page.screenshot(path=str(SCREENSHOTS / f"access-{name}-{device}-{lang}.png"), full_page=True)
                        page.close()
                    context.close()
                    anonymous.close()
        finally:
            browser.close()
