"""System checks run at every start-up (runserver, migrate, the worker's management commands).

`check_production_settings` refuses (Error, so `manage.py` commands stop with the message) an
insecure production configuration: with DEBUG off, the dev SECRET_KEY or a short one,
ALLOWED_HOSTS "*", or session/CSRF cookies sent over plain HTTP. A plain-HTTP lab says so with
ALLOW_INSECURE_COOKIES=true. Registered with deploy=False on purpose: Django's own
`check --deploy` is opt-in and nobody runs it; this runs always.
"""
from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.core.exceptions import ImproperlyConfigured

#: shorter keys are refused in production (Django's own deploy check asks for 50; 40 is our floor)
MIN_SECRET_KEY_LENGTH = 40


@register(Tags.security, deploy=False)
def check_production_settings(app_configs=None, **kwargs) -> list[Error]:
    if settings.DEBUG:
        return []
    errors = []
    key = settings.SECRET_KEY or ""
    if key == getattr(settings, "DEV_SECRET_KEY", None) or key.startswith("django-insecure"):
        errors.append(Error("SECRET_KEY is the development key, and DEBUG is off.",
                            hint="Set SECRET_KEY to a long random value, e.g. the output of "
                                 "`python -c 'import secrets; print(secrets.token_urlsafe(50))'`.",
                            id="jobs.E001"))
    elif len(key) < MIN_SECRET_KEY_LENGTH:
        errors.append(Error(f"SECRET_KEY is {len(key)} characters long; production needs at least "
                            f"{MIN_SECRET_KEY_LENGTH}.", hint="Set SECRET_KEY to a long random value.", id="jobs.E002"))
    if "*" in settings.ALLOWED_HOSTS:
        errors.append(Error('ALLOWED_HOSTS contains "*": any Host header is accepted (password-reset and '
                            "link poisoning).", hint="List the portal's host names in ALLOWED_HOSTS.", id="jobs.E003"))
    if not getattr(settings, "ALLOW_INSECURE_COOKIES", False):
        for name in ("SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE"):
            if not getattr(settings, name, False):
                errors.append(Error(f"{name} is off, and DEBUG is off: the cookie would travel over plain HTTP.",
                                    hint=f"Serve the portal over HTTPS and set {name}=true, or, for a plain-HTTP "
                                         "lab only, set ALLOW_INSECURE_COOKIES=true.", id="jobs.E004"))
    return errors


@register(Tags.database, deploy=False)
def check_database_pool(app_configs=None, **kwargs) -> list[Warning]:
    """PostgreSQL in production without DATABASE_POOL_MAX: every thread of every process keeps a
    connection of its own. Under load (bench/load_run.py: 200 jobs, three users on the pages) the
    web processes held up to 72 of PostgreSQL's 100 and a page failed for want of one."""
    db = settings.DATABASES["default"]
    if settings.DEBUG or db["ENGINE"] != "django.db.backends.postgresql" or db.get("OPTIONS", {}).get("pool"):
        return []
    return [Warning("PostgreSQL without a connection pool (DATABASE_POOL_MAX is 0): each thread of each "
                    "process keeps its own connection, and a busy portal runs out of PostgreSQL's connections.",
                    hint="Set DATABASE_POOL_MAX=4 (deploy/env.example), and keep processes x DATABASE_POOL_MAX "
                         "under PostgreSQL's max_connections.", id="jobs.W001")]


def refuse_insecure_start() -> None:
    """Stop a server process (ASGI, WSGI, the watcher) from starting with what
    `check_production_settings` refuses. `manage.py` commands run the system checks themselves;
    an ASGI server importing the application does not, so the entry points call this."""
    errors = check_production_settings()
    if errors:
        lines = [f"{e.id}: {e.msg} {e.hint or ''}".strip() for e in errors]
        raise ImproperlyConfigured("refusing to start with an insecure production configuration:\n  "
                                   + "\n  ".join(lines))
