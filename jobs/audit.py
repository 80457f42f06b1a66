"""The audit log: who did what and when. One function writes it: `record(...)`.

    from jobs import audit
    audit.record(request.user, "job.cancel", target=job, request=request)

Actions are short dotted codes, `<thing>.<verb>`; the ones the portal writes today:

    auth.login  auth.logout  auth.login_failed          (jobs.signals, from Django's auth signals)
    job.start  job.cancel  job.retry  job.download      (start, lifecycle, retry, web/views/files.py, api/views.py)
    job.face_file                                       (admin/faces.py: a face photo or result opened in the admin)
    job.files_deleted  job.cluster_files_deleted        (jobs.results.retention: counts and bytes, never file names)
    content_check.refused                               (jobs.content_safety: source|output, upload or job id and target index, labels and scores; never images or names)
    template.add/change/delete  quota.add/change/delete  profile.add/change/delete  (admin.AuditedAdmin)

A new action needs no schema change: add the code where it happens, and a line above.

Auditing never breaks what is being audited: `record` logs and swallows every error (a full disk
or a locked table must not fail a Start or a download), and it writes inside its own savepoint,
so a failed insert does not poison the caller's transaction (PostgreSQL aborts the whole
transaction on any failed statement otherwise). Inside a caller's transaction the entry commits
or rolls back with it: a Start refused by its quota leaves no "job.start" behind.
"""
from __future__ import annotations

import ipaddress
import logging
from typing import Any

from django.db import transaction

from jobs.log_context import current as log_ids
from jobs.models import AuditEntry

log = logging.getLogger(__name__)

__all__ = ["record", "target_fields", "client_ip"]

#: longest text kept for a target's description (the column's length)
TARGET_REPR_LENGTH = 300


def record(actor, action: str, target: Any = None, details: dict | None = None, request=None):
    """Write one audit entry; returns it, or None when it could not be written (logged, never raised).

    actor: the user who acted (None or an anonymous user for "nobody logged in": failed logins).
    target: a model instance (its type, pk and str are kept), or None.
    details: JSON-able facts of the action (changed field names, file name ...). Never secrets.
    request: where the client's IP address is read from, when there is one.

    The request's id (X-Request-ID) and an RQ job's id join `details` as "request_id" and
    "rq_job_id" when the action happens inside one (jobs.log_context): the entry's log lines carry them too.
    """
    try:
        user = actor if getattr(actor, "is_authenticated", False) else None
        name = user.get_username() if user is not None else ""
        target_type, target_id, target_repr = target_fields(target)
        with transaction.atomic():
            return AuditEntry.objects.create(
                actor=user, actor_name=name[:150], action=action[:64], target_type=target_type,
                target_id=target_id, target_repr=target_repr, details=with_log_ids(details, request),
                ip=client_ip(request),
            )
    except Exception:
        log.exception("audit: could not record %s by %s", action, getattr(actor, "pk", None))
        return None


def with_log_ids(details: dict | None, request=None) -> dict:
    """`details` plus the ids that tie the entry to its log lines; the caller's own keys win."""
    ids = {k: v for k, v in log_ids().items() if k in ("request_id", "rq_job_id")}
    if "request_id" not in ids and getattr(request, "request_id", None):
        ids["request_id"] = request.request_id
    return {**ids, **(details or {})}


def target_fields(target: Any) -> tuple[str, str, str]:
    """(type, id, text) of a model instance: "jobs.template", "3", "GPU fast"; ("", "", "") for None."""
    if target is None:
        return "", "", ""
    meta = getattr(target, "_meta", None)
    target_type = meta.label_lower if meta is not None else type(target).__name__.lower()
    pk = getattr(target, "pk", None)
    try:
        text = str(target)
    except Exception:  # noqa: BLE001 - a broken __str__ must not lose the entry
        text = ""
    return target_type[:64], "" if pk is None else str(pk)[:64], text[:TARGET_REPR_LENGTH]


def client_ip(request) -> str | None:
    """The client's address as Django got it (REMOTE_ADDR). Forwarded-for headers are not read
    here: any client can write them. Behind nginx, the web server sets REMOTE_ADDR from them only
    for requests from FFP_TRUSTED_PROXIES (portal/server.py)."""
    if request is None:
        return None
    raw = (getattr(request, "META", {}) or {}).get("REMOTE_ADDR") or ""
    try:
        return str(ipaddress.ip_address(raw.strip()))
    except ValueError:
        return None
