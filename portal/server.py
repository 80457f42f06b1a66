"""The web server: what `make up` runs (scripts/up.sh), and what the browser tests and benches start.

    python -m portal.server --host 127.0.0.1 --port 8000 [--processes N]

uvicorn, with httptools for HTTP and websockets for WebSockets, because both honour flow control:
a request body is read from the socket only as fast as the application takes it (64 KiB at a
time), and a response waits for the client before the next piece is written. Daphne, before it,
read every body to its end and queued all of it for the application, and wrote responses without
waiting: memory grew by about twelve times an upload, and by the whole file for each slow download.

What uvicorn leaves out, `PortalHttpProtocol` adds: a connection that never sends a request is
closed like an idle keep-alive one; a request's headers must arrive in full within
HTTP_HEADERS_TIMEOUT seconds and within MAX_HEADER_BYTES; a request refused before its body was
read is closed gracefully (the answer first, then what is still coming is dropped for LINGER_S).
Body sizes and body pace are the ASGI middleware's (portal/limits.py); the numbers are settings
(docs/security.md).

One process serves every socket from one event loop, on one core: an event for a job watched by
500 pages is handed to 500 consumers and written to 500 sockets one after the other. `--processes N`
(env FFP_WEB_PROCESSES; default `default_processes()`) runs N such processes behind one listening
socket (uvicorn's supervisor; the kernel hands each new connection to one of them), so the fan-out
is spread over the cores (bench/ws_fanout.py: docs/scale.md). Each process keeps its own Django, its
own Redis connections and its own share of the sockets; the database and Redis are the shared state.
"""
from __future__ import annotations

import argparse
import faulthandler
import os
import signal
import sys
import warnings
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.supervisors.multiprocess import Multiprocess

#: request line plus headers; a request with more is refused (431) before it is parsed further.
#: httptools has no limit of its own, so a client streaming endless headers would grow the process.
MAX_HEADER_BYTES = 64 * 1024
#: incoming WebSocket messages (client to server only; what the server sends has no such limit).
#: A page only ever sends a small request (`resync`, `view`: well under 1 KiB), so nothing relies on
#: this number; it is set, rather than left to uvicorn's default (16 MiB), as a guard: a socket
#: may make the server hold at most this times WS_MAX_QUEUED_MESSAGES (512 KiB) before it stops
#: reading, and a larger message closes it with 1009.
WS_MAX_MESSAGE_BYTES = 64 * 1024
#: incoming WebSocket messages held for a consumer that is busy; beyond them the socket is not read
WS_MAX_QUEUED_MESSAGES = 8
#: seconds a stopping server gives open requests (a long download) before it closes them
GRACEFUL_SHUTDOWN_S = 5
#: seconds the server goes on reading, and dropping, what a client still sends after its body was
#: refused (413, 408) before the server closes. Closing with unread data resets the connection, and
#: a client still sending (a browser, most HTTP libraries) would lose the answer in the reset.
LINGER_S = 10


#: environment variable for the number of serving processes (`--processes` wins over it)
PROCESSES_ENV = "FFP_WEB_PROCESSES"
#: never more serving processes by default than this, whatever the cores: each one holds a whole
#: Django (96 MiB resident) and its own Redis connections, and 500 sockets' fan-out needed no more
#: than two (docs/scale.md); a bigger site sets FFP_WEB_PROCESSES
DEFAULT_PROCESSES_MAX = 2


def default_processes(environ: dict[str, str] | None = None) -> int:
    """FFP_WEB_PROCESSES when set, else one process per core up to DEFAULT_PROCESSES_MAX: the
    fan-out is CPU work in one event loop, so processes beyond the cores only add memory."""
    environ = os.environ if environ is None else environ
    value = environ.get(PROCESSES_ENV, "").strip()
    if not value:
        return max(1, min(os.cpu_count() or 1, DEFAULT_PROCESSES_MAX))
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{PROCESSES_ENV} must be a whole number of processes, 1 or more (got {value!r})")
    return int(value)


