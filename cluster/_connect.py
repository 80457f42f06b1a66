"""One SSH connection to a cluster: how to reach it (`ClusterConfig`), opening it (pinned host keys,
key text, plain-word errors), and running work once more on a fresh one when it died (`retried_once`).

Private to `cluster.ssh` and `cluster._sftp` (`ClusterConfig` is public as `cluster.ClusterConfig`).
Messages name hosts, users and key fingerprints, never a private key.
"""
from __future__ import annotations

import binascii
import dataclasses
import hashlib
import io
import socket
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TypeVar

import paramiko
from paramiko.hostkeys import HostKeyEntry, InvalidHostKey

from .errors import AuthenticationFailed, ClusterError, ClusterUnreachable, HostKeyRejected

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class ClusterConfig:
    """How to reach one cluster (built by the portal from a ClusterProfile row)."""

    host: str
    port: int
    user: str
    private_key: str = dataclasses.field(repr=False)  # key TEXT; repr=False keeps it out of logs
    known_hosts: str  # one or more known_hosts lines; the host key must match one of them
    connect_timeout: float = 10.0

    @property
    def key(self) -> tuple:
        """Identity for the connection pool: a changed key or pinned host key means a new connection."""
        digest = hashlib.sha256(f"{self.private_key}\0{self.known_hosts}".encode()).hexdigest()
        return (self.host, int(self.port), self.user, digest)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


# Tried in this order; a key of another type simply fails to parse and the next class is tried.
_KEY_CLASSES = (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey)
_KEY_TYPE_PREFIXES = ("ssh-", "ecdsa-", "sk-")


def _clean(text: str) -> str:
    # Text pasted into a web form arrives with CRLF line ends and stray indentation.
    return "\n".join(line.strip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))


def load_private_key(text: str) -> paramiko.PKey:
    """Parse private key TEXT (OpenSSH or PEM; ed25519, ECDSA or RSA) without a passphrase."""
    body = _clean(text).strip() + "\n"
    for cls in _KEY_CLASSES:
        try:
            return cls.from_private_key(io.StringIO(body))
        except paramiko.PasswordRequiredException:
            raise AuthenticationFailed(
                "the private key in the cluster profile is protected by a passphrase; the portal "
                "needs a key without one") from None
        except (paramiko.SSHException, ValueError, TypeError, IndexError, binascii.Error):
            continue
    raise AuthenticationFailed(
        "the private key in the cluster profile could not be read: expected an ed25519, ECDSA or "
        "RSA private key in OpenSSH or PEM format") from None


def load_host_keys(host_keys: paramiko.HostKeys, text: str, host: str, port: int) -> int:
    """Add the pinned keys from known_hosts TEXT to `host_keys`; returns how many were added.

    Accepts OpenSSH known_hosts lines (`host`, `[host]:port`, comma lists, hashed `|1|` names) and,
    as a convenience, a bare `type base64` public key line, which is pinned for this profile's host
    and port. Comments, blank lines and `@cert-authority`/`@revoked` lines are ignored (this pin is
    for plain host keys only).
    """
    added = 0
    own_names = [host if port == 22 else f"[{host}]:{port}"]
    for lineno, line in enumerate(_clean(text).split("\n"), 1):
        if not line or line.startswith(("#", "@")):
            continue
        fields = line.split()
        if fields[0].startswith(_KEY_TYPE_PREFIXES) and len(fields) >= 2:
            line = " ".join([own_names[0], fields[0], fields[1]])
        else:
            line = " ".join(fields[:3])
        try:
            entry = HostKeyEntry.from_line(line, lineno)
        except (InvalidHostKey, paramiko.UnknownKeyType, paramiko.SSHException, ValueError,
                binascii.Error):
            entry = None
        if entry is None or entry.key is None:
            raise HostKeyRejected(
                f"line {lineno} of the pinned host keys in the cluster profile is not a known_hosts "
                f"line (expected `[host]:port key-type base64-key`)")
        for name in entry.hostnames:
            host_keys.add(name, entry.key.get_name(), entry.key)
        added += 1
    return added


class _UnknownHostKey(paramiko.SSHException):
    """Raised by `_PinnedPolicy`: the server's key matches no pinned line."""

    def __init__(self, hostname: str, key: paramiko.PKey):
        super().__init__(hostname)
        self.hostname, self.key = hostname, key


class _PinnedPolicy(paramiko.RejectPolicy):
    """RejectPolicy that says *which* key was offered, so the message can tell the admin how to fix it."""

    def missing_host_key(self, client, hostname, key):
        raise _UnknownHostKey(hostname, key)


