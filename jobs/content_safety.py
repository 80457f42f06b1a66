"""The content check on the portal's side: source face photos, the manifest's settings, the audit.

When an admin has turned it on (`jobs.models.SafetyPolicy`), every face photo a user sends is
checked by the model (`worker.content_safety`, the same plug-in the cluster runs): as it arrives ahead of
Start (`screen_upload`) and when it is sent with the Start form or was sent before the check was
on (`screen_start_sources`). A refused photo is refused in plain words and audited. Results are
checked on the cluster (the manifest carries `manifest_spec()`); the watcher audits each result
the worker held back (`audit_held_back`).

The audit entry ("content_check.refused") keeps what was refused and why: the kind (source or
output), the upload or job and target index, the labels and scores. Never image data or file names.
Nothing here loads a model while the check is off.
"""
from __future__ import annotations

import logging
import threading
import time

from django.utils.translation import gettext as _

from jobs import audit
from jobs.errors import UploadRejected
from jobs.models import SafetyPolicy, UploadKind
from jobs.uploads.decoding import decode_slot, small_picture

log = logging.getLogger(__name__)

AUDIT_ACTION = "content_check.refused"
#: at most this many [label, score] pairs are kept from a worker's record (it is the worker's word)
MAX_LABELS = 20

#: the longest side a photo is checked at (NudeNet scales every image to 320x320)
CHECK_SIDE = 640

#: seconds a refused photo is remembered, so that the form keeping it is not audited again
RECENT_S = 60

_checkers: dict = {}
_recent: dict[tuple, float] = {}  # (user id, SHA-256 of a refused photo) -> when
_lock = threading.Lock()


def refused_message() -> str:
    return _("this photo was refused by the content check; choose another photo")


def _checker(spec):
    """One loaded checker per settings, for the life of the process (loading reads the model)."""
    from worker.content_safety import load_checker

    with _lock:
        if spec not in _checkers:
            _checkers.clear()  # settings changed: the old checker is no longer asked
            _checkers[spec] = load_checker(spec)
        return _checkers[spec]


def _labels(picture) -> list[list]:
    """[label, score] that refuse the photo `picture` (a PIL image in RGB), [] when it may be used."""
    import numpy as np

    from worker.content_safety import refused_labels
    from worker.errors import WorkerError

    spec = SafetyPolicy.current().spec()
    try:
        verdict = _checker(spec).check(np.ascontiguousarray(np.asarray(picture.convert("RGB"))[:, :, ::-1]))
    except WorkerError:
        # On but unable to run here: the photo is not used unchecked. The admin reads why in the log.
        log.exception("content check: cannot check a source photo")
        raise UploadRejected(_("the content check cannot run on the portal right now; tell your administrator")) from None
    return refused_labels(verdict, spec) if verdict.refused else []


def _digest(f) -> str:
    import hashlib

    if hasattr(f, "chunks"):
        digest = hashlib.sha256()
        for chunk in f.chunks():
            digest.update(chunk)
        f.seek(0)
        return digest.hexdigest()
    with open(f, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _refused_just_now(user, f) -> bool:
    """The same photo of the same user was refused (and audited) moments ago: a Start form without
    JavaScript keeps its files as uploads right after the refusal, which must not be audited twice."""
    now = time.monotonic()
    with _lock:
        for key in [k for k, at in _recent.items() if now - at > RECENT_S]:
            del _recent[key]
        return bool(_recent) and (user.pk, _digest(f)) in _recent  # nothing refused lately: no hashing


def _refuse(user, labels: list[list], request=None, f=None, **where) -> None:
    audit.record(user, AUDIT_ACTION, request=request, details={"kind": "source", **where, "labels": labels})
    if f is not None:
        with _lock:
            _recent[(user.pk, _digest(f))] = time.monotonic()
    log.info("content check refused a source photo of user %s: %s", getattr(user, "pk", None), labels)
    raise UploadRejected(refused_message())


def screen_upload(upload, picture) -> dict:
    """Check a face photo sent ahead of Start (its `picture`, upright RGB), when the check is on:
    UploadRejected (audited) when refused; else what to keep in the upload's `info`."""
    if upload.kind != UploadKind.SOURCE or not SafetyPolicy.current().checks_sources:
        return {}
    if _refused_just_now(upload.owner, upload.path):
        raise UploadRejected(refused_message())
    labels = _labels(picture)
    if labels:
        _refuse(upload.owner, labels, upload=str(upload.id))
    return {"content_checked": True}


def screen_start_sources(user, files, uploads, problems: list, request=None) -> None:
    """At Start, when the check is on: the face photos sent with the form, and those sent ahead
    before the check was on. Each refused one becomes a problem of the "source" field."""
    if not SafetyPolicy.current().checks_sources:
        return
    pending = [(f.name, f, {}) for f in files] + [
        (u.name, u.path, {"upload": str(u.id)}) for u in uploads if not (u.info or {}).get("content_checked")]
    for name, f, where in pending:
        try:
            with decode_slot():
                picture = _small_picture(f)
        except Exception:  # noqa: BLE001 - not a readable photo: the file checks already say so
            continue
        try:
            labels = _labels(picture)
            if labels:
                _refuse(user, labels, request=request, f=f, at="start", **where)
        except UploadRejected as exc:
            problems.append(("source", _("Source %(name)s: %(reason)s") % {"name": name, "reason": exc.message}))


def _small_picture(f):
    """The photo upright in RGB, at most CHECK_SIDE pixels: the model looks at 320x320 anyway.
    Over the pixel limit it is refused unread (`jobs.uploads.decoding`); the file checks already said so."""
    return small_picture(f, CHECK_SIDE)[0]  # rewound: the file is read again when the job is created


def manifest_spec():
    """The manifest's `safety` (worker.content_safety.SafetySpec) when results are to be checked, else None."""
    policy = SafetyPolicy.current()
    return policy.spec() if policy.checks_outputs else None


def audit_held_back(job, target_index: int, labels) -> None:
    """Record one result the worker held back (its record's labels, checked: the worker's word)."""
    kept = [[str(k)[:64], round(float(s), 3)] for k, s in _pairs(labels)][:MAX_LABELS]
    audit.record(None, AUDIT_ACTION, target=job, details={
        "kind": "output", "job": str(job.id), "target_index": int(target_index), "labels": kept})


def _pairs(labels):
    for item in labels if isinstance(labels, (list, tuple)) else ():
        if isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[1], (int, float)) \
                and not isinstance(item[1], bool):
            yield item
