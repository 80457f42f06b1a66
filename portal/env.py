"""Settings read from environment variables: each reader turns a bad value into ImproperlyConfigured
at start-up, naming the variable, never a silent fallback (portal/settings.py, portal/settings_security.py).

`default` is the text the variable would hold (a string, as the environment has only strings), so a
default is read, checked and converted exactly like a value that was set.

Imports nothing of the project: the settings import it before the apps are loaded.
"""
from __future__ import annotations

import ipaddress
import os

from django.core.exceptions import ImproperlyConfigured

__all__ = ["envbool", "envint", "envfloat", "envlist", "envnetworks"]


def envbool(name: str, default: str) -> bool:
    """1/true/yes/on, 0/false/no/off or empty (any letter case)."""
    value = os.environ.get(name, default).strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, not {value!r}")


def envint(name: str, default: str) -> int:
    return _number(name, default, int, "a whole number")


def envfloat(name: str, default: str) -> float:
    return _number(name, default, float, "a number")


def _number(name: str, default: str, kind: type[int] | type[float], words: str):
    value = os.environ.get(name, default)
    try:
        return kind(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be {words}, not {value!r}") from None


def envlist(name: str, default: str = "") -> list[str]:
    """A comma-separated list: each entry stripped of spaces, empty entries left out."""
    return [entry.strip() for entry in os.environ.get(name, default).split(",") if entry.strip()]


def envnetworks(name: str, example: str) -> list[str]:
    """A comma-separated list of IP addresses or networks (10.0.0.0/24; host bits may be set), as
    written; `example`: what to write, for the message that refuses an entry that is neither."""
    entries = envlist(name)
    for entry in entries:
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            raise ImproperlyConfigured(f"{name} holds {entry!r}, which is not an IP address or network "
                                       f"(write addresses such as {example}, comma-separated)") from None
    return entries
