"""Security settings and protections: the production system check, the SSH keys of cluster
profiles encrypted at rest, secrets kept out of logs and error pages, user files never on a public
path, and the ownership rows the per-page tests did not have yet (the usage CSV). Login and
API-token guessing: test_lockouts.py."""
import csv
import io
import logging
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from cryptography.fernet import Fernet
from django.conf import settings
from django.core.exceptions import FieldError, ImproperlyConfigured, SuspiciousFileOperation
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import RequestFactory, override_settings
from django.urls import reverse
from django.views.debug import ExceptionReporter

from cluster import ClusterError
from cluster.ssh import SSHRunner
from jobs.checks import check_production_settings
from jobs.models import ClusterProfile
from portal.redact import RedactSecrets, redact

from .api_helpers import make_job
from .test_usage_page import charged

FAKE_KEY = ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ-SECRET-MATERIAL\n"
            "-----END OPENSSH PRIVATE KEY-----\n")


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


# --- the SSH key encrypted at rest ---------------------------------------------------------------

def raw_key_column(profile_id) -> str:
    """The private_key column as the database holds it (what a backup or a stolen file shows)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT private_key FROM jobs_clusterprofile WHERE id = %s", [profile_id])
        return cursor.fetchone()[0]


def new_fernet_key() -> str:
    return Fernet.generate_key().decode()


def test_the_private_key_is_stored_encrypted(profile):
    profile.private_key = FAKE_KEY
    profile.save()
    raw = raw_key_column(profile.pk)
    assert "SECRET-MATERIAL" not in raw and "PRIVATE KEY" not in raw and FAKE_KEY.splitlines()[1] not in raw
    # Code that reads the key sees the text, as before.
    fresh = ClusterProfile.objects.get(pk=profile.pk)
    assert fresh.private_key == FAKE_KEY and fresh.cluster_config().private_key == FAKE_KEY
    # A queryset update is encrypted as well.
    ClusterProfile.objects.filter(pk=profile.pk).update(private_key=FAKE_KEY.replace("SECRET", "OTHER"))
    assert "OTHER-MATERIAL" not in raw_key_column(profile.pk)
    assert ClusterProfile.objects.get(pk=profile.pk).private_key == FAKE_KEY.replace("SECRET", "OTHER")


def test_the_seeded_local_profile_is_stored_encrypted(db, tmp_path, monkeypatch):
    key_file, known_hosts = tmp_path / "id_ed25519", tmp_path / "known_hosts"
    key_file.write_text(FAKE_KEY)
    known_hosts.write_text("[127.0.0.1]:2222 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeFakeFake\n")
    monkeypatch.setenv("FFP_SSH_KEY", str(key_file))
    monkeypatch.setenv("FFP_SSH_KNOWN_HOSTS", str(known_hosts))
    call_command("seed_local", "--demo-password", "demo-pass-123", stdout=io.StringIO())
    profile = ClusterProfile.objects.get(slug="local")
    assert profile.private_key == FAKE_KEY and "SECRET-MATERIAL" not in raw_key_column(profile.pk)


def test_the_key_cannot_be_searched_for(profile):
    # A lookup on an encrypted column compares against ciphertext: refused rather than silently empty.
    with pytest.raises(FieldError):
        list(ClusterProfile.objects.filter(private_key__startswith="-----BEGIN"))


def test_a_dump_of_the_database_holds_no_key(profile):
    profile.private_key = FAKE_KEY
    profile.save()
    out = io.StringIO()
    call_command("dumpdata", "jobs.clusterprofile", stdout=out)
    assert "SECRET-MATERIAL" not in out.getvalue()
    ClusterProfile.objects.all().delete()
    dump = Path(settings.MEDIA_ROOT) / "profiles.json"
    dump.parent.mkdir(parents=True, exist_ok=True)
    dump.write_text(out.getvalue())
    call_command("loaddata", str(dump), verbosity=0)
    assert ClusterProfile.objects.get().private_key == FAKE_KEY


def test_keys_are_rotated_without_losing_a_profile(profile, settings):
    old, new = new_fernet_key(), new_fernet_key()
    settings.FIELD_ENCRYPTION_KEYS = [old]
    profile.private_key = FAKE_KEY
    profile.save()
    settings.FIELD_ENCRYPTION_KEYS = [new, old]  # step 1: the new key first, the old one still reads
    assert ClusterProfile.objects.get().private_key == FAKE_KEY
    out = io.StringIO()
    call_command("reencrypt_secrets", stdout=out)  # step 2: everything re-encrypted with the new key
    assert "1 cluster profile" in out.getvalue()
    assert Fernet(new.encode()).decrypt(raw_key_column(profile.pk).encode()).decode() == FAKE_KEY
    settings.FIELD_ENCRYPTION_KEYS = [new]  # step 3: the old key goes
    assert ClusterProfile.objects.get().private_key == FAKE_KEY


def test_a_wrong_key_is_named_as_the_cause(profile, settings):
    settings.FIELD_ENCRYPTION_KEYS = [new_fernet_key()]
    with pytest.raises(ImproperlyConfigured, match="FIELD_ENCRYPTION_KEY"):
        ClusterProfile.objects.get(pk=profile.pk)


def settings_import(**env) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("FIELD_ENCRYPTION_KEY", "DEBUG", "SECRET_KEY")}
    return subprocess.run([sys.executable, "-c", "import portal.settings"], cwd=settings.BASE_DIR,
                          env={**base, **env}, capture_output=True, text=True, timeout=60)


def test_production_needs_its_own_encryption_key():
    production = {"DEBUG": "false", "SECRET_KEY": "x" * 50}
    missing = settings_import(**production)
    assert missing.returncode != 0 and "FIELD_ENCRYPTION_KEY must be set when DEBUG is off" in missing.stderr
    broken = settings_import(**production, FIELD_ENCRYPTION_KEY="not-a-fernet-key")
    assert broken.returncode != 0 and "FIELD_ENCRYPTION_KEY" in broken.stderr and "Fernet" in broken.stderr
    assert settings_import(**production, FIELD_ENCRYPTION_KEY=f"{new_fernet_key()},{new_fernet_key()}").returncode == 0
    assert settings_import(DEBUG="true").returncode == 0  # a checkout: a key derived from SECRET_KEY


BEFORE_ENCRYPTION = [("jobs", "0005_attempts_and_choices")]


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_the_migration_encrypts_existing_keys_and_decrypts_them_back():
    leaf = [key for key in MigrationExecutor(connection).loader.graph.leaf_nodes() if key[0] == "jobs"]
    old = migrate(BEFORE_ENCRYPTION)
    old.get_model("jobs", "ClusterProfile").objects.create(
        name="P", slug="p", host="h", username="u", private_key=FAKE_KEY, known_hosts="k", work_root="/w")
    migrate(leaf)
    profile = ClusterProfile.objects.get(slug="p")
    assert "SECRET-MATERIAL" not in raw_key_column(profile.pk) and profile.private_key == FAKE_KEY
    migrate(BEFORE_ENCRYPTION)
    assert raw_key_column(profile.pk) == FAKE_KEY
    migrate(leaf)
    assert ClusterProfile.objects.get(slug="p").private_key == FAKE_KEY


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


def connect_with(profile):
    key = profile.private_key  # noqa: F841 - a local variable, as library code deep in a traceback has
    raise RuntimeError("the connection broke")


def error_report(func, *args) -> ExceptionReporter:
    """The report Django makes (error page, error mail) of what `func(*args)` raises; its frames
    start here, so the test's own variables are not in it."""
    try:
        func(*args)
    except RuntimeError as exc:
        return ExceptionReporter(RequestFactory().get("/"), type(exc), exc, exc.__traceback__)
    raise AssertionError("no error")


