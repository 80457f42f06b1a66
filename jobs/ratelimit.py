"""Password and API-token guessing is slowed down per (who, where), never for everyone.

Logins: django-axes (settings AXES_*), on every path through django.contrib.auth.authenticate: the
portal's login page and the admin's. Its backend refuses a locked-out pair before any password is
checked; its database handler counts failures per (user name, client address) pair in the
database, which every web process shares. A guesser thus locks out only their own pair: the owner
still logs in from their own address. This module holds what axes calls back:

    username_of(request, credentials)  AXES_USERNAME_CALLABLE: the name as the login form cleans it
    cool_off(request)                  AXES_COOLOFF_TIME: how long the request's pair stays locked
    lockout_response(request, ...)     AXES_LOCKOUT_CALLABLE: the page that says so (429)
    locked_out(request, username, ip)  on axes' user_locked_out signal (jobs.signals): the audit entry
                                       "auth.locked_out", and the pair's attempts kept all that time

Lockouts grow: a pair's first lasts LOGIN_LOCKOUT_BASE seconds, each further one within
LOGIN_LOCKOUT_MAX seconds twice as long as the one before, none longer than LOGIN_LOCKOUT_MAX. The
lockouts are axes' own failure log rows marked locked_out (AXES_ENABLE_ACCESS_FAILURE_LOG).

API tokens: the key is checked first, so a valid token always works; only wrong keys are counted,
per client address, in Django's cache (Redis, shared by every web process), in a fixed window of
API_TOKEN_FAILURE_WINDOW seconds from the first. Past API_TOKEN_FAILURES_PER_IP, further wrong keys
from that address get 429 until the window ends ("auth.token_locked_out" in the audit log when the
limit is reached). When Redis cannot be reached, wrong keys are not limited (a warning is logged):
a Redis restart must not turn every mistyped token into a lockout.
"""
from __future__ import annotations

import hashlib
import logging
import math
import unicodedata
from datetime import timedelta

from axes.models import AccessAttempt, AccessAttemptExpiration, AccessFailureLog
from django.conf import settings
from django.core.cache import cache
from django.db.models import Max
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.timesince import timeuntil
from django.utils.translation import gettext as _

from jobs import audit

log = logging.getLogger(__name__)

__all__ = ["username_of", "cool_off", "lockout_duration", "lockout_message", "lockout_response", "locked_out",
           "register_token_failure"]

#: a pair's lockouts beyond this many do not double any more (LOGIN_LOCKOUT_MAX caps them long before)
MAX_DOUBLINGS = 32


# --- logins (django-axes) -------------------------------------------------------------------------

def username_of(request: HttpRequest | None, credentials: dict | None = None) -> str | None:
    """The user name an attempt is for, cleaned as the login form cleans it (stripped, NFKC), whether
    axes asks with the form's credentials or with the request alone: one name, one count."""
    if credentials:
        name = credentials.get("username")
    else:
        name = getattr(request, "POST", {}).get("username")
    if name is None:
        return None
    return unicodedata.normalize("NFKC", str(name).strip())[:255]


def _pair(request: HttpRequest) -> tuple[str | None, str | None]:
    ip = getattr(request, "axes_ip_address", None) or audit.client_ip(request)
    return username_of(request), ip


def lockouts(username: str | None, ip: str | None) -> int:
    """How many times this pair was locked out within the last LOGIN_LOCKOUT_MAX seconds."""
    since = timezone.now() - timedelta(seconds=settings.LOGIN_LOCKOUT_MAX)
    return AccessFailureLog.objects.filter(username=username, ip_address=ip, locked_out=True,
                                           attempt_time__gte=since).count()


def lockout_duration(number: int) -> timedelta:
    """How long a pair's `number`-th lockout lasts (1: its first)."""
    seconds = settings.LOGIN_LOCKOUT_BASE * 2 ** min(max(number - 1, 0), MAX_DOUBLINGS)
    return timedelta(seconds=min(seconds, settings.LOGIN_LOCKOUT_MAX))


def cool_off(request: HttpRequest | None = None) -> timedelta:
    """AXES_COOLOFF_TIME: the length of the request's pair's latest lockout, which is also how long
    its failures count (axes counts the failures younger than this)."""
    if request is None:
        return lockout_duration(1)
    return lockout_duration(max(lockouts(*_pair(request)), 1))


