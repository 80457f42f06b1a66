"""Settings, all from environment variables, with defaults that work on a fresh checkout.

Bad values fail loudly at start-up (ImproperlyConfigured), never silently fall back (the readers:
portal.env). The settings that hold off attackers (login lockouts, wrong API tokens, the
Content-Security-Policy) are in portal/settings_security.py, imported here.
"""
from __future__ import annotations

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext_lazy as _

from portal.env import envbool, envfloat, envint, envlist, envnetworks
from portal.settings_security import (  # noqa: F401 - settings, read by Django and the apps
    API_TOKEN_FAILURE_WINDOW,
    API_TOKEN_FAILURES_PER_IP,
    AXES_CLIENT_IP_CALLABLE,
    AXES_COOLOFF_TIME,
    AXES_DISABLE_ACCESS_LOG,
    AXES_ENABLE_ACCESS_FAILURE_LOG,
    AXES_FAILURE_LIMIT,
    AXES_HANDLER,
    AXES_LOCKOUT_CALLABLE,
    AXES_LOCKOUT_PARAMETERS,
    AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT,
    AXES_RESET_ON_SUCCESS,
    AXES_USE_ATTEMPT_EXPIRATION,
    AXES_USERNAME_CALLABLE,
    CONTENT_SECURITY_POLICY,
    LOGIN_LOCKOUT_BASE,
    LOGIN_LOCKOUT_MAX,
)

BASE_DIR = Path(__file__).resolve().parent.parent


# A fresh checkout runs with DEBUG on; production sets DEBUG=false, and then the system check in
# jobs/checks.py refuses to start with the dev key, a short key, ALLOWED_HOSTS=* or cookies sent
# over plain HTTP (see docs). DEBUG pages show settings and tracebacks: never on a shared host.
DEBUG = envbool("DEBUG", "true")
#: the key a checkout runs with; refused when DEBUG is off (jobs.checks)
DEV_SECRET_KEY = "dev-only-insecure-key"
SECRET_KEY = os.environ.get("SECRET_KEY", DEV_SECRET_KEY if DEBUG else "")
if not SECRET_KEY:
    raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off")
#: Fernet keys that encrypt secrets in the database (cluster profiles' SSH keys, jobs.secrets):
#: the first encrypts, all decrypt (rotation: docs/security.md). A checkout without one derives a
#: key from SECRET_KEY; production must set its own, kept apart from the database and its backups.
FIELD_ENCRYPTION_KEYS = envlist("FIELD_ENCRYPTION_KEY")
if not FIELD_ENCRYPTION_KEYS and not DEBUG:
    raise ImproperlyConfigured("FIELD_ENCRYPTION_KEY must be set when DEBUG is off; make one with: python -c "
                               "'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'")
if FIELD_ENCRYPTION_KEYS:
    from cryptography.fernet import Fernet

    for _key in FIELD_ENCRYPTION_KEYS:
        try:
            Fernet(_key.encode())
        except ValueError:
            raise ImproperlyConfigured("FIELD_ENCRYPTION_KEY holds a value that is not a Fernet key (32 url-safe "
                                       "base64-encoded bytes; several are separated by commas)") from None
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS")
SITE_URL = os.environ.get("SITE_URL", "http://127.0.0.1:8000").rstrip("/")


#: FFP_TRUSTED_PROXIES: the addresses (or networks) of the reverse proxies in front of the web
#: processes, comma-separated, e.g. "127.0.0.1" for nginx on the same server. Only a request that
#: comes from one of them has its X-Forwarded-For and X-Forwarded-Proto believed (the client's
#: address in the audit log and the login limits, https for secure cookies); from anyone else the
#: headers are ignored, since any client can write them. Empty (the default): none is trusted.
TRUSTED_PROXIES = envnetworks("FFP_TRUSTED_PROXIES", "127.0.0.1 or 10.0.0.0/24")

