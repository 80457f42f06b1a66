"""The one seam to the cluster: commands and files over a persistent, host-key-pinned SSH connection.

`SSHRunner` runs argument lists (joined with `shlex.join`, never string-built) and moves files over
SFTP. `get_runner(config)` keeps ONE open connection per cluster profile for the whole process, so
a poll costs a channel (a round trip), not a TCP + key exchange + auth handshake;
`runner_for(profile)` is the same for anything with a `cluster_config()` (the portal's profiles).
Opening a connection (and `ClusterConfig`, how to reach a cluster) lives in `cluster._connect`; file
operations over SFTP in `cluster._sftp`, mixed into `SSHRunner`.

Trust: host keys come only from the profile's `known_hosts` text, unknown keys are rejected
(never auto-added), and no agent or ~/.ssh key is ever tried. The private key is never logged
and never appears in a message or a repr.

Remote commands run through the service user's login shell, which must be POSIX (sh, bash, dash).
"""
from __future__ import annotations

import dataclasses
import logging
import os
import secrets
import shlex
import socket
import threading
import time
from typing import Protocol

import paramiko

from ._batch import batch_line, split_batch
from ._connect import DROPPED, ClusterConfig, open_client, retried_once
from ._sftp import FileTransfers, RemoteEntry
from .errors import ClusterUnreachable, CommandFailed, CommandTimedOut

__all__ = ["ClusterConfig", "CommandResult", "RemoteEntry", "SSHRunner", "get_runner", "runner_for",
           "close_all_runners"]

log = logging.getLogger(__name__)

#: prefixed to every command line run on the cluster
REMOTE_UMASK = "umask 077; "
#: prefixed to commands run without input (see SSHRunner._exec)
NO_STDIN = "exec </dev/null; "

_BUF = 65536


@dataclasses.dataclass
class CommandResult:
    argv: list[str]
    rc: int  # -1 when the remote side sent no exit status (e.g. the shell was killed)
    stdout: str
    stderr: str


def _argv_line(argv: list[str]) -> str:
    if not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError(f"argv must be a non-empty list of strings, got {argv!r}")
    if any("\0" in a for a in argv):
        raise ValueError("a command argument contains a NUL byte")
    return shlex.join(argv)


def _short(line: str, limit: int = 120) -> str:
    return line if len(line) <= limit else line[: limit - 3] + "..."


