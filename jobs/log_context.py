"""The ids a log line carries: which request, user, job, Slurm job, task and RQ job it was written for.

    from jobs.log_context import log_context, bind
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

Here, in jobs/, because jobs binds the ids and never imports portal/; portal.logs writes them
(`current()`) into each JSON line, and jobs.audit into each audit entry. Imports nothing of the
project: settings import portal.logs, and so this, before the apps are loaded.
"""
from __future__ import annotations

import contextvars
from contextlib import contextmanager
from typing import Any, Iterator

from django.utils.functional import SimpleLazyObject, empty

__all__ = ["FIELDS", "log_context", "bind", "current", "resolved_user_id"]

#: the ids a log line (and an audit entry, jobs.audit) may carry, in the order they are written
FIELDS = ("request_id", "user_id", "job_id", "slurm_job_id", "task_index", "rq_job_id")
#: where a context keeps the request whose user is read late (not a field: never written as is)
_REQUEST = "_request"

# The variable's name is what it was when it lived in portal.logs: nothing reads it, but a debugger shows it.
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
        user_id = resolved_user_id(values[_REQUEST])
        if user_id is not None:
            found["user_id"] = user_id
    return {k: found[k] for k in FIELDS if k in found}


def resolved_user_id(request) -> int | None:
    """The request's user's id when authentication has already found it; None otherwise (nobody
    logged in, or not looked up yet: evaluating the lazy user would query the session here)."""
    user = getattr(request, "__dict__", {}).get("user")
    if isinstance(user, SimpleLazyObject):
        user = None if user._wrapped is empty else user._wrapped
    return user.pk if getattr(user, "is_authenticated", False) else None