def command(port: int, host: str = "127.0.0.1", processes: int | None = 1) -> list[str]:
    """The command line that starts the portal's web server (scripts/up.sh runs the same module,
    with `--processes`). One process unless told: the tests that start it watch one process (its
    memory, its exit); `processes=None` leaves the number to the server (`default_processes`)."""
    argv = [sys.executable, "-m", "portal.server", "--host", host, "--port", str(port)]
    return argv + (["--processes", str(processes)] if processes is not None else [])


class PortalConfig(uvicorn.Config):
    """uvicorn's configuration plus the header limits `PortalHttpProtocol` reads from it."""

    def __init__(self, *args: Any, headers_timeout: float, max_header_bytes: int = MAX_HEADER_BYTES, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.headers_timeout = headers_timeout
        self.max_header_bytes = max_header_bytes

    def load(self) -> None:
        # Every serving process passes here (a worker process is spawned afresh and runs none of
        # `main`), just before the websockets protocol is imported, which is what warns:
        # uvicorn's websockets protocol is built on websockets' legacy API (pinned in
        # requirements.txt); the deprecation notice says nothing an operator can act on.
        warnings.filterwarnings("ignore", message="websockets.legacy is deprecated", category=DeprecationWarning)
        # `kill -USR1 <pid>` writes every thread's Python stack to the process's log (stderr): what a
        # server that stopped answering is waiting on, without stopping it (docs/deploy.md).
        faulthandler.register(signal.SIGUSR1, all_threads=True)
        super().load()


class PortalHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with deadlines for what arrives before the application runs.

    uvicorn arms its keep-alive timer only after a response, and cancels it at a request's first
    byte: a client that connects and sends nothing, or sends its headers a byte at a time, would
    hold a connection (and a file descriptor) for ever.
    """

    config: PortalConfig

    def __init__(self, config: PortalConfig, *args: Any, **kwargs: Any):
        super().__init__(config, *args, **kwargs)
        self._headers_deadline = None
        self._header_bytes = 0
        self._headers_too_large = False
        self._dropping = False

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # A new connection is idle until its first byte: the same timer as between two requests.
        self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive, self.timeout_keep_alive_handler)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_headers_deadline()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._header_bytes = 0
        self._cancel_headers_deadline()
        self._headers_deadline = self.loop.call_later(self.config.headers_timeout, self._headers_too_slow)

    def on_url(self, url: bytes) -> None:
        self._count_header_bytes(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_header_bytes(len(name) + len(value) + 4)
        super().on_header(name, value)

    def data_received(self, data: bytes) -> None:
        if self._dropping:
            return  # the rest of a refused body: never parsed, never kept
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._cancel_headers_deadline()
        previous = self.cycle
        super().on_headers_complete()
        if self.cycle is not previous:  # a new request (not a WebSocket upgrade): its task has not run yet
            self.cycle.transport = _CycleTransport(self, self.cycle)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._dropping:
            self._unset_keepalive_if_required()  # the linger timer decides when this one closes

    def close_after(self, cycle) -> None:
        """Close once `cycle`'s answer is out; if its body has not all arrived, linger first."""
        if not cycle.more_body or self.transport.is_closing():
            self.transport.close()
            return
        self._dropping = True
        self.flow.resume_reading()
        self.transport.write_eof()  # after the answer: the client reads it, then our end of file
        self.loop.call_later(LINGER_S, self.transport.close)

    def send_400_response(self, msg: str) -> None:
        # An exception raised in a parser callback reaches uvicorn as a parse error (400); the one
        # raised for oversized headers deserves its own status.
        if self._headers_too_large:
            self._refuse(431, b"Request Header Fields Too Large")
            return
        super().send_400_response(msg)

    def _count_header_bytes(self, n: int) -> None:
        self._header_bytes += n
        if self._header_bytes > self.config.max_header_bytes:
            self._headers_too_large = True
            raise ValueError("request headers too large")  # stops the parser; see send_400_response

    def _headers_too_slow(self) -> None:
        self._headers_deadline = None
        if not self.transport.is_closing():
            self._refuse(408, b"Request Timeout")

    def _cancel_headers_deadline(self) -> None:
        if self._headers_deadline is not None:
            self._headers_deadline.cancel()
            self._headers_deadline = None

    def _refuse(self, status: int, reason: bytes) -> None:
        """Answer before any application ran, and close: the rest of what the client sends is never read."""
        body = reason + b"\n"
        self.transport.write(b"HTTP/1.1 %d %s\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: %d\r\n"
                             b"connection: close\r\n\r\n%s" % (status, reason, len(body), body))
        self.transport.close()


class _CycleTransport:
    """What one request's cycle writes to: the connection, but closing goes through the protocol."""

    def __init__(self, protocol: PortalHttpProtocol, cycle):
        self._protocol = protocol
        self._cycle = cycle
        self._transport = protocol.transport

    def write(self, data: bytes) -> None:
        self._transport.write(data)

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def close(self) -> None:
        self._protocol.close_after(self._cycle)

    def __getattr__(self, name: str):
        return getattr(self._transport, name)


def build_config(host: str, port: int, processes: int = 1) -> PortalConfig:
    """The server's configuration, every number from the portal's settings."""
    from django.conf import settings

    return PortalConfig(
        "portal.asgi:application",
        host=host,
        port=port,
        workers=processes,
        http=PortalHttpProtocol,
        # The legacy websockets protocol is the one of uvicorn's that pings: a peer that stopped
        # answering (a laptop closed mid-session, a dropped NAT entry) is noticed and closed.
        ws="websockets",
        ws_ping_interval=settings.WS_PING_INTERVAL,
        ws_ping_timeout=settings.WS_PING_TIMEOUT,
        ws_max_size=WS_MAX_MESSAGE_BYTES,
        ws_max_queue=WS_MAX_QUEUED_MESSAGES,
        # The live messages are small JSON; compression would keep two zlib states per socket.
        ws_per_message_deflate=False,
        timeout_keep_alive=settings.HTTP_KEEP_ALIVE_TIMEOUT,
        headers_timeout=settings.HTTP_HEADERS_TIMEOUT,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        # Channels' router has no lifespan protocol.
        lifespan="off",
        # X-Forwarded-For and -Proto are believed only from the proxies the admin named
        # (FFP_TRUSTED_PROXIES): they become the client's address (REMOTE_ADDR: the audit log, the
        # login limits) and the scheme (https: secure cookies, CSRF), for pages and WebSockets
        # alike. Unset, nothing is: uvicorn's own default would believe 127.0.0.1, i.e. any local client.
        proxy_headers=bool(settings.TRUSTED_PROXIES),
        forwarded_allow_ips=list(settings.TRUSTED_PROXIES),
        server_header=False,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m portal.server", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--processes", type=int, default=None,
                        help=f"serving processes sharing the port (default: ${PROCESSES_ENV}, else one per core, "
                             f"at most {DEFAULT_PROCESSES_MAX})")
    args = parser.parse_args(argv)
    try:
        processes = args.processes if args.processes is not None else default_processes()
    except ValueError as exc:
        parser.error(str(exc))
    if processes < 1:
        parser.error("--processes must be 1 or more")
    # What the portal writes (uploads, outputs, thumbnails) is its service user's alone; the
    # worker processes inherit the umask.
    os.umask(0o077)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    config = build_config(args.host, args.port, processes)
    server = uvicorn.Server(config)
    if processes == 1:
        server.run()
        return 0
    # uvicorn's own supervisor, as `uvicorn --workers` runs it: the socket is bound here once and
    # inherited by every worker (each accepts from it); SIGTERM or SIGINT here stops them all
    # (each closes its connections as one process would), and a worker that dies is replaced.
    Multiprocess(config, target=server.run, sockets=[config.bind_socket()]).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