INSTALLED_APPS = [
    "daphne",
    # Before django.contrib.auth, so that its createsuperuser (portal/management) is the one run:
    # Django's skips the password checks with --noinput.
    "portal",
    "portal.admin_site.PortalAdminConfig",  # django.contrib.admin, its front page in sections
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_rq",
    "channels",
    "axes",  # failed logins, counted per (user name, address): jobs.ratelimit
    "jobs",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # /static/ from the web process itself (make up has no web server in front), cached and
    # compressed; with DEBUG off too, unlike Django's own static view.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # X-Request-ID: the id of every log line and audit entry of the request, and of its response.
    "portal.request_id.RequestIdMiddleware",
    # Content-Security-Policy on every page (CONTENT_SECURITY_POLICY below).
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "jobs.web.language.AccountLanguageMiddleware",  # a user's chosen language wins over the browser's
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: turns a refused login into the lockout page (jobs.ratelimit).
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "portal.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django.template.context_processors.i18n",
            ],
            # The jobs app keeps its tags with its pages (jobs/web/), not in jobs/templatetags.
            "libraries": {
                "expected": "jobs.web.templatetags.expected",
                "live": "jobs.web.templatetags.live",
                "portal": "jobs.web.templatetags.portal",
                "quota": "jobs.web.templatetags.quota",
                "results": "jobs.web.templatetags.results",
            },
        },
    }
]
WSGI_APPLICATION = "portal.wsgi.application"
ASGI_APPLICATION = "portal.asgi.application"

#: the portal's own state (database, uploads, outputs, logs): its service user's alone (mode 700)
VAR_DIR = Path(os.environ.get("PORTAL_VAR", BASE_DIR / "var"))
VAR_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
DATABASE_URL = os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'portal.sqlite3'}")
try:
    import dj_database_url

    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
except ValueError as exc:
    raise ImproperlyConfigured(f"DATABASE_URL is not a database URL: {exc}") from None
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
    # Several processes (web, RQ worker, watcher) write: wait for the lock instead of failing.
    DATABASES["default"]["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # Tests: a FILE, not SQLite's in-memory default, so a second process (the web server of the
    # browser tests) sees the same test database. One file per test run (the pid), so two runs in
    # the same checkout never destroy each other's database; Django deletes it at the end.
    DATABASES["default"]["TEST"] = {
        "NAME": os.environ.get("TEST_DATABASE_NAME") or str(VAR_DIR / f"test-portal-{os.getpid()}.sqlite3")
    }
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # DATABASE_POOL_MAX > 0: each process keeps at most that many PostgreSQL connections, in a pool
    # (psycopg_pool, through Django's "pool" option). Without it an ASGI process held one persistent
    # connection per thread that had ever touched the database (Channels and sync views run in
    # thread pools): 10 to 11 each, open for good (seen on a fresh server, docs/deploy.md). A
    # connection goes back to the pool when a request or a consumer's call ends; idle extras close
    # after a minute; a thread waits up to 10 s for a free one.
    DATABASE_POOL_MAX = envint("DATABASE_POOL_MAX", "0")
    if DATABASE_POOL_MAX < 0:
        raise ImproperlyConfigured("DATABASE_POOL_MAX must be 0 (no pool) or more")
    if DATABASE_POOL_MAX:
        DATABASES["default"]["CONN_MAX_AGE"] = 0  # Django's pool asks for it: "closing" returns to the pool
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
            "min_size": 1, "max_size": DATABASE_POOL_MAX, "max_idle": 60, "timeout": 10}
    if os.environ.get("TEST_DATABASE_NAME"):
        # Two test runs side by side on one PostgreSQL (scripts/test.sh) need two test databases.
        DATABASES["default"]["TEST"] = {"NAME": os.environ["TEST_DATABASE_NAME"]}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Every place a password is set checks it with these: the account page, the admin, Django's
