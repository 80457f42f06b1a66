"""Behind nginx, the client's address and https come from the proxy's headers, and only from the
proxies the admin named (FFP_TRUSTED_PROXIES). Two real web servers (make up's command, the test
database): one trusting 127.0.0.1 (nginx on the same server), one trusting nobody (the default). The
same forged request goes to each: a failed login, which the audit log records with the address."""
from __future__ import annotations

import urllib.parse
import urllib.request

import pytest

from jobs.models import AuditEntry
from tests.e2e.test_browser_live import WebServer

CLIENT = "203.0.113.9"  # TEST-NET-3: an address no test machine has


@pytest.fixture
def servers(django_db_setup, tmp_path):
    started = {}
    try:
        for name, proxies in (("trusting", "127.0.0.1"), ("default", "")):
            started[name] = WebServer(tmp_path / f"{name}.log", tmp_path / f"media-{name}",
                                      env={"FFP_TRUSTED_PROXIES": proxies})
        for web in started.values():
            web.wait_ready(timeout=120)
        yield started
    finally:
        for web in started.values():
            web.stop()


def failed_login_from(web: WebServer, username: str) -> None:
    """POST a wrong password through the login form as a proxy would pass it on."""
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
    page = opener.open(web.url + "/login/", timeout=30).read().decode()
    token = page.split('name="csrfmiddlewaretoken" value="', 1)[1].split('"', 1)[0]
    body = urllib.parse.urlencode({"csrfmiddlewaretoken": token, "username": username, "password": "wrong"})
    request = urllib.request.Request(web.url + "/login/", data=body.encode(), headers={
        "X-Forwarded-For": f"198.51.100.7, {CLIENT}", "X-Forwarded-Proto": "http", "Referer": web.url + "/login/"})
    with opener.open(request, timeout=30) as answer:
        assert answer.status == 200  # the form again, with its error


@pytest.mark.django_db(transaction=True)
def test_the_audit_log_has_the_client_behind_a_trusted_proxy_and_the_peer_otherwise(servers):
    failed_login_from(servers["trusting"], "via-proxy")
    failed_login_from(servers["default"], "forged")
    ips = {e.details["username"]: e.ip for e in AuditEntry.objects.filter(action="auth.login_failed")}
    # The right-most address the trusted proxy did not add itself: the client nginx saw. The left one
    # is whatever the client wrote and is never believed.
    assert ips["via-proxy"] == CLIENT
    # No proxy named: the header is anyone's to write, so the peer's own address counts.
    assert ips["forged"] == "127.0.0.1"
