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

A new action needs no schema change: add the code where it happens, a line above, and its words in
`ACTION_WORDS` (what the admin's audit log shows; the code stays in the database and the details).

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

from django.apps import apps
from django.db import transaction
from django.utils.translation import gettext_lazy as _

from jobs.log_context import current as log_ids
from jobs.models import AuditEntry

log = logging.getLogger(__name__)

__all__ = ["ACTION_WORDS", "action_words", "record", "target_fields", "client_ip"]

#: longest text kept for a target's description (the column's length)
TARGET_REPR_LENGTH = 300

#: each action's code -> what happened, in words an admin who never saw the code understands
ACTION_WORDS = {
    "auth.login": _("Logged in"),
    "auth.logout": _("Logged out"),
    "auth.login_failed": _("Failed to log in (wrong user name or password)"),
    "auth.locked_out": _("Locked out after too many failed logins"),
    "auth.token_locked_out": _("Locked out after too many wrong API tokens"),
    "account.email_change_asked": _("Asked to change their email address"),
    "account.email_change": _("Changed their email address"),
    "job.start": _("Started a job"),
    "job.cancel": _("Cancelled a job"),
    "job.retry": _("Ran a job's failed photos and videos again"),
    "job.download": _("Downloaded results"),
    "job.face_file": _("Opened a face photo or result in the admin"),
    "job.files_deleted": _("Deleted a job's files"),
    "job.cluster_files_deleted": _("Deleted a job's files on the cluster"),
    "target.replace": _("Replaced a photo or video of a job"),
    "content_check.refused": _("The content check refused a photo or result"),
    "booking.create": _("Asked for a GPU booking"),
    "booking.place": _("A GPU booking was placed in the cluster's calendar"),
    "booking.confirm": _("A GPU booking was confirmed"),
    "booking.start": _("A GPU booking started"),
    "booking.end": _("A GPU booking ended"),
    "booking.refuse": _("A GPU booking was refused"),
    "booking.cancel": _("A GPU booking was cancelled"),
    "booking.reservation": _("The cluster reserved the GPUs of a booking"),
    "booking.reservation_deleted": _("The cluster freed the GPUs of a booking"),
    "booking.jobs_moved_out": _("Jobs waiting in a GPU booking were moved to the open queue"),
    "webhook.send_again": _("Sent a webhook call again"),
    "team.member_quota": _("A team lead set a member's limits"),
    "team.templates": _("A team lead chose the templates the team sees"),
    "webhook_secret.create": _("Created a webhook secret"),
    "webhook_secret.rotate": _("Replaced the webhook secret"),
}
#: "<thing>.add" and the like, written for every admin change (jobs.admin.base): the thing is named
#: by its table's own translated name
_CHANGE_WORDS = {
    "add": _("Added %(thing)s"),
    "change": _("Changed %(thing)s"),
    "delete": _("Deleted %(thing)s"),
}


def action_words(action: str, target_type: str = "") -> str:
    """What `action` (a code, e.g. "job.retry") means, in the active language; the code itself when
    it has no words (an action added without its line in ACTION_WORDS is still shown)."""
    if action in ACTION_WORDS:
        return str(ACTION_WORDS[action])
    verb = action.rpartition(".")[2]
    if verb in _CHANGE_WORDS and target_type.count(".") == 1:
        try:
            thing = apps.get_model(target_type)._meta.verbose_name
        except LookupError:
            return action
        return str(_CHANGE_WORDS[verb]) % {"thing": thing}
    return action


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
        details = _for_whom(user, target, details)
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


def _for_whom(user, target: Any, details: dict | None) -> dict | None:
    """A team lead acting on a member's job (jobs.access) is recorded as acting FOR that member, in
    that team: `{"owner": <owner>, "team": <account>}` joins the details (an admin acting in the
    admin likewise)."""
    owner_id = getattr(target, "owner_id", None)
    if user is None or owner_id is None or owner_id == user.pk or not hasattr(target, "slurm_account"):
        return details
    return {**(details or {}), "owner": target.owner.get_username(), "team": target.slurm_account}


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
