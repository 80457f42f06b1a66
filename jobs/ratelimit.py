"""Failed-login and wrong-API-token counters: password and token guessing is refused after a few tries.

Counted in Django's cache (Redis, settings.CACHES: shared by every web process), one counter per
user name and one per client IP, each living LOGIN_FAILURE_WINDOW seconds from its first failure
(a fixed window: failures while refused are not counted, so the lock ends on time).

    if login_locked(username, ip): refuse without checking the password
    register_login_failure(username, ip, request)    # after a wrong password
    clear_user_failures(username)                    # after a good one (the IP counter stays)

When Redis cannot be reached, attempts are NOT limited (logged as a warning): a Redis restart
must not lock every user out. The moment a counter reaches its limit is written to the audit log ("auth.locked_out").
"""
from __future__ import annotations

import hashlib
import logging

from django.conf import settings
from django.core.cache import cache
from django.utils.translation import gettext_lazy as _

from jobs import audit

log = logging.getLogger(__name__)

__all__ = ["LOCKED_MESSAGE", "login_locked", "register_login_failure", "clear_user_failures",
           "token_locked", "register_token_failure"]

LOCKED_MESSAGE = _("Too many failed logins. Try again in 15 minutes.")


def _key(kind: str, value: str) -> str:
    # Hashed: user names may hold characters a cache key must not (spaces, control characters).
    return f"ratelimit:{kind}:" + hashlib.sha256(value.strip().lower().encode()).hexdigest()[:32]


def _count(key: str) -> int:
    try:
        return int(cache.get(key) or 0)
    except Exception:  # noqa: BLE001 - see _hit
        log.warning("ratelimit: the cache (Redis) cannot be read; login attempts are not limited now", exc_info=True)
        return 0


def _hit(key: str) -> int:
    """Add one failure; the window starts at the first (add() does not overwrite, incr keeps the expiry).

    A Redis outage (a restart) must not lock everybody out of the portal: counting fails open,
    loudly in the log, and returns 0."""
    try:
        cache.add(key, 0, timeout=settings.LOGIN_FAILURE_WINDOW)
        try:
            return cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.set(key, 1, timeout=settings.LOGIN_FAILURE_WINDOW)
            return 1
    except Exception:  # noqa: BLE001 - redis.ConnectionError and friends
        log.warning("ratelimit: the cache (Redis) cannot be written; this failure is not counted", exc_info=True)
        return 0


def login_locked(username: str, ip: str | None) -> bool:
    if username and _count(_key("user", username)) >= settings.LOGIN_FAILURES_PER_USER:
        return True
    return bool(ip) and _count(_key("ip", ip)) >= settings.LOGIN_FAILURES_PER_IP


def register_login_failure(username: str, ip: str | None, request=None) -> None:
    if username and _hit(_key("user", username)) == settings.LOGIN_FAILURES_PER_USER:
        audit.record(None, "auth.locked_out", request=request, details={
            "username": username[:150], "by": "user", "failures": settings.LOGIN_FAILURES_PER_USER})
    if ip and _hit(_key("ip", ip)) == settings.LOGIN_FAILURES_PER_IP:
        audit.record(None, "auth.locked_out", request=request, details={
            "username": username[:150], "by": "ip", "failures": settings.LOGIN_FAILURES_PER_IP})


def clear_user_failures(username: str) -> None:
    try:
        cache.delete(_key("user", username))
    except Exception:  # noqa: BLE001 - see _hit
        log.warning("ratelimit: the cache (Redis) cannot be written", exc_info=True)


def token_locked(ip: str | None) -> bool:
    return bool(ip) and _count(_key("token-ip", ip)) >= settings.API_TOKEN_FAILURES_PER_IP


def register_token_failure(ip: str | None, request=None) -> None:
    if ip and _hit(_key("token-ip", ip)) == settings.API_TOKEN_FAILURES_PER_IP:
        audit.record(None, "auth.token_locked_out", request=request,
                     details={"by": "ip", "failures": settings.API_TOKEN_FAILURES_PER_IP})
