"""Security settings and protections: login and API-token rate limiting, the production
system check, secrets kept out of logs and error pages, user files never on a public path, and
the ownership rows the per-page tests did not have yet (the usage CSV)."""
import csv
import io
import logging
import time
import uuid
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.exceptions import SuspiciousFileOperation
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import Client, RequestFactory, override_settings
from django.urls import reverse
from django.views.debug import ExceptionReporter

from cluster import ClusterError
from cluster.ssh import SSHRunner
from jobs.checks import check_production_settings
from jobs.models import AuditEntry, ClusterProfile
from portal.redact import RedactSecrets, redact

from .api_helpers import make_job, token_client
from .test_usage_page import charged

FAKE_KEY = ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ-SECRET-MATERIAL\n"
            "-----END OPENSSH PRIVATE KEY-----\n")
TOO_MANY = "Too many failed logins. Try again in 15 minutes."


def login(client, username, password, ip="10.0.0.1"):
    return client.post(reverse("login"), {"username": username, "password": password}, REMOTE_ADDR=ip)


# --- login rate limiting --------------------------------------------------------------------------

def test_it_locks_a_user_name_after_five_failures_even_for_the_right_password(client, owner):
    for _ in range(5):
        r = login(client, "alice", "wrong")
        assert "didn&#x27;t match" in r.content.decode() or "didn't match" in r.content.decode()
    r = login(client, "alice", "alice-pass-123")
    body = r.content.decode()
    assert r.status_code == 200 and TOO_MANY in body and "didn" not in body
    assert "_auth_user_id" not in client.session
    # Another address is refused as well: the lock is on the name.
    assert TOO_MANY in login(Client(), "ALICE", "alice-pass-123", ip="10.0.0.2").content.decode()
    entry = AuditEntry.objects.get(action="auth.locked_out")
    assert entry.details == {"username": "alice", "by": "user", "failures": 5} and entry.ip == "10.0.0.1"


def test_it_locks_an_address_that_guesses_many_names(client, owner, settings):
    settings.LOGIN_FAILURES_PER_IP = 3
    for name in ("a", "b", "c"):
        login(client, name, "wrong")
    assert TOO_MANY in login(client, "alice", "alice-pass-123").content.decode()
    # The same user from elsewhere is not affected.
    r = login(Client(), "alice", "alice-pass-123", ip="10.0.0.9")
    assert r.status_code == 302
    assert AuditEntry.objects.filter(action="auth.locked_out", details__by="ip").count() == 1


def test_a_good_login_clears_the_names_failures(client, owner):
    for _ in range(4):
        login(client, "alice", "wrong")
    assert login(client, "alice", "alice-pass-123").status_code == 302
    client.logout()
    for _ in range(4):
        login(client, "alice", "wrong")
    assert login(client, "alice", "alice-pass-123").status_code == 302


def test_the_lock_ends_with_its_window(client, owner, settings):
    settings.LOGIN_FAILURE_WINDOW = 1
    for _ in range(5):
        login(client, "alice", "wrong")
    assert TOO_MANY in login(client, "alice", "alice-pass-123").content.decode()
    time.sleep(1.3)
    assert login(client, "alice", "alice-pass-123").status_code == 302


def test_it_counts_in_the_shared_redis_cache():
    assert settings.CACHES["default"]["BACKEND"] == "django.core.cache.backends.redis.RedisCache"
    assert settings.CACHES["default"]["LOCATION"] == settings.REDIS_URL


def test_it_answers_429_after_too_many_wrong_api_tokens_from_one_address(owner, settings):
    settings.API_TOKEN_FAILURES_PER_IP = 3
    good, key = token_client(owner, REMOTE_ADDR="10.0.0.5")
    bad = Client(HTTP_AUTHORIZATION="Token guessed-key-000000000000", REMOTE_ADDR="10.0.0.5")
    assert [bad.get("/api/v1/jobs").status_code for _ in range(3)] == [401, 401, 401]
    r = bad.get("/api/v1/jobs")
    assert r.status_code == 429 and "Too many wrong API tokens" in r.json()["error"] and r["Retry-After"] == "900"
    assert good.get("/api/v1/jobs").status_code == 429  # guessing right now does not help either
    assert Client(HTTP_AUTHORIZATION=f"Token {key}", REMOTE_ADDR="10.0.0.6").get("/api/v1/jobs").status_code == 200
    assert AuditEntry.objects.filter(action="auth.token_locked_out", ip="10.0.0.5").count() == 1