def remaining(request: HttpRequest) -> timedelta:
    """How much longer the request's pair is locked out (its latest failure plus its cool-off)."""
    username, ip = _pair(request)
    last = AccessAttempt.objects.filter(username=username, ip_address=ip).aggregate(last=Max("attempt_time"))["last"]
    if last is None:
        return timedelta(0)
    return max(last + cool_off(request) - timezone.now(), timedelta(0))


def lockout_message(request: HttpRequest, wait: timedelta | None = None) -> str:
    """The plain words for a refused login: how long to wait, in whole minutes (rounded up)."""
    wait = remaining(request) if wait is None else wait
    now = timezone.now()
    until = now + timedelta(minutes=max(1, math.ceil(wait.total_seconds() / 60)))
    return _("Too many failed logins. Try again in %(time)s.") % {"time": timeuntil(until, now)}


def lockout_response(request: HttpRequest, *args, **kwargs) -> HttpResponse:
    """AXES_LOCKOUT_CALLABLE: the page for a refused login, on the portal or the admin: 429, with
    Retry-After. Made from the request alone: axes 8.3.1 hands over the view's response from its
    synchronous middleware only (under ASGI it passes the credentials in its place)."""
    wait = remaining(request)
    in_admin = request.path.startswith(reverse("admin:index"))
    context = {"message": lockout_message(request, wait), "login_url": reverse("admin:login" if in_admin else "login")}
    response = render(request, "registration/locked_out.html", context, status=settings.AXES_HTTP_RESPONSE_CODE)
    response["Retry-After"] = str(max(1, math.ceil(wait.total_seconds())))
    return response


def locked_out(request: HttpRequest | None, username: str | None, ip_address: str | None) -> None:
    """On axes' user_locked_out. When this request's failure has just locked the pair out (not a
    refused attempt during a lockout, which axes signals too): the audit entry, and the pair's
    attempts kept until this lockout ends; axes set their expiry from the previous, shorter
    cool-off, and the first clean-up after it would end this lockout early."""
    failures = getattr(request, "axes_failures_since_start", None)
    if request is None or failures is None:
        return
    duration = lockout_duration(lockouts(username, ip_address) + 1)  # axes logs this lockout after the signal
    AccessAttemptExpiration.objects.filter(
        access_attempt__username=username, access_attempt__ip_address=ip_address,
    ).update(expires_at=request.axes_attempt_time + duration)
    audit.record(None, "auth.locked_out", request=request, details={
        "username": (username or "")[:150], "failures": failures, "seconds": int(duration.total_seconds())})


# --- API tokens (Django's cache) ------------------------------------------------------------------

def _key(kind: str, value: str) -> str:
    # Hashed: a cache key must not hold every character an address field may.
    return f"ratelimit:{kind}:" + hashlib.sha256(value.strip().lower().encode()).hexdigest()[:32]


def _count(key: str) -> int:
    try:
        return int(cache.get(key) or 0)
    except Exception:
        log.warning("ratelimit: the cache (Redis) cannot be read; wrong API tokens are not limited now", exc_info=True)
        return 0


def _hit(key: str) -> int:
    """Add one failure; the window starts at the first (add() does not overwrite, incr keeps the expiry).

    A Redis outage (a restart) fails open, loudly in the log, and returns 0."""
    try:
        cache.add(key, 0, timeout=settings.API_TOKEN_FAILURE_WINDOW)
        try:
            return cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.set(key, 1, timeout=settings.API_TOKEN_FAILURE_WINDOW)
            return 1
    except Exception:
        log.warning("ratelimit: the cache (Redis) cannot be written; this wrong token is not counted", exc_info=True)
        return 0


def register_token_failure(ip: str | None, request: HttpRequest | None = None) -> bool:
    """Count one wrong API token from `ip`; True when the address is past its limit (answer 429).

    Once past it, wrong tokens are not counted any more, so the window ends on time."""
    if not ip:
        return False
    key = _key("token-ip", ip)
    if _count(key) >= settings.API_TOKEN_FAILURES_PER_IP:
        return True
    if _hit(key) == settings.API_TOKEN_FAILURES_PER_IP:
        audit.record(None, "auth.token_locked_out", request=request,
                     details={"by": "ip", "failures": settings.API_TOKEN_FAILURES_PER_IP})
    return False
