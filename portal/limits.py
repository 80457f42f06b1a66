"""Request bodies: how large, and how fast, decided before Django reads them (ASGI middleware).

Django's ASGI handler reads a whole body into a temporary file before any view runs, so no view
can refuse an upload it does not want: by then it has arrived. `RequestLimits` decides from the
headers, then from the bytes as they stream in:

- Size. Someone not logged in may send REQUEST_MAX_BYTES_ANONYMOUS (64 KiB): a login form, at
  most. A logged-in caller (a valid session cookie, or a valid `Authorization: Token`, which then
  decides alone, as in the API) may send REQUEST_MAX_BYTES anywhere, and UPLOAD_REQUEST_MAX_BYTES
  to the Start endpoints that take files (UPLOAD_URL_NAMES). The caller is looked up (one or two
  indexed queries) only when a body passes the anonymous limit; ordinary requests cost nothing,
  and a forged cookie or token gets the anonymous limit. A declared Content-Length over the limit
  is answered 413 before a byte of the body is read; a chunked body gets 413 the moment it passes
  the limit. The answer says `Connection: close`, so the rest of the body is never read.
- Pace. While the application waits for the body, a pause longer than HTTP_BODY_TIMEOUT seconds,
  or an average under HTTP_BODY_MIN_RATE bytes a second after that grace, ends it with 408: a
  client trickling a byte now and then cannot hold a connection and a request for ever.

Once the body is complete, nothing here touches the request or its response.
"""
from __future__ import annotations

import asyncio
import io
import json
from importlib import import_module
from types import SimpleNamespace

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import get_user
from django.core.handlers.asgi import ASGIRequest
from django.http import parse_cookie
from django.template.defaultfilters import filesizeformat
from django.urls import Resolver404, resolve
from django.utils import translation
from django.utils.translation import gettext as _

from jobs.models import ApiToken

#: the routes that take uploaded files (Start in the pages and in the API): only these get
#: UPLOAD_REQUEST_MAX_BYTES, and only for a logged-in caller
UPLOAD_URL_NAMES = frozenset({"job-new", "api-jobs"})
#: where errors are JSON (`{"error": ...}`, docs/api.md) rather than text
API_PREFIX = "/api/"
_DISCONNECT = {"type": "http.disconnect"}


class RequestLimits:
    """ASGI middleware for HTTP: the size and pace rules of the module docstring. Other scopes pass."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        guard = _BodyGuard(scope, receive, send)
        if await guard.refused_from_headers():
            return
        await self.app(scope, guard.receive, guard.send)


class _BodyGuard:
    """One request: its limit (anonymous until the caller is looked up), what arrived, how long it took."""

    def __init__(self, scope, receive, send):
        self.scope = scope
        self._receive = receive
        self._send = send
        self.limit = settings.REQUEST_MAX_BYTES_ANONYMOUS
        self.caller_known = False
        self.logged_in = False
        self.received = 0
        self.waited = 0.0
        self.complete = False
        self.refused = False
        self.response_started = False

    async def refused_from_headers(self) -> bool:
        declared = content_length(self.scope["headers"])
        if declared is not None and declared > self.limit:
            await self._know_caller()
            if declared > self.limit:
                await self._answer(413)
                return True
        return False

    async def receive(self):
        if self.refused:
            return _DISCONNECT
        if self.complete:
            return await self._receive()  # Django listening for a disconnect while it answers
        loop = asyncio.get_running_loop()
        timeout = settings.HTTP_BODY_TIMEOUT
        allowed = min(timeout, timeout + self.received / settings.HTTP_BODY_MIN_RATE - self.waited)
        started = loop.time()
        try:
            async with asyncio.timeout(max(allowed, 0)):
                message = await self._receive()
        except TimeoutError:
            await self._answer(408)
            return _DISCONNECT
        finally:
            self.waited += loop.time() - started
        if message["type"] != "http.request":
            return message
        self.received += len(message.get("body", b""))
        if self.received > self.limit:
            await self._know_caller()
            if self.received > self.limit:
                await self._answer(413)
                return _DISCONNECT  # Django's read_body stops here (RequestAborted), quietly
        if not message.get("more_body", False):
            self.complete = True
        return message

    async def send(self, message):
        if self.refused:
            return  # the application is being told the client left; nothing of it goes out
        if message["type"] == "http.response.start":
            self.response_started = True
        await self._send(message)

    async def _know_caller(self) -> None:
        if self.caller_known:
            return
        self.caller_known = True
        self.logged_in = await database_sync_to_async(is_logged_in)(self.scope["headers"])
        if self.logged_in:
            self.limit = settings.UPLOAD_REQUEST_MAX_BYTES if is_upload(self.scope) else settings.REQUEST_MAX_BYTES

    async def _answer(self, status: int) -> None:
        """The refusal, unless the application already answered; either way the request ends here."""
        self.refused = True
        if self.response_started:
            return
        with translation.override(_language(self.scope)):
            if status == 408:
                text = _("The request arrived too slowly and was cut off. Send it again.")
            elif self.logged_in:
                text = _("This request is too large: at most %(limit)s may be sent here.") % {
                    "limit": filesizeformat(self.limit)}
            else:
                text = _("This request is too large (over %(limit)s). Log in to send files.") % {
                    "limit": filesizeformat(self.limit)}
        if _path(self.scope).startswith(API_PREFIX):
            body, kind = json.dumps({"error": text}).encode(), b"application/json"
        else:
            body, kind = text.encode() + b"\n", b"text/plain; charset=utf-8"
        await self._send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", kind), (b"content-length", str(len(body)).encode()),
            # The server closes after the answer: what is left of the body is never read.
            (b"connection", b"close")]})
        await self._send({"type": "http.response.body", "body": body})


def content_length(headers) -> int | None:
    """The declared body size; None when there is none (a chunked body, or a malformed header
    the server lets through): such a body is counted as it arrives instead."""
    for name, value in headers:
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


def is_logged_in(headers) -> bool:
    """Whether the request's credentials name an active user: a `Token` Authorization header
    alone when there is one (as in the API), else the session cookie, checked as Django's
    AuthenticationMiddleware would (session hash included)."""
    values = dict(headers)
    auth = values.get(b"authorization", b"").decode("latin-1").split()
    if auth and auth[0].lower() == "token":
        return len(auth) == 2 and ApiToken.user_for(auth[1]) is not None
    cookies = parse_cookie("; ".join(v.decode("latin-1") for n, v in headers if n == b"cookie"))
    key = cookies.get(settings.SESSION_COOKIE_NAME)
    if not key:
        return False
    store = import_module(settings.SESSION_ENGINE).SessionStore(key)
    return get_user(SimpleNamespace(session=store)).is_authenticated


def is_upload(scope) -> bool:
    if scope["method"] != "POST":
        return False
    try:
        return resolve(_path(scope)).url_name in UPLOAD_URL_NAMES
    except Resolver404:
        return False


def _path(scope) -> str:
    path, root = scope["path"], scope.get("root_path", "")
    return path[len(root):] if root and path.startswith(root) else path


def _language(scope) -> str:
    # Django's own choice (language cookie, then Accept-Language), from the headers alone.
    try:
        return translation.get_language_from_request(ASGIRequest(scope, io.BytesIO()))
    except (UnicodeDecodeError, ValueError):  # headers Django cannot read: the site's language
        return settings.LANGUAGE_CODE