def open_client(cfg: ClusterConfig) -> paramiko.SSHClient:
    """A connected, authenticated SSHClient, or one of the named errors (never a paramiko one)."""
    where = f"cannot reach the cluster at {cfg.address}"
    client = paramiko.SSHClient()
    load_host_keys(client.get_host_keys(), cfg.known_hosts, cfg.host, cfg.port)
    client.set_missing_host_key_policy(_PinnedPolicy())
    pkey = load_private_key(cfg.private_key)
    t = cfg.connect_timeout
    try:
        try:
            client.connect(
                cfg.host, port=cfg.port, username=cfg.user, pkey=pkey, timeout=t,
                banner_timeout=t, auth_timeout=t, channel_timeout=t,
                look_for_keys=False, allow_agent=False,
            )
        except BaseException:
            client.close()
            raise
    except _UnknownHostKey as e:
        raise HostKeyRejected(
            f"the cluster's SSH host key is not the one pinned in the cluster profile: "
            f"{cfg.address} offered {e.key.get_name()} {e.key.fingerprint}, and the profile pins "
            f"no key for {e.hostname}. To fix: confirm the key with the cluster's admin "
            f"(`ssh-keyscan -p {cfg.port} {cfg.host}` shows it) and paste its line into the "
            f"profile's known hosts.") from None
    except paramiko.BadHostKeyException as e:
        raise HostKeyRejected(
            f"the cluster's SSH host key CHANGED: {cfg.address} now offers "
            f"{e.key.get_name()} {e.key.fingerprint}, but the profile pins "
            f"{e.expected_key.get_name()} {e.expected_key.fingerprint}. This may be a "
            f"man-in-the-middle attack; if the cluster's admin confirms the key was replaced, "
            f"update the pinned key in the cluster profile.") from None
    except paramiko.AuthenticationException:
        raise AuthenticationFailed(
            f"the cluster at {cfg.address} refused the profile's SSH key for user {cfg.user!r} "
            f"(is its public key in that user's authorized_keys?)") from None
    except paramiko.ssh_exception.NoValidConnectionsError as e:
        codes = {getattr(err, "errno", None) for err in e.errors.values()}
        why = "connection refused" if codes <= {111, 61, 10061} else "host unreachable"
        raise ClusterUnreachable(f"{where}: {why}") from None
    except socket.gaierror:
        raise ClusterUnreachable(f"{where}: the host name {cfg.host!r} was not found") from None
    except (TimeoutError, socket.timeout):
        raise ClusterUnreachable(f"{where}: no answer within {t:g} s") from None
    except (OSError, EOFError, paramiko.SSHException) as e:
        raise ClusterUnreachable(f"{where}: {getattr(e, 'strerror', None) or e}") from None
    transport = client.get_transport()
    # Keepalives notice a silently dropped connection (NAT, firewall) while the pool holds it.
    transport.set_keepalive(30)
    # Without TCP_NODELAY each small request (channel open, exec) waits ~40 ms on Nagle +
    # delayed ACK: measured 50 ms per `true` instead of 5 ms on loopback.
    try:
        transport.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except (OSError, AttributeError):  # not a TCP socket (e.g. a proxy channel): nothing to tune
        pass
    return client


# ---- using it: once more on a fresh connection ---------------------------------------------------

#: what paramiko and the socket raise when the connection under a call died (or was never alive)
DROPPED: tuple[type[Exception], ...] = (paramiko.SSHException, EOFError, OSError)


def retried_once(attempt: Callable[[], T], drop: Callable[[], None], lost: Callable[[Exception], ClusterError],
                 dropped: tuple[type[Exception], ...] = DROPPED,
                 guard: AbstractContextManager | None = None) -> T:
    """`attempt()`, run a second time on a fresh connection when the pooled one turned out to be dead.

    `attempt` takes the live connection itself (the runner's `_live_client`), so the second run opens
    a new one. When it raises one of `dropped`, the connection is dropped (`drop`) and it runs once
    more; when that fails too, `lost(error)` is raised. Any other error (a ClusterError, say) goes
    through at once. `guard` (a lock) is held around each run and its drop. Only for work that is
    safe to repeat: opening a channel (nothing has run yet), SFTP calls (uploads land under a
    temporary name first).
    """
    for run in (1, 2):
        with guard if guard is not None else nullcontext():
            try:
                return attempt()
            except dropped as e:
                drop()
                if run == 2:
                    raise lost(e) from None
    raise AssertionError("unreachable")
