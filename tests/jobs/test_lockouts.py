"""Guessing passwords and API tokens: slowed down per (user name, address), never for everyone.

Logins go through django-axes on every path (the portal's login page and the admin's); wrong API
tokens are counted per address, and only wrong ones: a valid token always works."""
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from axes.models import AccessAttempt, AccessAttemptExpiration, AccessFailureLog
from django.db.models import F
from django.test import AsyncClient, Client
from django.urls import reverse

from jobs import ratelimit
from jobs.models import AuditEntry

from .api_helpers import token_client

RIGHT = "alice-pass-123"
ADMIN_RIGHT = "admin-pass-123"
LOCKED = "Too many failed logins"
DID_NOT_MATCH = "didn't match"


def text(response) -> str:
    return response.content.decode().replace("&#x27;", "'").replace("\xa0", " ")


def login(client, username, password, ip="10.0.0.1"):
    return client.post(reverse("login"), {"username": username, "password": password}, REMOTE_ADDR=ip)


def admin_login(client, username, password, ip="10.0.0.1"):
    return client.post(reverse("admin:login"), {"username": username, "password": password, "next": "/admin/"},
                       REMOTE_ADDR=ip)


def fail(times, username="alice", ip="10.0.0.1", via=login):
    client = Client()
    return [via(client, username, "wrong-guess", ip) for _ in range(times)]


def travel(seconds: float) -> None:
    """Move every recorded attempt `seconds` into the past: as if that much time went by."""
    delta = timedelta(seconds=seconds)
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - delta)
    AccessAttemptExpiration.objects.update(expires_at=F("expires_at") - delta)
    AccessFailureLog.objects.update(attempt_time=F("attempt_time") - delta)


@pytest.fixture
def minute_lockouts(settings):
    settings.LOGIN_LOCKOUT_BASE = 60
    settings.LOGIN_LOCKOUT_MAX = 3600


# --- the portal's login page ----------------------------------------------------------------------

def test_it_locks_a_name_at_an_address_after_five_failures_even_for_the_right_password(owner):
    first = fail(4)
    assert all(r.status_code == 200 and DID_NOT_MATCH in text(r) for r in first)
    (fifth,) = fail(1)
    assert fifth.status_code == 429 and LOCKED in text(fifth)
    client = Client()
    r = login(client, "alice", RIGHT)
    assert r.status_code == 429 and LOCKED in text(r) and DID_NOT_MATCH not in text(r)
    assert "Try again in 5 minutes" in text(r) and r["Retry-After"] == "300"
    assert "_auth_user_id" not in client.session
    entry = AuditEntry.objects.get(action="auth.locked_out")
    assert entry.ip == "10.0.0.1" and entry.details["username"] == "alice" and entry.details["failures"] == 5
    assert entry.details["seconds"] == 300
    # Refused attempts are failed logins in the audit log, but they do not lock anyone again.
    assert AuditEntry.objects.filter(action="auth.login_failed", details__username="alice").count() == 6


def test_the_owner_logs_in_from_their_own_address_while_an_attacker_is_locked_out(owner):
    for n in range(5):  # five addresses, five wrong passwords each
        fail(5, ip=f"203.0.113.{n}")
    assert login(Client(), "alice", RIGHT, ip="203.0.113.0").status_code == 429  # the guesser is stuck
    client = Client()
    r = login(client, "alice", RIGHT, ip="10.0.0.7")
    assert r.status_code == 302 and r["Location"] == reverse("job-list")
    assert client.session["_auth_user_id"] == str(owner.pk)
    assert AuditEntry.objects.filter(action="auth.locked_out").count() == 5


def test_guessing_other_names_from_an_address_does_not_lock_the_address(owner, colleague):
    for name in ("bob", "carol", "dave", "erin", "frank", "grace"):
        fail(5, username=name)
    assert login(Client(), "alice", RIGHT).status_code == 302


def test_variants_of_a_name_count_as_that_name(owner):
    # The form strips and normalises the name before it checks the password: so does the count.
    for name in (" alice", "alice ", "alice", "ａｌｉｃｅ", "alice"):  # the fourth: full-width letters (NFKC)
        fail(1, username=name)
    assert login(Client(), "alice", RIGHT).status_code == 429


def test_a_good_login_clears_the_failures_of_its_name_and_address(owner):
    fail(4)
    client = Client()
    assert login(client, "alice", RIGHT).status_code == 302
    client.logout()
    fail(4)
    assert login(Client(), "alice", RIGHT).status_code == 302


def test_the_lock_ends_after_its_cool_off(owner, settings):
    settings.LOGIN_LOCKOUT_BASE = 1
    fail(5)
    assert login(Client(), "alice", RIGHT).status_code == 429
    travel(1.3)
    assert login(Client(), "alice", RIGHT).status_code == 302


