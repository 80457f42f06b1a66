"""Logs: one JSON object per line in production (LOG_FORMAT=json), with the ids of what was going on.

The ids (request, user, job, Slurm job, task, RQ job) are bound where the work runs, with
`jobs.log_context.log_context` and `bind` (jobs binds them and never imports portal/); this module
writes them: `JsonFormatter` adds `jobs.log_context.current()` to every line, and `logging_config`
is settings.LOGGING for either format.

Secrets: `portal.redact.RedactSecrets` (on every handler, settings.LOGGING) cleans the message and
the traceback before the formatter runs; `JsonFormatter` also cleans every other value it writes
(extras, a traceback it formats itself), since JSON has more places to hide one than a plain line.

Imports nothing of the project but portal.redact and jobs.log_context (which imports nothing of
the project): settings import it before the apps are loaded.
"""
from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any

from pythonjsonlogger.json import JsonFormatter as _LibraryJsonFormatter

from jobs.log_context import current, resolved_user_id
from portal.redact import redact

__all__ = ["FORMATS", "JsonFormatter", "logging_config"]

#: LOG_FORMAT's values: one JSON object per line, or the plain text line for a terminal
FORMATS = ("json", "plain")


def _of_record(record: logging.LogRecord) -> dict[str, Any]:
    """The ids for a record: the context's, else those of the request Django's own request logger
    passes along (django.request logs a 4xx/5xx after the middleware has closed its context)."""
    ids = current()
    request = getattr(record, "request", None)
    if "request_id" not in ids and getattr(request, "request_id", None):
        ids["request_id"] = request.request_id
        user_id = resolved_user_id(request)
        if user_id is not None and "user_id" not in ids:
            ids["user_id"] = user_id
    return ids


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        return [_redacted(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _redacted(v) for k, v in value.items()}
    return redact(str(value))  # anything else would be written as its str(): clean that


class JsonFormatter(_LibraryJsonFormatter):
    """python-json-logger's formatter: `{"time", "level", "logger", "message", <ids>, <extras>,
    "exc_info"}` on one line; times in UTC with milliseconds; every string value redacted."""

    #: record attributes Django's loggers attach that are objects, not facts worth a field
    SKIPPED = ("request", "server_time", "color_message")

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("rename_fields", {"levelname": "level", "name": "logger"})
        # ASCII only (\u escapes): no character of a message can break a line in two for a reader
        # that splits on Unicode line separators too.
        super().__init__("%(levelname)s %(name)s %(message)s", *args, **kwargs)
        self._skip_fields.update(self.SKIPPED)

    def add_fields(self, log_data, record, message_dict):
        log_data["time"] = datetime.fromtimestamp(record.created, tz=timezone.utc).isoformat(timespec="milliseconds")
        super().add_fields(log_data, record, message_dict)
        for key, value in _of_record(record).items():
            log_data.setdefault(key, value)

    def process_log_record(self, log_data):
        return {key: _redacted(value) for key, value in log_data.items()}


def logging_config(log_format: str, level: str = "INFO") -> dict:
    """settings.LOGGING for LOG_FORMAT `log_format`. Both formats pass every line through the
    redaction filter. In JSON, the portal's own access line (portal.access: request id, user id,
    status, milliseconds) stands in for uvicorn's, which knows no ids; in plain, uvicorn's stays."""
    if log_format not in FORMATS:
        raise ValueError(f"LOG_FORMAT must be one of {', '.join(FORMATS)}, not {log_format!r}")
    json_lines = log_format == "json"
    loggers: dict[str, dict] = {"paramiko": {"level": "WARNING"}, "axes": {"level": "WARNING"},
                                "portal.access": {"level": level if json_lines else "WARNING"}}
    if json_lines:
        # uvicorn keeps its own handlers (plain text) unless its loggers are pointed at ours.
        loggers.update({"uvicorn": {"handlers": ["console"], "propagate": False, "level": level},
                        "uvicorn.error": {"handlers": ["console"], "propagate": False, "level": level},
                        "uvicorn.access": {"handlers": ["console"], "propagate": False, "level": "WARNING"}})
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
                       "json": {"()": "portal.logs.JsonFormatter"}},
        # Every log line (and traceback) passes the redaction filter: private keys, password=...,
        # Token/Authorization values, passwords in URLs never reach a log file.
        "filters": {"redact": {"()": "portal.redact.RedactSecrets"}},
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": log_format, "filters": ["redact"]}},
        "root": {"handlers": ["console"], "level": level},
        # axes: its INFO lines come with every login; failures and lockouts are WARNINGs.
        "loggers": loggers,
    }
