"""Logs: one JSON object per line in production (LOG_FORMAT=json), with the ids of what was going on.

    from portal.logs import log_context, bind
    with log_context(job_id=str(job.id)):      # every line logged inside carries "job_id"
        ...
        bind(slurm_job_id=slurm_id)            # learnt half-way: the lines after it carry it too

The ids (`FIELDS`) live in a context variable, so they follow the code that runs for one request,
one RQ job or one job of a watcher cycle, also across asgiref's thread hops (it copies the context),
and never leak from one request into the next (each `log_context` is undone when it ends).
`portal.request_id.RequestIdMiddleware` opens the request's context; `jobs.background.rq_worker` an RQ job's;
`jobs.job.submit` and `jobs.watcher.poll` a job's. A request's user id is read from the request when a
line is written, once authentication has resolved the user (the session middleware's or an API
token's), never by asking the database from inside a log call.

Secrets: `portal.redact.RedactSecrets` (on every handler, settings.LOGGING) cleans the message and
the traceback before the formatter runs; `JsonFormatter` also cleans every other value it writes
(extras, a traceback it formats itself), since JSON has more places to hide one than a plain line.

Imports nothing of the project but portal.redact: settings import it before the apps are loaded.
"""
from __future__ import annotations

import contextvars
import logging
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, Iterator

from django.utils.functional import SimpleLazyObject, empty
from pythonjsonlogger.json import JsonFormatter as _LibraryJsonFormatter

from portal.redact import redact

__all__ = ["FIELDS", "FORMATS", "log_context", "bind", "current", "JsonFormatter", "logging_config"]

#: the ids a log line (and an audit entry, jobs.audit) may carry, in the order they are written
FIELDS = ("request_id", "user_id", "job_id", "slurm_job_id", "task_index", "rq_job_id")
#: LOG_FORMAT's values: one JSON object per line, or the plain text line for a terminal
FORMATS = ("json", "plain")
#: where a context keeps the request whose user is read late (not a field: never written as is)
_REQUEST = "_request"

_context: contextvars.ContextVar[dict | None] = contextvars.ContextVar("portal_log_context", default=None)


def _clean(fields: dict[str, Any]) -> dict[str, Any]:
    unknown = set(fields) - set(FIELDS)
    if unknown:  # a typo would silently log nothing: refuse it where it is written
        raise TypeError(f"unknown log field(s) {sorted(unknown)}; known: {FIELDS}")
    return {k: v for k, v in fields.items() if v is not None and v != ""}


@contextmanager
def log_context(request=None, **fields) -> Iterator[None]:
    """Every line logged inside carries `fields` (see FIELDS; None and "" are left out) on top of
    the enclosing context's; `request`: its user id is added once authentication has set it."""
    values = {**(_context.get() or {}), **_clean(fields)}
    if request is not None:
        values[_REQUEST] = request
    token = _context.set(values)
    try:
        yield
    finally:
        _context.reset(token)


def bind(**fields) -> bool:
    """Add `fields` to the innermost open context, until it ends. Outside any context nothing is
    kept (False): an id bound there would stick to every later line of the thread."""
    values = _context.get()
    if values is None:
        return False
    values.update(_clean(fields))
    return True


def current() -> dict[str, Any]:
    """The ids that apply here and now, in FIELDS order (empty outside any context)."""
    values = _context.get() or {}
    found = {k: values[k] for k in FIELDS if k in values}
    if "user_id" not in found and values.get(_REQUEST) is not None:
        user_id = _resolved_user_id(values[_REQUEST])
        if user_id is not None:
            found["user_id"] = user_id
    return {k: found[k] for k in FIELDS if k in found}


def _resolved_user_id(request) -> int | None:
    """The request's user's id when authentication has already found it; None otherwise (nobody
    logged in, or not looked up yet: evaluating the lazy user would query the session here)."""
    user = getattr(request, "__dict__", {}).get("user")
    if isinstance(user, SimpleLazyObject):
        user = None if user._wrapped is empty else user._wrapped
    return user.pk if getattr(user, "is_authenticated", False) else None


def _of_record(record: logging.LogRecord) -> dict[str, Any]:
    """The ids for a record: the context's, else those of the request Django's own request logger
    passes along (django.request logs a 4xx/5xx after the middleware has closed its context)."""
    ids = current()
    request = getattr(record, "request", None)
    if "request_id" not in ids and getattr(request, "request_id", None):
        ids["request_id"] = request.request_id
        user_id = _resolved_user_id(request)
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