# --- the production system check ------------------------------------------------------------------

GOOD = dict(DEBUG=False, SECRET_KEY="x" * 50, ALLOWED_HOSTS=["portal.example.org"], SESSION_COOKIE_SECURE=True,
            CSRF_COOKIE_SECURE=True, ALLOW_INSECURE_COOKIES=False)


def ids(**overrides):
    with override_settings(**{**GOOD, **overrides}):
        return [e.id for e in check_production_settings()]


def test_it_accepts_a_secure_production_configuration_and_any_debug_one():
    assert ids() == []
    assert ids(DEBUG=True, SECRET_KEY=settings.DEV_SECRET_KEY, ALLOWED_HOSTS=["*"], SESSION_COOKIE_SECURE=False) == []


@pytest.mark.parametrize("overrides, expected", [
    ({"SECRET_KEY": "dev-only-insecure-key"}, ["jobs.E001"]),
    ({"SECRET_KEY": "short-but-not-default"}, ["jobs.E002"]),
    ({"ALLOWED_HOSTS": ["portal.example.org", "*"]}, ["jobs.E003"]),
    ({"SESSION_COOKIE_SECURE": False}, ["jobs.E004"]),
    ({"CSRF_COOKIE_SECURE": False}, ["jobs.E004"]),
    ({"CSRF_COOKIE_SECURE": False, "SESSION_COOKIE_SECURE": False, "ALLOW_INSECURE_COOKIES": True}, []),
])
def test_it_refuses_an_insecure_production_configuration(overrides, expected):
    assert ids(**overrides) == expected


def test_start_up_commands_stop_on_it():
    with override_settings(**{**GOOD, "SECRET_KEY": "dev-only-insecure-key"}):
        with pytest.raises(SystemCheckError, match="SECRET_KEY is the development key"):
            call_command("check")


# --- secrets out of logs and error pages ----------------------------------------------------------

@pytest.mark.parametrize("text, secret", [
    (f"connect failed with key {FAKE_KEY} for host", "SECRET-MATERIAL"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEcut-off-SECRET", "cut-off-SECRET"),
    ("smtp login user=portal password=hunter2-SECRET port=25", "hunter2-SECRET"),
    ("{'private_key': 'abcSECRET', 'host': 'x'}", "abcSECRET"),
    ("headers: Authorization: Token kS9-SECRET_0123456789abcdef", "SECRET_0123"),
    ("calling with Token kS9xSECRETx0123456789abcdef", "SECRETx"),
])
def test_it_redacts_secrets_from_text(text, secret):
    assert secret not in redact(text)


def test_it_keeps_ordinary_text():
    text = "job 3 failed: Token refused by sshd; the password field is empty"
    assert redact(text) == text


def test_the_log_handlers_redact_messages_and_tracebacks():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactSecrets())
    logger = logging.getLogger("test.redact")
    logger.addHandler(handler)
    try:
        try:
            raise ValueError(f"bad key {FAKE_KEY}")
        except ValueError:
            logger.exception("login with password=%s failed", "hunter2-SECRET")
    finally:
        logger.removeHandler(handler)
    out = stream.getvalue()
    assert "hunter2-SECRET" not in out and "SECRET-MATERIAL" not in out
    assert "password=********" in out and "[private key redacted]" in out and "ValueError" in out
    assert "redact" in str(settings.LOGGING["handlers"]["console"]["filters"])


