"""A live-events WebSocket for the tests that go through nginx over TLS (wss://), read and written
by ONE thread.

websockets' sync client reads its socket in a background thread while the caller's thread writes
to it. Over TLS that is one OpenSSL connection used by two threads at once, which OpenSSL does not
support: TLS 1.3 servers (nginx) send their session tickets right after the handshake, just as the
client sends its HTTP upgrade, and now and then the request never arrived. Measured on this
machine (bench/wss_handshakes.py, two busy loops beside it): 4 of 1,800 handshakes through nginx
got no answer in 3 s with the sync client, 0 of 1,800 with this one; in earlier runs 4 more of
1,900 with the sync client over TLS 1.3, 0 of 1,500 over TLS 1.2 (no tickets). nginx had logged
nothing and no ASGI process had seen a request: the portal was never asked. Browsers do not share
a TLS connection between threads, so the portal itself had nothing to fix.

This client is websockets' asyncio one (its TLS runs in the event loop, one thread) on a loop of
its own, with the few blocking calls the tests use: `recv(timeout)`, `send(text)`, `close()`.
"""
from __future__ import annotations

import asyncio
import threading

from websockets.asyncio.client import connect


class LiveSocket:
    def __init__(self, url: str, *, ssl=None, origin: str | None = None, headers: dict | None = None,
                 open_timeout: float = 30):
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="live-socket", daemon=True)
        self._thread.start()
        try:
            self._ws = self._run(self._open(url, ssl=ssl, origin=origin, additional_headers=headers,
                                            open_timeout=open_timeout, proxy=None))
        except BaseException:
            self._stop()
            raise

    def recv(self, timeout: float | None = None) -> str | bytes:
        """The next message; TimeoutError after `timeout` seconds, ConnectionClosed once closed."""
        return self._run(asyncio.wait_for(self._ws.recv(), timeout))

    def send(self, message: str | bytes) -> None:
        self._run(asyncio.wait_for(self._ws.send(message), 30))

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self._run(asyncio.wait_for(self._ws.close(), 30))
        finally:
            self._stop()

    def __enter__(self) -> "LiveSocket":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @staticmethod
    async def _open(url: str, **options):
        return await connect(url, **options)

    def _run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()