# createsuperuser and changepassword, and seed_local's --demo-password. Django translates their words.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# django-axes first: it refuses a locked-out (user name, address) before any password is checked.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "job-list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = os.environ.get("LANGUAGE_CODE", "en")
LANGUAGES = [("en", _("English")), ("zh-hans", _("Simplified Chinese"))]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = os.environ.get("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
#: WhiteNoise serves the files where they are (static/ and the apps'), so no collectstatic is
#: needed for a checkout or the tests; `make up` collects them once into STATIC_ROOT anyway.
WHITENOISE_USE_FINDERS = True
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", VAR_DIR / "static"))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise looks there first (empty until collectstatic)
# Uploads and fetched outputs. Never served as public static files: every file goes through a
# view that checks ownership (see jobs/web/views).
MEDIA_ROOT = Path(os.environ.get("MEDIA_ROOT", VAR_DIR / "media"))
# Every uploaded file is kept, also one named `..` or `.` that Django's parser would drop silently
# (jobs.uploads.content gives it a safe name); small ones in memory, big ones streamed to a temporary file.
FILE_UPLOAD_HANDLERS = ["jobs.uploads.content.KeepEveryUpload", "django.core.files.uploadhandler.MemoryFileUploadHandler",
                        "django.core.files.uploadhandler.TemporaryFileUploadHandler"]
# Uploads are private whatever the process's umask: files 600, folders 700.
FILE_UPLOAD_PERMISSIONS = 0o600
FILE_UPLOAD_DIRECTORY_PERMISSIONS = 0o700
MEDIA_URL = "/media-not-served/"
# Downloads of outputs and inputs handed to the web server in front (django-sendfile2): behind nginx,
# SENDFILE_BACKEND=django_sendfile.backends.nginx answers with an X-Accel-Redirect to SENDFILE_URL,
# an `internal` nginx location over MEDIA_ROOT (deploy/nginx/), so no Python process streams a large
# file. Empty (a checkout, `make up`, the tests): the portal streams them itself (jobs.results.files).
SENDFILE_BACKEND = os.environ.get("SENDFILE_BACKEND", "").strip() or None
SENDFILE_ROOT = str(MEDIA_ROOT.resolve())
SENDFILE_URL = os.environ.get("SENDFILE_URL", "/_protected_media")
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024  # bigger uploads stream to a temp file, never whole into RAM
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
UPLOAD_MAX_BYTES = envint("UPLOAD_MAX_BYTES", str(2 * 1024**3))  # per file
# Files sent ahead of Start (jobs.uploads.store): one user's unused ones, at most (expiry removes them).
UPLOADS_PENDING_MAX_FILES = envint("UPLOADS_PENDING_MAX_FILES", "2000")
UPLOADS_PENDING_MAX_BYTES = envint("UPLOADS_PENDING_MAX_BYTES", str(20 * 1024**3))
# Pixels, not bytes, are what decoding costs (a 200 KB PNG can hold 7000 x 7000 pixels, 196 MB
# decoded). The largest photo, or picture of any video stream, the portal and the worker decode:
# refused from the header before decoding (jobs.uploads.decoding; the manifest's engine.max_pixels). The
# default, the worker's own, takes an 8K frame (33 MP) and 48 MP phone photos.
from worker.manifest import DEFAULT_MAX_PIXELS as _DEFAULT_MAX_PIXELS  # noqa: E402 - one number, the worker's

MEDIA_MAX_PIXELS = envint("MEDIA_MAX_PIXELS", str(_DEFAULT_MAX_PIXELS))
# Upload checks that decode at once in one web process (jobs.uploads.decoding.decode_slot); more wait their
# turn. Memory for checks is at most this many decoded photos (~200 MB each at the limit).
UPLOAD_CHECKS_AT_ONCE = envint("UPLOAD_CHECKS_AT_ONCE", "2")
if MEDIA_MAX_PIXELS < 1 or UPLOAD_CHECKS_AT_ONCE < 1:
    raise ImproperlyConfigured("MEDIA_MAX_PIXELS and UPLOAD_CHECKS_AT_ONCE must be at least 1")
# Start asks the cluster what a target folder holds, to refuse an empty or mistyped one next to its field
# (jobs.clusters.folder_check; a cluster that does not answer never refuses a Start).
FOLDER_CHECK_ON_START = os.environ.get("FOLDER_CHECK_ON_START", "1") != "0"
# Files in one request. Django's default (100) would refuse a Start of 101 uploaded targets with a
# bare 400 before any view runs; per-user limits are the quota's targets per job (jobs.quotas).
# Still bounded: every file of a request is parsed into a temporary file before the view runs.
# 1,100: 1,000 targets plus their source photos; bigger sets belong in a folder on the cluster.
DATA_UPLOAD_MAX_NUMBER_FILES = envint("DATA_UPLOAD_MAX_NUMBER_FILES", "1100")
# Request bodies, refused before they are read (portal/limits.py), and the web server's timeouts
# (portal/server.py); docs/security.md. Bytes of body per request: not logged in (a login form),
REQUEST_MAX_BYTES_ANONYMOUS = envint("REQUEST_MAX_BYTES_ANONYMOUS", str(64 * 1024))
#: logged in, anywhere but Start,
REQUEST_MAX_BYTES = envint("REQUEST_MAX_BYTES", str(16 * 1024**2))
#: logged in, to Start (pages and API): all files of the job and the form
UPLOAD_REQUEST_MAX_BYTES = envint("UPLOAD_REQUEST_MAX_BYTES", str(4 * 1024**3))
if not 0 < REQUEST_MAX_BYTES_ANONYMOUS <= REQUEST_MAX_BYTES <= UPLOAD_REQUEST_MAX_BYTES:
    raise ImproperlyConfigured("need 0 < REQUEST_MAX_BYTES_ANONYMOUS <= REQUEST_MAX_BYTES <= UPLOAD_REQUEST_MAX_BYTES")
#: seconds: an idle connection (between requests, or before the first) is closed. Behind nginx it
#: must be longer than nginx's upstream `keepalive_timeout` (4 s in deploy/nginx/): see there.
HTTP_KEEP_ALIVE_TIMEOUT = envfloat("HTTP_KEEP_ALIVE_TIMEOUT", "5")
#: seconds a request's headers may take, from its first byte to the last header
HTTP_HEADERS_TIMEOUT = envfloat("HTTP_HEADERS_TIMEOUT", "10")
#: seconds a request body may pause; past that grace it must average HTTP_BODY_MIN_RATE bytes/s
HTTP_BODY_TIMEOUT = envfloat("HTTP_BODY_TIMEOUT", "30")
HTTP_BODY_MIN_RATE = envint("HTTP_BODY_MIN_RATE", "1024")
#: seconds between WebSocket pings, and for the pong: a peer that stops answering is closed
WS_PING_INTERVAL = envfloat("WS_PING_INTERVAL", "20")
WS_PING_TIMEOUT = envfloat("WS_PING_TIMEOUT", "20")
if min(HTTP_KEEP_ALIVE_TIMEOUT, HTTP_HEADERS_TIMEOUT, HTTP_BODY_TIMEOUT, HTTP_BODY_MIN_RATE, WS_PING_INTERVAL,
       WS_PING_TIMEOUT) <= 0:
    raise ImproperlyConfigured("the HTTP_* and WS_PING_* timeouts and HTTP_BODY_MIN_RATE must be above 0")

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
# Jobs in RQ are JSON, not pickles (a job planted in Redis must never run code when read): the
# queue's serializer, which jobs.background.enqueue, the rqworker command (--serializer) and tests all use.
RQ_SERIALIZER = "rq.serializers.JSONSerializer"
RQ_QUEUES = {"default": {"URL": REDIS_URL, "DEFAULT_TIMEOUT": 900, "SERIALIZER": RQ_SERIALIZER}}
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        # redis-py 8 times out socket reads after 5 s, exactly the layer's blocking BZPOPMIN: without
        # a longer timeout every idle socket dies (django/channels_redis#422). Finite, so a frozen
        # Redis cannot hang the watcher's publishing forever.
        "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 10}]},
    }
}

