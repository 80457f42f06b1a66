"""Which pages may open a live WebSocket: this site's own, exactly (scheme, host and port).

Browsers send cookies with a cross-site WebSocket and there is no CSRF token on it, so the
Origin header is the one defence against another site's page opening a socket with a visitor's
session (cross-site WebSocket hijacking). Channels' AllowedHostsOriginValidator compares the
host only: a page on another port of the same host (another user's server at
http://localhost:9999) passed. Here the Origin must equal the origin the browser reached the
socket at (the Host header, with ws -> http and wss -> https), or be listed in
CSRF_TRUSTED_ORIGINS (a TLS-terminating proxy in front: list the public origin there), like
Django's own CSRF origin check.
"""
from __future__ import annotations

from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings

_DEFAULT_PORTS = {"http": 80, "https": 443}


def normal_origin(text: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an origin such as "https://Portal.example.org"; None when malformed."""
    try:
        parts = urlsplit(text.strip())
        scheme, host, port = parts.scheme.lower(), (parts.hostname or "").lower(), parts.port
    except ValueError:  # a port that is not a number
        return None
    if scheme not in _DEFAULT_PORTS or not host or parts.path not in ("", "/") or parts.query or parts.username:
        return None
    return scheme, host, port or _DEFAULT_PORTS[scheme]


def is_same_origin(scope) -> bool:
    headers = dict(scope.get("headers") or [])
    origin = normal_origin(headers.get(b"origin", b"").decode("latin-1"))
    host = headers.get(b"host", b"").decode("latin-1")
    if origin is None or not host:
        return False
    scheme = "https" if scope.get("scheme") in ("wss", "https") else "http"
    if origin == normal_origin(f"{scheme}://{host}"):
        return True
    return origin in {normal_origin(o) for o in settings.CSRF_TRUSTED_ORIGINS}


class SameOriginValidator:
    """ASGI middleware for WebSockets: refuse (HTTP 403 on the handshake) unless `is_same_origin`."""

    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket" and not is_same_origin(scope):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)
