"""One HTTP POST to a checked callback (`guard.CheckedCallback`): connected to the address the guard
checked, never to a second DNS answer; no redirects, no proxies, short timeouts, at most
`MAX_RESPONSE_BYTES` of the answer read. `post` is the seam tests may replace."""
from __future__ import annotations

import dataclasses
import http.client
import socket
import ssl
import time

from jobs.webhooks.guard import CheckedCallback

__all__ = ["MAX_RESPONSE_BYTES", "Response", "post"]

#: the most of a receiver's answer the portal reads (it is only shown as a hint when a call fails)
MAX_RESPONSE_BYTES = 4096


@dataclasses.dataclass(frozen=True)
class Response:
    status: int
    location: str  # the Location header of a 3xx ("" otherwise)
    body: bytes  # at most MAX_RESPONSE_BYTES
    duration_ms: int


class _PinnedHTTP(http.client.HTTPConnection):
    """HTTP to `address`, with `host` in the Host header."""

    def __init__(self, callback: CheckedCallback, timeout: float):
        super().__init__(callback.host, callback.port, timeout=timeout)
        self._address = callback.address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _PinnedHTTPS(http.client.HTTPSConnection):
    """HTTPS to `address`, with `host` in the Host header and as the TLS server name (certificate
    checked against the name, as a browser would)."""

    def __init__(self, callback: CheckedCallback, timeout: float):
        super().__init__(callback.host, callback.port, timeout=timeout, context=ssl.create_default_context())
        self._address = callback.address

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


def post(callback: CheckedCallback, body: bytes, headers: dict[str, str], timeout: float) -> Response:
    """POST `body`; the answer's status, Location and first bytes. OSError (timeouts, refused
    connections, TLS errors) and http.client.HTTPException propagate to the caller."""
    connection = (_PinnedHTTPS if callback.scheme == "https" else _PinnedHTTP)(callback, timeout)
    started = time.monotonic()
    try:
        connection.request("POST", callback.path, body=body, headers=headers)
        answer = connection.getresponse()
        data = answer.read(MAX_RESPONSE_BYTES)
        return Response(answer.status, answer.getheader("Location", "") or "", data,
                        int((time.monotonic() - started) * 1000))
    finally:
        connection.close()
