"""Every request gets an id: in its log lines, its audit entries and its response's X-Request-ID.

nginx makes one per request (`proxy_set_header X-Request-ID $request_id;`, deploy/), so its access
log and the portal's lines share it; without nginx (make up) the portal makes its own. An incoming
id is kept only when it looks like one (`SANE_ID`): a header is client input, and a newline or a
kilobyte of text in it would end up in every log line and audit entry of the request.

The request's context (jobs.log_context) is open while the rest of the middleware and the view run; the
user id joins the lines as soon as authentication has resolved the user (session or API token).
One access line per request (logger portal.access; written in JSON mode, see portal.logs) gives
method, path (never the query string: it may hold a token), status and milliseconds.
"""
from __future__ import annotations

import logging
import re
import time
import uuid

from jobs.log_context import log_context

__all__ = ["HEADER", "SANE_ID", "request_id_from", "RequestIdMiddleware"]

log = logging.getLogger("portal.access")

HEADER = "X-Request-ID"
#: what an incoming id may look like: nginx's $request_id (32 hex digits), a UUID, most tracers' ids
SANE_ID = re.compile(r"[A-Za-z0-9._:-]{8,64}\Z")


def request_id_from(incoming: str | None) -> str:
    """The incoming id when it is sane, else a fresh one (32 hex digits, like nginx's)."""
    if incoming and SANE_ID.match(incoming):
        return incoming
    return uuid.uuid4().hex


class RequestIdMiddleware:
    """Near the top of settings.MIDDLEWARE: every later middleware's and the view's lines carry the id."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request.request_id = request_id_from(request.META.get("HTTP_X_REQUEST_ID"))
        started = time.monotonic()
        with log_context(request=request, request_id=request.request_id):
            response = self.get_response(request)
            response[HEADER] = request.request_id
            log.info("%s %s %s", request.method, request.path, response.status_code,
                     extra={"method": request.method, "path": request.path, "status": response.status_code,
                            "duration_ms": round((time.monotonic() - started) * 1000, 1)})
        return response
