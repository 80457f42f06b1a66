"""Who is calling the JSON API: a token (`Authorization: Token <key>`) or the browser session.

`api_view(...)` wraps every API view and gives it one contract:

- a method the view does not take -> 405 `{"error"}` with an `Allow` header;
- a `Token` Authorization header decides alone: a valid key always works (it is checked first,
  so nobody else's wrong keys can refuse it); a wrong or revoked key is 401, never a fallback to
  the session, and 429 once its address has sent more than API_TOKEN_FAILURES_PER_IP wrong keys
  within API_TOKEN_FAILURE_WINDOW (jobs.ratelimit). Token requests carry no cookie a browser
  would send on its own, so they are exempt from CSRF;
- otherwise the session: anonymous -> 401, and an unsafe method (POST ...) must pass Django's
  CSRF check exactly as a form would (403 when it does not), so the API opens no CSRF hole;
- request bodies Django refuses to parse (too many files or fields, broken multipart) -> 400 JSON.
"""
from __future__ import annotations

import functools
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.middleware.csrf import CsrfViewMiddleware
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.csrf import csrf_exempt

from jobs import ratelimit
from jobs.audit import client_ip
from jobs.models import ApiToken

#: last_used_at is written at most this often per token, so reads stay reads
LAST_USED_RESOLUTION = timedelta(minutes=1)
TOKEN_KEYWORD = "token"
SAFE_METHODS = ("GET", "HEAD", "OPTIONS", "TRACE")
#: what Django raises when it refuses to parse a request body
UNREADABLE_BODY = (RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent, MultiPartParserError)


def error(message: str, status: int, field: str | None = None, **headers) -> JsonResponse:
    """The API's one error shape: `{"error": "...", "field": "..."}`, field only when one is at fault."""
    body = {"error": str(message)}
    if field:
        body["field"] = field
    response = JsonResponse(body, status=status)
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


def unauthorized(message: str) -> JsonResponse:
    return error(message, 401, WWW_Authenticate="Token")


def unreadable(exc: Exception) -> JsonResponse:
    return error(_("The request could not be read: %(why)s") % {"why": exc}, 400)


def token_from_header(request) -> str | None:
    """The key of a `Token` Authorization header; None when there is no such header.

    Other schemes (Basic from a proxy in front of the portal ...) are not ours: they are ignored
    and the session decides. A `Token` header without exactly one key gives "" (refused).
    """
    parts = request.headers.get("Authorization", "").split()
    if not parts or parts[0].lower() != TOKEN_KEYWORD:
        return None
    return parts[1] if len(parts) == 2 else ""


def token_for(key: str) -> ApiToken | None:
    # The same lookup as ApiToken.user_for, kept here because last_used_at needs the token row.
    return ApiToken.objects.select_related("user").filter(key_hash=ApiToken.hash(key), user__is_active=True).first()


def refused_token(request) -> JsonResponse:
    """The answer to a wrong key: 401, or 429 once its address has sent too many."""
    if ratelimit.register_token_failure(client_ip(request), request):
        minutes = max(1, settings.API_TOKEN_FAILURE_WINDOW // 60)
        return error(ngettext("Too many wrong API tokens from your address. Try again in %(minutes)d minute.",
                              "Too many wrong API tokens from your address. Try again in %(minutes)d minutes.",
                              minutes) % {"minutes": minutes}, 429,
                     Retry_After=str(settings.API_TOKEN_FAILURE_WINDOW))
    return unauthorized(_("That API token is not valid (wrong, revoked, or its user is inactive)."))


def touch(token: ApiToken) -> None:
    """Record use, at most once a minute per token (conditional update: concurrent calls write once)."""
    now = timezone.now()
    if token.last_used_at and now - token.last_used_at < LAST_USED_RESOLUTION:
        return
    ApiToken.objects.filter(pk=token.pk, last_used_at=token.last_used_at).update(last_used_at=now)
    token.last_used_at = now


class _CsrfCheck(CsrfViewMiddleware):
    def _reject(self, request, reason):
        return reason  # the reason instead of Django's HTML page; the API answers JSON


def csrf_failure(request) -> str | None:
    """Django's own CSRF check (Origin/Referer, cookie vs header or form token); the reason on failure."""
    check = _CsrfCheck(lambda req: None)
    check.process_request(request)
    return check.process_view(request, None, (), {})


def api_view(*methods: str):
    """Decorate an API view: methods it takes, authentication, CSRF for sessions, JSON errors."""
    allowed = tuple(m.upper() for m in methods)

    def decorate(view):
        @csrf_exempt  # the middleware must not judge token requests; sessions are checked below
        @functools.wraps(view)
        def wrapper(request, *args, **kwargs):
            if request.method not in allowed:
                return error(_("Method %(method)s is not allowed here; use %(allowed)s.")
                             % {"method": request.method, "allowed": ", ".join(allowed)}, 405, Allow=", ".join(allowed))
            key = token_from_header(request)
            if key is not None:
                token = token_for(key) if key else None
                if token is None:
                    return refused_token(request)
                touch(token)
                request.user = token.user
            elif not request.user.is_authenticated:
                return unauthorized(_("Log in, or send an API token: Authorization: Token <key>."))
            elif request.method not in SAFE_METHODS:
                try:
                    reason = csrf_failure(request)
                except UNREADABLE_BODY as exc:
                    return unreadable(exc)
                if reason:
                    return error(_("CSRF check failed (%(reason)s). Send the csrftoken cookie's value in the "
                                   "X-CSRFToken header, or use an API token.") % {"reason": reason}, 403)
            try:
                return view(request, *args, **kwargs)
            except UNREADABLE_BODY as exc:
                return unreadable(exc)

        return wrapper

    return decorate