#: seconds between two polls of a cluster by the watcher (a cycle with 100 active jobs costs well
#: under that now that sacct runs only for jobs that left the queue: bench/watcher_cycle.py)
WATCH_INTERVAL = envfloat("WATCH_INTERVAL", "2")
#: whether Start enqueues the submission (tests of pure views can turn it off)
SUBMIT_ON_START = envbool("SUBMIT_ON_START", "true")
#: TESTS ONLY: {attempt: MB} makes the worker of that attempt allocate and hold MB of memory before
#: it processes anything (env FFP_TEST_ALLOCATE_MB in the batch script), so a test can exceed the
#: task's --mem. Deliberately not read from the environment: only a test's settings can set it.
FFP_TEST_ALLOCATE_MB: dict = {}

# Email (job ended, quota at 80 %/100 %): sent by the RQ worker, never in a request. With
# EMAIL_HOST set mail goes out over SMTP; without it, it is printed by the worker (console).
EMAIL_HOST = os.environ.get("EMAIL_HOST", "")
EMAIL_PORT = envint("EMAIL_PORT", "25")
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = envbool("EMAIL_USE_TLS", "false")  # STARTTLS, usually port 587
EMAIL_USE_SSL = envbool("EMAIL_USE_SSL", "false")  # TLS from the first byte, usually port 465
if EMAIL_USE_TLS and EMAIL_USE_SSL:
    raise ImproperlyConfigured("EMAIL_USE_TLS and EMAIL_USE_SSL are exclusive: set one of them")