class SSHRunner(FileTransfers):
    """Runs commands and file transfers on one cluster over one lazily opened SSH connection.

    Thread-safe: a lock guards (re)connecting; commands run on their own channels of the shared
    transport, SFTP calls (`cluster._sftp.FileTransfers`) share one SFTP session under a second
    lock. `connect_count` counts the SSH connections this runner opened (tests and the bench read it).
    """

    def __init__(self, config: ClusterConfig):
        self.config = config
        self.connect_count = 0
        self._lock = threading.RLock()
        self._sftp_lock = threading.Lock()
        self._client: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None
        self._pid = os.getpid()

    # ---- connection -----------------------------------------------------------------------------

    @property
    def transport(self) -> paramiko.Transport | None:
        """The live paramiko transport, or None before the first command / after close()."""
        client = self._client
        return client.get_transport() if client else None

    def _connect(self) -> paramiko.SSHClient:
        client = open_client(self.config)
        self.connect_count += 1
        log.info("connected to %s@%s (connection #%d)", self.config.user, self.config.address,
                 self.connect_count)
        return client

    def _live_client(self) -> paramiko.SSHClient:
        """The pooled client, reconnecting when it is missing, dead, or inherited across fork()."""
        with self._lock:
            if self._pid != os.getpid():
                # A forked child (RQ work horse) must not touch the parent's socket; forget it.
                self._client, self._sftp, self._pid = None, None, os.getpid()
            client = self._client
            if client is not None:
                transport = client.get_transport()
                if transport is not None and transport.is_active():
                    return client
                self._drop()
            self._client = self._connect()
            return self._client

    def _drop(self) -> None:
        with self._lock:
            client, self._client, self._sftp = self._client, None, None
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - closing a dead connection may fail; it is gone either way
                pass

    def _open_channel(self) -> paramiko.Channel:
        """A new session channel; one silent reconnect if the pooled connection died meanwhile.

        Only opening the channel is retried: nothing has run yet, so a retry cannot run a command twice.
        """
        return retried_once(
            lambda: self._live_client().get_transport().open_session(timeout=self.config.connect_timeout),
            self._drop,
            lambda e: ClusterUnreachable(f"cannot reach the cluster at {self.config.address}: the connection "
                                         f"dropped and a new one failed too ({e})"),
            dropped=(*DROPPED, AttributeError))  # AttributeError: the transport went away (None) meanwhile

    # ---- commands -------------------------------------------------------------------------------

    def _exec(self, line: str, stdin: bytes | None, timeout: float) -> tuple[int, bytes, bytes]:
        deadline = time.monotonic() + timeout
        chan = self._open_channel()
        try:
            try:
                chan.settimeout(max(timeout, 0.1))
                # umask 077: what a command creates on the cluster (sbatch's logs via SLURM_UMASK,
                # folders, files) is the service user's alone, whatever the login shell's default.
                if stdin:
                    chan.exec_command(REMOTE_UMASK + line)
                    chan.sendall(stdin)
                    chan.shutdown_write()  # the command reads to EOF, so it cannot exit before this
                else:
                    # No EOF is sent on a channel without input: paramiko sends it outside the channel
                    # lock, so a command that exits at once can get its CLOSE answered before the EOF
                    # leaves; sshd then drops the WHOLE shared connection ("ieof packet referred to
                    # nonexistent channel"), failing every other thread's command. /dev/null gives a
                    # command that reads stdin its EOF on the cluster side instead.
                    chan.exec_command(REMOTE_UMASK + NO_STDIN + line)
                return self._collect(chan, deadline, line, timeout)
            except CommandTimedOut:
                raise
            except DROPPED as e:
                self._drop()
                raise ClusterUnreachable(
                    f"the connection to the cluster at {self.config.address} was lost while running "
                    f"`{_short(line)}`; it may or may not have run ({e})") from None
        finally:
            chan.close()

    @staticmethod
    def _collect(chan: paramiko.Channel, deadline: float, line: str, timeout: float):
        out, err = bytearray(), bytearray()

        def timed_out() -> CommandTimedOut:
            return CommandTimedOut(f"`{_short(line)}` did not finish within {timeout:g} s on the "
                                   f"cluster; it may still be running there")

        # Short recv timeouts so stderr is drained too: both streams share one flow-control window,
        # and a command writing lots of stderr would otherwise stall with stdout never arriving.
        chan.settimeout(0.05)
        while True:
            while chan.recv_stderr_ready():
                err += chan.recv_stderr(_BUF)
            if time.monotonic() > deadline:
                raise timed_out()
            try:
                data = chan.recv(_BUF)
            except socket.timeout:
                continue
            if not data:  # EOF: the server sends no more data on either stream after it
                break
            out += data
        while data := chan.recv_stderr(_BUF):
            err += data
        if not chan.status_event.wait(max(deadline - time.monotonic(), 0.01)):
            raise timed_out()
        return chan.exit_status, bytes(out), bytes(err)

    def run(self, argv: list[str], stdin: bytes | str | None = None, timeout: float = 60,
            check: bool = False) -> CommandResult:
        """Run one command (an argument list) and wait for it. `check` raises CommandFailed on rc != 0."""
        line = _argv_line(argv)
        data = stdin.encode() if isinstance(stdin, str) else stdin
        rc, out, err = self._exec(line, data, timeout)
        result = CommandResult(list(argv), rc, out.decode(errors="replace"), err.decode(errors="replace"))
        if check and rc != 0:
            last = result.stderr.strip().splitlines()[-1:] or ["(no error output)"]
            raise CommandFailed(f"`{_short(line)}` failed on the cluster (exit status {rc}): {last[0]}",
                                rc, result.stderr)
        return result

    def run_batch(self, argvs: list[list[str]], timeout: float = 60) -> list[CommandResult]:
        """Run several commands in ONE round trip (one exec channel), each in its own subshell.

        Commands run one after another; a failing one does not stop the rest. Each result has the
        command's own stdout, stderr and exit status (see `cluster._batch` for the framing).
        """
        if not argvs:
            return []
        nonce = secrets.token_hex(16)
        rc, out, err = self._exec(batch_line([_argv_line(a) for a in argvs], nonce), None, timeout)
        return [CommandResult(list(argv), code, stdout, stderr)
                for argv, (code, stdout, stderr) in zip(argvs, split_batch(len(argvs), nonce, rc, out, err))]

    def close(self) -> None:
        """Close the connection; a later call reconnects."""
        self._drop()


# ---- the process-wide pool ----------------------------------------------------------------------

_RUNNERS: dict[tuple, SSHRunner] = {}
_RUNNERS_LOCK = threading.Lock()


def get_runner(config: ClusterConfig) -> SSHRunner:
    """The process-wide runner for this profile: one open connection per `config.key`, reused."""
    with _RUNNERS_LOCK:
        runner = _RUNNERS.get(config.key)
        if runner is None:
            runner = _RUNNERS[config.key] = SSHRunner(config)
        return runner


class HasClusterConfig(Protocol):
    """A cluster profile as the portal stores it: anything that can say how to reach its cluster."""

    def cluster_config(self) -> ClusterConfig: ...


def runner_for(profile: HasClusterConfig) -> SSHRunner:
    """The pooled runner of a cluster profile: `get_runner(profile.cluster_config())`.

    The portal's one way to the cluster, so its tests replace `cluster.runner_for` in one place.
    """
    return get_runner(profile.cluster_config())


def close_all_runners() -> None:
    with _RUNNERS_LOCK:
        runners = list(_RUNNERS.values())
        _RUNNERS.clear()
    for runner in runners:
        runner.close()


def _forget_pool_in_child() -> None:
    # After fork() the child must not reuse (or close) the parent's connections, and a lock held by
    # another parent thread at fork time would never be released in the child.
    global _RUNNERS_LOCK
    _RUNNERS.clear()
    _RUNNERS_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_in_child)
