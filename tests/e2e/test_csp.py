"""The Content-Security-Policy as a browser applies it: every page of the portal and of its admin,
served by the real web server with the real policy header, runs in Debian's Chromium without one
policy violation (no inline script, no script or socket from elsewhere), and the live job page
still goes live. The header itself is checked on every page in tests/jobs/test_csp.py."""
from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from jobs.models import Job, JobStatus, Target, Template
from tests.e2e.test_browser_live import CHROMIUM, CHROMIUM_ARGS, _sync_playwright, web_server  # noqa: F401

# Runs before the page's own scripts: every violation the browser reports is kept.
VIOLATIONS = r"""
window.__csp = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__csp.push(e.violatedDirective + " " + (e.blockedURI || "inline") + " " + (e.sourceFile || "") + ":" + e.lineNumber);
});
"""


def login_cookie(user) -> str:
    session = Client()
    session.force_login(user)
    return session.cookies[settings.SESSION_COOKIE_NAME].value


def test_every_page_runs_under_the_policy_without_a_violation(local, web_server, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    demo = User.objects.get(username="demo")
    demo.is_staff = demo.is_superuser = True  # the admin's pages too, with the same browser
    demo.save()
    template = Template.objects.get(slug="cpu-small")
    job = Job.objects.create(owner=demo, template=template, template_snapshot=template.snapshot().to_json(),
                             cluster=template.cluster, status=JobStatus.RUNNING, total=1, name="csp")
    Target.objects.create(job=job, index=0, name="a.jpg", output_name="a.jpg")
    pages = ["/", "/jobs/new", f"/jobs/{job.id}", f"/jobs/{job.id}/targets/0", "/usage", "/folders",
             "/admin/", "/admin/jobs/job/", f"/admin/jobs/job/{job.id}/change/", "/admin/jobs/template/add/",
             f"/admin/jobs/template/{template.pk}/change/", f"/admin/jobs/clusterprofile/{template.cluster_id}/change/"]
    sync_playwright = _sync_playwright()
    found: dict[str, list[str]] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(base_url=web_server.url)
            context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": login_cookie(demo),
                                  "url": web_server.url}])
            context.add_init_script(VIOLATIONS)
            page = context.new_page()
            console = []
            page.on("console", lambda m: console.append(m.text) if "Content Security Policy" in m.text else None)
            for url in pages:
                response = page.goto(url)
                assert response.status == 200, (url, response.status)
                assert "script-src 'self'" in (response.headers.get("content-security-policy") or ""), url
                page.wait_for_load_state("networkidle")
                if url == f"/jobs/{job.id}":  # its scripts really run: the page goes live over its socket
                    page.wait_for_selector("#live-indicator[data-mode=live]", timeout=15_000)
                found[url] = page.evaluate("window.__csp")
            assert not console, console
        finally:
            browser.close()
    assert {url: v for url, v in found.items() if v} == {}