def test_error_pages_hide_posted_keys_passwords_and_authorization():
    request = RequestFactory().post("/admin/jobs/clusterprofile/add/", {
        "private_key": FAKE_KEY, "password": "hunter2-SECRET", "name": "Local"},
        HTTP_AUTHORIZATION="Token kS9xSECRETx0123456789abcdef")
    # No traceback frames: their source lines would show this test's own literals.
    reporter = ExceptionReporter(request, RuntimeError, RuntimeError("boom"), None)
    with override_settings(DEBUG=True, EMAIL_HOST_PASSWORD="smtp-SECRET"):
        pages = [reporter.get_traceback_html(), reporter.get_traceback_text()]
    for page in pages:
        for secret in ("SECRET-MATERIAL", "hunter2-SECRET", "kS9xSECRETx", "smtp-SECRET"):
            assert secret not in page
        assert "Local" in page  # the other fields still help debugging


def test_the_private_key_stays_out_of_repr_the_job_page_and_cluster_errors(client, owner, template):
    profile = template.cluster
    ClusterProfile.objects.filter(pk=profile.pk).update(private_key=FAKE_KEY, port=1)
    profile.refresh_from_db()
    config = profile.cluster_config()
    assert "SECRET-MATERIAL" not in repr(profile) + str(profile) + repr(config)
    with pytest.raises(ClusterError) as caught:
        SSHRunner(config).run(["true"], timeout=5)
    assert "SECRET-MATERIAL" not in str(caught.value) + repr(caught.value)
    job = make_job(owner, template, targets=1)
    client.force_login(owner)
    assert "SECRET-MATERIAL" not in client.get(reverse("job-detail", args=[job.id])).content.decode()


# --- user files never on a public path ------------------------------------------------------------

@pytest.fixture
def media_file():
    """A file in the DEFAULT media folder (var/media), where a deployment keeps uploads."""
    folder = Path(settings.BASE_DIR) / "var" / "media" / f"test-{uuid.uuid4().hex}"
    folder.mkdir(parents=True)
    path = folder / "face.jpg"
    path.write_bytes(b"USER-FILE-CONTENT")
    yield path
    path.unlink()
    folder.rmdir()


def test_media_is_not_inside_any_static_folder():
    media = (Path(settings.BASE_DIR) / "var" / "media").resolve()
    for static in [*settings.STATICFILES_DIRS, settings.STATIC_ROOT]:
        assert not media.is_relative_to(Path(static).resolve())
    assert settings.MEDIA_URL != settings.STATIC_URL


def test_no_url_serves_user_files(client, owner, media_file):
    client.force_login(owner)
    rel = media_file.relative_to(Path(settings.BASE_DIR) / "var" / "media").as_posix()
    for url in [f"/media/{rel}", f"{settings.MEDIA_URL}{rel}", f"/static/../var/media/{rel}",
                f"/static/%2e%2e/var/media/{rel}", f"/var/media/{rel}"]:
        r = client.get(url)
        assert r.status_code == 404, url
        assert b"USER-FILE-CONTENT" not in b"".join(r) if not r.streaming else True


def test_the_asgi_static_handler_does_not_serve_user_files(media_file):
    from channels.testing import HttpCommunicator

    from portal.asgi import application

    rel = media_file.relative_to(Path(settings.BASE_DIR)).as_posix()
    for path in [f"/static/../{rel}", f"/static/%2e%2e/{rel}", f"/static/..%2f{rel}"]:
        # Django's static handler refuses a path out of the static folders with a 404 or by raising
        # SuspiciousFileOperation (the server answers 500): either way, not the file.
        try:
            response = async_to_sync(HttpCommunicator(application, "GET", path).get_response)()
        except SuspiciousFileOperation:
            continue
        assert response["status"] != 200 and b"USER-FILE-CONTENT" not in response["body"], path


# --- ownership rows the per-page tests lacked -----------------------------------------------------

@pytest.mark.parametrize("who", ["colleague", "stranger", "staff"])
def test_the_usage_csv_never_lists_another_users_jobs(client, request, owner, template, who):
    record = charged(owner, template, 3600, name="Alice only")
    client.force_login(request.getfixturevalue(who))
    r = client.get(reverse("usage-csv"))
    assert r.status_code == 200
    rows = list(csv.reader(io.StringIO(b"".join(r.streaming_content).decode())))
    assert rows[1:] == [] and str(record.job_id) not in str(rows)