EMAIL_TIMEOUT = envint("EMAIL_TIMEOUT", "10")  # seconds: a hung SMTP server must not hold a worker
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "FaceFusion Portal <portal@localhost>")
SERVER_EMAIL = DEFAULT_FROM_EMAIL
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND") or (
    "django.core.mail.backends.smtp.EmailBackend" if EMAIL_HOST else "django.core.mail.backends.console.EmailBackend")

# Webhooks (jobs.webhooks): signed calls to a job's or booking's callback_url, sent by the RQ worker.
#: seconds to connect, and again to read the answer: a slow receiver must not hold a worker
WEBHOOK_TIMEOUT = envfloat("WEBHOOK_TIMEOUT", "5")
#: networks (comma-separated CIDRs) callbacks may reach although private, loopback or link-local;
#: empty: only public addresses (a callback must never become a way into the portal's own network)
WEBHOOK_ALLOWED_NETWORKS = envlist("WEBHOOK_ALLOWED_NETWORKS")
#: hours a failing call is retried (backoff 30 s, 2 min, 10 min, 30 min, 1 h, then every 2 h)
WEBHOOK_MAX_AGE = envfloat("WEBHOOK_MAX_AGE", "24")

# Health and metrics (jobs.ops, docs/operations.md). /metrics answers a request with
# "Authorization: Bearer <METRICS_TOKEN>", or from METRICS_ALLOWED_NETWORKS (comma-separated CIDRs)
# when not proxied; with neither set it is off (403).
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "").strip()
if METRICS_TOKEN and len(METRICS_TOKEN) < 24:
    raise ImproperlyConfigured("METRICS_TOKEN must be at least 24 characters (e.g. python -c 'import secrets; "
                               "print(secrets.token_urlsafe(32))')")
METRICS_ALLOWED_NETWORKS = envnetworks("METRICS_ALLOWED_NETWORKS", "10.0.0.0/8")
# Several processes (ASGI, RQ workers, watcher) share their metrics through this directory, which
# prometheus_client reads from the environment itself; it must exist (emptied at each start).
PROMETHEUS_MULTIPROC_DIR = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
if PROMETHEUS_MULTIPROC_DIR and not Path(PROMETHEUS_MULTIPROC_DIR).is_dir():
    raise ImproperlyConfigured(f"PROMETHEUS_MULTIPROC_DIR={PROMETHEUS_MULTIPROC_DIR} is not a directory")
#: /readyz fails when the watcher's last cycle of an active profile is older than this (seconds)
READY_WATCHER_MAX_AGE = envfloat("READY_WATCHER_MAX_AGE", "120")

# Django's cache: wrong-API-token counters (jobs.ratelimit). Redis, shared by every web process, so
# a guesser cannot spread attempts over workers; its own key prefix.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": os.environ.get("CACHE_KEY_PREFIX", "ffportal-cache"),
        # JSON, never pickle: a value planted in Redis is refused, not run (portal/serializers.py).
        "OPTIONS": {"serializer": "portal.serializers.CacheJSONSerializer"},
    }
}
# Failed logins (django-axes), wrong API tokens, the Content-Security-Policy: portal/settings_security.py.

# Error pages and error mails: also hide POSTed private keys and passwords, Authorization headers.
DEFAULT_EXCEPTION_REPORTER_FILTER = "portal.redact.SecretsExceptionReporterFilter"
# Logs (portal.logs): one JSON object per line with the request, user, job, Slurm job and task ids
# (LOG_FORMAT=json, production's default), or plain text lines (a checkout's and the tests'); both
# pass every line through the redaction filter (portal.redact) first.
LOG_FORMAT = os.environ.get("LOG_FORMAT", "plain" if DEBUG else "json")
try:
    from portal.logs import logging_config

    LOGGING = logging_config(LOG_FORMAT, os.environ.get("LOG_LEVEL", "INFO"))
except ValueError as exc:
    raise ImproperlyConfigured(str(exc)) from None

# Cookies only over HTTPS in production. A plain-HTTP lab says so explicitly with
# ALLOW_INSECURE_COOKIES=true (jobs.checks refuses insecure cookies otherwise).
SESSION_COOKIE_SECURE = envbool("SESSION_COOKIE_SECURE", "false" if DEBUG else "true")
CSRF_COOKIE_SECURE = envbool("CSRF_COOKIE_SECURE", "false" if DEBUG else "true")
ALLOW_INSECURE_COOKIES = envbool("ALLOW_INSECURE_COOKIES", "false")
