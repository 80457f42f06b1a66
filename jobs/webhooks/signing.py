"""The signature of a webhook call, Stripe-like:

    X-FFP-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>

The timestamp is inside what is signed, so a receiver that refuses calls older than
`TOLERANCE_SECONDS` cannot be fed a recorded call again later (replay). docs/api.md gives users
the same check in a few lines of Python; `verify` is its reference implementation.
"""
from __future__ import annotations

import hashlib
import hmac
import time

__all__ = ["HEADER", "TOLERANCE_SECONDS", "sign", "signature_header", "verify"]

HEADER = "X-FFP-Signature"
#: how old (or how far ahead, for a clock that runs fast) a signed call may be when it arrives
TOLERANCE_SECONDS = 300


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of "<timestamp>.<body>" under `secret`."""
    return hmac.new(secret.encode(), f"{int(timestamp)}.".encode() + body, hashlib.sha256).hexdigest()


def signature_header(secret: str, timestamp: int, body: bytes) -> str:
    return f"t={int(timestamp)},v1={sign(secret, timestamp, body)}"


def verify(secret: str, header: str, body: bytes, *, tolerance: int = TOLERANCE_SECONDS,
           now: float | None = None) -> bool:
    """Whether `header` (X-FFP-Signature) signs exactly `body` with `secret`, made within
    `tolerance` seconds of `now`. Several v1= values are accepted (any one may match)."""
    timestamp, signatures = None, []
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        if name == "t" and value.isdigit():
            timestamp = int(value)
        elif name == "v1":
            signatures.append(value)
    if timestamp is None or not signatures:
        return False
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        return False
    expected = sign(secret, timestamp, body)
    return any(hmac.compare_digest(expected, s) for s in signatures)