def test_each_lockout_of_a_pair_lasts_twice_as_long_as_the_one_before(owner, minute_lockouts):
    fail(5)
    r = login(Client(), "alice", RIGHT)
    assert r.status_code == 429 and "Try again in 1 minute" in text(r)
    travel(61)
    assert [x.status_code for x in fail(4)] == [200] * 4  # the first lockout is over
    (fifth,) = fail(1)
    assert fifth.status_code == 429 and "Try again in 2 minutes" in text(fifth)
    travel(61)
    assert login(Client(), "alice", RIGHT).status_code == 429  # twice as long this time
    travel(60)
    fail(5)
    r = login(Client(), "alice", RIGHT)
    assert r.status_code == 429 and "Try again in 4 minutes" in text(r)
    assert [e.details["seconds"] for e in AuditEntry.objects.filter(action="auth.locked_out").order_by("pk")] == [
        60, 120, 240]
    # Other pairs start from the beginning.
    fail(5, ip="10.0.0.2")
    assert "Try again in 1 minute" in text(login(Client(), "alice", RIGHT, ip="10.0.0.2"))


def test_the_lock_does_not_end_early_when_other_people_log_in(owner, colleague, minute_lockouts):
    # Axes clears expired attempts on every login; a long lockout must survive a short one's clean-up.
    fail(5)
    travel(61)
    fail(5)  # the second lockout of this pair: two minutes
    travel(90)
    assert login(Client(), "bob", "bob-pass-123", ip="10.0.0.3").status_code == 302
    fail(1, username="bob", ip="10.0.0.3")
    assert login(Client(), "alice", RIGHT).status_code == 429


def test_lockouts_grow_up_to_a_ceiling(settings):
    settings.LOGIN_LOCKOUT_BASE = 300
    settings.LOGIN_LOCKOUT_MAX = 3600
    assert [ratelimit.lockout_duration(n).total_seconds() for n in range(1, 7)] == [
        300, 600, 1200, 2400, 3600, 3600]


def test_the_database_keeps_the_counts_for_every_web_process(settings):
    assert settings.AXES_HANDLER == "axes.handlers.database.AxesDatabaseHandler"
    assert settings.AXES_LOCKOUT_PARAMETERS == [["username", "ip_address"]]
    assert "axes.backends.AxesStandaloneBackend" == settings.AUTHENTICATION_BACKENDS[0]


# --- the admin's login page -----------------------------------------------------------------------

def test_the_admin_login_is_limited_like_the_portals(staff):
    first = fail(4, username="root-admin", via=admin_login)
    assert all(r.status_code == 200 for r in first)
    fail(1, username="root-admin", via=admin_login)
    client = Client()
    r = admin_login(client, "root-admin", ADMIN_RIGHT)
    assert r.status_code == 429 and LOCKED in text(r)
    assert "_auth_user_id" not in client.session
    assert AuditEntry.objects.filter(action="auth.locked_out", details__username="root-admin").count() == 1
    # The admin, from their own address:
    assert admin_login(Client(), "root-admin", ADMIN_RIGHT, ip="10.0.0.9").status_code == 302


def test_failures_on_either_login_page_count_together(staff):
    fail(3, username="root-admin")
    fail(2, username="root-admin", via=admin_login)
    assert login(Client(), "root-admin", ADMIN_RIGHT).status_code == 429
    assert admin_login(Client(), "root-admin", ADMIN_RIGHT).status_code == 429


# --- API tokens -----------------------------------------------------------------------------------

def test_a_valid_token_works_from_an_address_that_sent_many_wrong_ones(owner):
    good, key = token_client(owner, REMOTE_ADDR="10.0.0.5")
    bad = Client(HTTP_AUTHORIZATION="Token guessed-key-000000000000", REMOTE_ADDR="10.0.0.5")
    statuses = [bad.get("/api/v1/jobs").status_code for _ in range(25)]
    assert statuses == [401] * 20 + [429] * 5
    r = bad.get("/api/v1/jobs")
    assert "Too many wrong API tokens" in r.json()["error"] and r["Retry-After"] == "900"
    assert good.get("/api/v1/jobs").status_code == 200
    assert AuditEntry.objects.filter(action="auth.token_locked_out", ip="10.0.0.5").count() == 1


def test_wrong_tokens_from_one_address_do_not_touch_another(owner, settings):
    settings.API_TOKEN_FAILURES_PER_IP = 3
    bad = Client(HTTP_AUTHORIZATION="Token guessed-key-000000000000", REMOTE_ADDR="10.0.0.5")
    assert [bad.get("/api/v1/jobs").status_code for _ in range(4)] == [401, 401, 401, 429]
    other = Client(HTTP_AUTHORIZATION="Token guessed-key-000000000000", REMOTE_ADDR="10.0.0.6")
    assert other.get("/api/v1/jobs").status_code == 401


def test_the_lockout_page_comes_back_under_asgi_too(owner):
    # The portal runs under ASGI, where axes' middleware takes its asynchronous path.
    client = AsyncClient()

    def post(password):
        return async_to_sync(client.post)(reverse("login"), {"username": "alice", "password": password},
                                          REMOTE_ADDR="10.0.0.1")

    assert [post("wrong-guess").status_code for _ in range(4)] == [200] * 4
    assert post("wrong-guess").status_code == 429
    r = post(RIGHT)
    assert r.status_code == 429 and "Try again in 5 minutes" in text(r) and r["Retry-After"] == "300"