def test_error_pages_and_mails_hide_a_key_held_in_a_variable(profile):
    # Made here, so that no source line an error page quotes holds it.
    line = uuid.uuid4().hex * 3
    profile.private_key = f"-----BEGIN OPENSSH PRIVATE KEY-----\n{line}\n-----END OPENSSH PRIVATE KEY-----\n"
    profile.save()
    reporter = error_report(connect_with, ClusterProfile.objects.get(pk=profile.pk))
    with override_settings(DEBUG=True):
        pages = [reporter.get_traceback_html(), reporter.get_traceback_text()]
    for page in pages:
        assert "connect_with" in page and "the connection broke" in page
        assert line not in page and "PRIVATE KEY" not in page


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

    # Tests run with DEBUG off and the dev key, which the entry point refuses to serve with
    # (jobs.checks); imported first here (this file alone), it would stop at that.
    with override_settings(DEBUG=True):
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


def test_postgresql_in_production_without_a_pool_is_warned_about(settings):
    """jobs.W001: a busy portal without DATABASE_POOL_MAX ran PostgreSQL out of connections."""
    from jobs.checks import check_database_pool

    pg = {"ENGINE": "django.db.backends.postgresql", "NAME": "ffportal", "OPTIONS": {}}
    settings.DEBUG = False
    settings.DATABASES = {"default": pg}
    assert [w.id for w in check_database_pool()] == ["jobs.W001"]
    settings.DATABASES = {"default": {**pg, "OPTIONS": {"pool": {"max_size": 4}}}}
    assert check_database_pool() == []
    settings.DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": "x"}}
    assert check_database_pool() == []
    settings.DEBUG, settings.DATABASES = True, {"default": pg}
    assert check_database_pool() == []
