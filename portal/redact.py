"""Secrets never reach a log line or an error page.

- `RedactSecrets`, a logging filter on every handler (settings.LOGGING): replaces private keys
  (`-----BEGIN ... PRIVATE KEY----- ... -----END ...`), `password=...`-style values and
  `Token <key>` / `Authorization: ...` values in the message AND in the formatted traceback.
- `SecretsExceptionReporterFilter` (settings.DEFAULT_EXCEPTION_REPORTER_FILTER): Django's filter
  for error pages and error mails already hides settings named like KEY/PASS/TOKEN/SECRET; this
  one also hides request headers named AUTH... and POSTed fields such as `private_key` and
  `password`, which Django shows unless a view is decorated with `sensitive_post_parameters`.

Imports nothing of the project: logging is configured before the apps are loaded.
"""
from __future__ import annotations

import logging
import re

from django.views.debug import SafeExceptionReporterFilter

__all__ = ["redact", "RedactSecrets", "SecretsExceptionReporterFilter"]

MASK = "********"

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # A PEM/OpenSSH private key, up to its END line (or the end of the text when cut off).
    (re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.S),
     "[private key redacted]"),
    # Authorization: <anything up to the end of the value>
    (re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?)[^\"'\n,}]+"), r"\1" + MASK),
    # Token <key> / Bearer <key> (API keys are 43 url-safe characters; 8+ leaves prose alone)
    (re.compile(r"\b(Token|Bearer)(\s+)[A-Za-z0-9._~+/=-]{8,}"), r"\1\2" + MASK),
    # The password in a URL's user part: redis://:pw@host, postgres://user:pw@host/db, amqp://...
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@\"']*:)[^\s@/\"']+(?=@)"), r"\1" + MASK),
    # password=..., "private_key": "...", secret: ...
    (re.compile(r"(?i)\b((?:[a-z_]*password|passwd|private_key|secret_key|secret)[\"']?\s*[:=]\s*[\"']?)"
                r"(?!\[private key redacted\])[^\s\"'&,;}]+"), r"\1" + MASK),
]


def redact(text: str) -> str:
    """`text` with every secret the patterns above recognise replaced."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


class RedactSecrets(logging.Filter):
    """Rewrites the record in place (message and traceback); never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string is the formatter's problem, not ours
            return True
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


class SecretsExceptionReporterFilter(SafeExceptionReporterFilter):
    hidden_settings = re.compile(r"API|AUTH|TOKEN|KEY|SECRET|PASS|SIGNATURE|HTTP_COOKIE", flags=re.I)
    #: POSTed fields never shown on an error page or in an error mail
    hidden_post_fields = re.compile(r"private_key|password|passwd|secret|token", flags=re.I)

    def get_post_parameters(self, request):
        # Unlike Django's own rule, even with DEBUG on: a lab's debug page must not show an SSH key.
        params = super().get_post_parameters(request)
        if request is None:
            return params
        hidden = [k for k in params if self.hidden_post_fields.search(k)]
        if not hidden:
            return params
        cleansed = params.copy()
        for key in hidden:
            cleansed[key] = self.cleansed_substitute
        return cleansed
