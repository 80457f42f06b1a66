"""Where a webhook may go (the SSRF guard).

A callback URL is typed by a user, and the portal calls it from inside the site's network: without
a guard it would be a way to reach the portal's own database, Redis, the cluster's SSH or a cloud's
metadata service (169.254.169.254). So:

- http and https only, any port;
- the host is resolved ONCE; if ANY of its addresses is private, loopback, link-local, multicast,
  reserved, unspecified or otherwise not public, the call is refused, unless that address lies in
  settings.WEBHOOK_ALLOWED_NETWORKS (an admin's choice, e.g. a lab's receiver on 10.1.2.3/32);
- the call then connects to the address checked here (`transport`), sending the name in the Host
  header and TLS SNI: the name is never resolved again, so a DNS answer that changes between the
  check and the connection (rebinding) cannot slip a private address in;
- redirects are never followed (a 3xx is a failed attempt that says where it pointed).

`check_callback_url` applies the same rule when a job or booking is made, so a user hears at once.
"""
from __future__ import annotations

import dataclasses
import functools
import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.core.validators import URLValidator
from django.utils.translation import gettext as _

__all__ = ["CheckedCallback", "Refused", "address_refused", "allowed_networks", "check_callback_url", "checked_callback",
           "resolve"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_url_syntax = URLValidator(schemes=["http", "https"])


class Refused(Exception):
    """A callback the portal will not call; `message` says why in plain words (translated)."""

    def __init__(self, message: str, *, retry: bool = False):
        super().__init__(message)
        self.message = message
        #: a later attempt may succeed (the name did not resolve now); else retrying cannot help
        self.retry = retry


@dataclasses.dataclass(frozen=True)
class CheckedCallback:
    """A callback URL the guard allowed, for one call: connect to `address`, say `host` (Host
    header, TLS SNI)."""

    scheme: str
    host: str
    port: int
    path: str  # path and query, as sent in the request line
    address: str


@functools.lru_cache(maxsize=8)
def _networks(spec: tuple[str, ...]) -> tuple:
    try:
        return tuple(ipaddress.ip_network(n, strict=False) for n in spec)
    except ValueError as exc:
        raise ImproperlyConfigured(f"WEBHOOK_ALLOWED_NETWORKS holds a value that is not a network: {exc}") from None


def allowed_networks() -> tuple:
    """settings.WEBHOOK_ALLOWED_NETWORKS as networks (read each time: tests change it)."""
    return _networks(tuple(getattr(settings, "WEBHOOK_ALLOWED_NETWORKS", ()) or ()))


def address_refused(address: IPAddress) -> bool:
    """Whether a call to `address` is refused: any address that is not public, unless allowed."""
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 is 127.0.0.1
    candidates = [address] + ([mapped] if mapped is not None else [])
    for a in candidates:
        if any(a.version == n.version and a in n for n in allowed_networks()):
            return False
    return any(a.is_private or a.is_loopback or a.is_link_local or a.is_multicast or a.is_reserved
               or a.is_unspecified or not a.is_global for a in candidates)


def resolve(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (the one seam tests replace to play a DNS server)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(info[4][0] for info in infos))


def _split(url: str):
    try:
        _url_syntax(url)
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except (ValidationError, ValueError):
        raise Refused(_("Give the callback as a full http:// or https:// URL.")) from None
    if parts.username or parts.password:
        raise Refused(_("A callback URL cannot hold a user name or password; the calls are signed instead."))
    return parts, port


def _checked(host: str, addresses: list[str]) -> str:
    """The first address, once every one of them is allowed; Refused otherwise."""
    if not addresses:
        raise Refused(_("The callback's host name %(host)s has no address.") % {"host": host}, retry=True)
    for text in addresses:
        address = ipaddress.ip_address(text.split("%", 1)[0])  # drop an IPv6 zone (fe80::1%eth0)
        if address_refused(address):
            raise Refused(_("The callback's host %(host)s is a private, loopback or link-local address "
                            "(%(address)s): the portal does not call those. Ask your admin if this "
                            "network should be allowed.") % {"host": host, "address": address})
    return addresses[0]


def checked_callback(url: str) -> CheckedCallback:
    """The callback checked and resolved, for one call; Refused when it must not be called."""
    parts, port = _split(url)
    host = parts.hostname or ""
    try:
        addresses = resolve(host, port)
    except (OSError, UnicodeError):
        raise Refused(_("The callback's host name %(host)s cannot be found.") % {"host": host}, retry=True) from None
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return CheckedCallback(parts.scheme, host, port, path, _checked(host, addresses))


def check_callback_url(url: str) -> str | None:
    """The problem with a callback URL given to a job or booking, in plain words; None when fine.

    A name that does not resolve now is accepted (DNS may be down, or the receiver not set up yet):
    every call checks it again."""
    try:
        checked_callback(url)
    except Refused as exc:
        return None if exc.retry else exc.message
    return None
