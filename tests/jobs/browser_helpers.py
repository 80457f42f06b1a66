"""A signed-in page in headless Chromium against the portal's own web server process
(tests/e2e/test_browser_live.py's `running_server`): what the browser tests of tests/jobs share."""
from __future__ import annotations

from contextlib import contextmanager

from django.conf import settings
from django.test import Client

from tests.e2e.test_browser_live import CHROMIUM, CHROMIUM_ARGS, _sync_playwright


@contextmanager
def signed_in_page(server_url: str, user, language: str | None = None, **context_options):
    """Yield (page, errors) with `user` signed in (a session made by Django's test client), in
    `language` when given (the portal's language cookie); `errors` collects the page's uncaught
    script errors, for the test to assert empty. `context_options`: Playwright's browser context
    options (locale, timezone_id, viewport...)."""
    session = Client()
    session.force_login(user)
    cookie = session.cookies[settings.SESSION_COOKIE_NAME].value
    with _sync_playwright()() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(base_url=server_url, **context_options)
            context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": server_url}]
                                + ([{"name": settings.LANGUAGE_COOKIE_NAME, "value": language, "url": server_url}]
                                   if language else []))
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            yield page, errors
        finally:
            browser.close()
