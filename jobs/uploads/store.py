"""Files sent ahead of Start: created, appended to piece by piece, checked, claimed by a Start,
removed, expired. The tus views (jobs/web/views/uploads.py) and Start (jobs/job/start.py) call these.

Bounded whatever is sent: a piece is copied to disk 64 KiB at a time, never held whole; a user's
unused uploads are limited in number and bytes (UPLOADS_PENDING_MAX_*), so an abandoned form
cannot fill the disk before expiry removes it.
"""
from __future__ import annotations

import fcntl
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Count, F, Sum
from django.template.defaultfilters import filesizeformat
from django.utils import timezone
from django.utils.translation import gettext as _

from jobs.errors import PortalError
from jobs.models import Upload, UploadKind, UploadPolicy, UploadStatus
from jobs.models.upload import upload_dir
from jobs.uploads.content import safe_name, unique_name, without_hidden_characters
from jobs.uploads.on_complete import check_arrived

log = logging.getLogger(__name__)

#: bytes read from the request and written at a time
COPY_BYTES = 64 * 1024


class UploadRefused(PortalError):
    """A request about an upload that cannot be honoured; `status` is the HTTP status to answer, and
    `offset`, when known, how much the server has (tus answers a 409 with it, to resume from)."""

    def __init__(self, message: str, status: int, offset: int | None = None):
        super().__init__(message)
        self.status = status
        self.offset = offset


def create(user, kind: str, name: str, size: int) -> Upload:
    """A new, empty upload of `size` bytes; UploadRefused when it is too big or too many are waiting."""
    name = without_hidden_characters(name)  # shown as sent, everywhere: jobs.uploads.content says why
    if kind not in UploadKind.values:
        raise UploadRefused(_("Unknown kind of file."), 400)
    if size <= 0:
        raise UploadRefused(_("The file is empty (0 bytes); choose it again."), 400)
    if size > settings.UPLOAD_MAX_BYTES:
        raise UploadRefused(_("%(name)s is %(size)s, over the limit of %(limit)s per file.") % {
            "name": name, "size": filesizeformat(size), "limit": filesizeformat(settings.UPLOAD_MAX_BYTES)}, 413)
    waiting = Upload.objects.of(user).aggregate(n=Count("pk"), bytes=Sum("size"))
    if waiting["n"] >= settings.UPLOADS_PENDING_MAX_FILES:
        raise UploadRefused(_("You have %(n)s files waiting to be used; start a job with them or remove some first.")
                            % {"n": waiting["n"]}, 429)
    if (waiting["bytes"] or 0) + size > settings.UPLOADS_PENDING_MAX_BYTES:
        raise UploadRefused(_("Your files waiting to be used would pass %(limit)s; start a job with them or remove some first.")
                            % {"limit": filesizeformat(settings.UPLOADS_PENDING_MAX_BYTES)}, 413)
    folder = upload_dir(user.pk)
    _private_dirs(folder)
    upload = Upload(owner=user, kind=kind, name=name[:500] or "file", size=size)
    upload.touch()
    fd = os.open(upload.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    try:
        upload.save()
    except Exception:
        upload.path.unlink(missing_ok=True)
        raise
    return upload


def append(upload: Upload, offset: int, stream, length: int | None) -> Upload:
    """Write the bytes of `stream` at `offset` (which must be where the upload stopped), then check
    the file if it is complete. Returns the upload as it now is.

    One piece at a time per upload: the writer holds an exclusive lock on the file (flock, taken
    without waiting) and reads the offset again under it, BEFORE writing a byte. A second piece
    sent at the same time (a client that retried, two tabs) is refused with 409 and the server's
    offset; its bytes never reach the file. Without the lock both would write, and the loser's
    bytes, written before its offset update failed, would stay in the winner's place."""
    if upload.is_complete:
        if offset == upload.size:
            return upload  # a repeated last piece: nothing to add
        raise UploadRefused(_("This file has already been sent in full."), 409, upload.size)
    if offset != upload.offset:
        raise _out_of_step(upload.offset)
    room = upload.size - offset
    if length is not None and length > room:
        raise UploadRefused(_("More bytes were sent than the file has."), 400)
    with open(upload.path, "r+b") as out:
        try:
            fcntl.flock(out, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UploadRefused(_("Another piece of this file is being sent; it resumes from the server's count."),
                                409, _offset_now(upload)) from None
        # Under the lock the database's offset is the truth: a piece that won before us moved it.
        now_at = _offset_now(upload)
        if now_at is None:
            raise UploadRefused(_("This upload is no longer kept; choose the file again."), 404)
        if now_at != offset:
            raise _out_of_step(now_at)
        written = _copy(stream, out, offset, room)
        # Still conditional: the lock is this machine's; the row guards against anything else.
        moved = Upload.objects.filter(pk=upload.pk, offset=offset).update(
            offset=offset + written, received=F("received") + written, updated_at=timezone.now(),
            expires_at=timezone.now() + UploadPolicy.current().expiry)
    if not moved:
        raise _out_of_step(_offset_now(upload))
    upload.refresh_from_db()
    if upload.is_complete and upload.status == UploadStatus.RECEIVING:
        check_arrived(upload)
    return upload


def _out_of_step(server_offset: int | None) -> UploadRefused:
    return UploadRefused(_("The upload and the server disagree on how much was sent; it resumes from the server's count."),
                         409, server_offset)


def _offset_now(upload: Upload) -> int | None:
    """The upload's offset in the database now; None when it was removed meanwhile."""
    return Upload.objects.filter(pk=upload.pk).values_list("offset", flat=True).first()


def _copy(stream, out, offset: int, room: int) -> int:
    """Copy `stream` into `out` at `offset`, COPY_BYTES at a time, at most `room` bytes; returns how
    many. More than `room` is refused (400) and not counted."""
    written = 0
    out.seek(offset)
    while written < room:
        piece = stream.read(min(COPY_BYTES, room - written))
        if not piece:
            break
        out.write(piece)
        written += len(piece)
    if stream.read(1):
        raise UploadRefused(_("More bytes were sent than the file has."), 400)
    return written


def keep(user, f, kind: str, name: str | None = None) -> Upload | None:
    """Make the file `f` (sent with a form, or a job's own input: anything with read(), or a path)
    an upload of `user`, checked as if sent ahead: a refused Start then loses none of its good files,
    and "Run again" starts from the files of the job it repeats. A job's file is linked, not copied,
    where the file system allows. None when the file is refused (the caller has already said why)."""
    if isinstance(f, (str, os.PathLike)):
        if not os.path.isfile(f):
            return None  # a job's file removed since (results cleaned up): nothing to offer
        size, name = os.path.getsize(f), name or os.path.basename(f)
    else:
        size, name = f.size, name or f.name
    try:
        upload = create(user, kind, name, size)
    except UploadRefused:
        return None
    if isinstance(f, (str, os.PathLike)):
        try:
            os.unlink(upload.path)
            os.link(f, upload.path)
        except OSError:
            shutil.copyfile(f, upload.path)
    else:
        f.seek(0)
        with open(upload.path, "r+b") as out:
            shutil.copyfileobj(f, out, COPY_BYTES)
        f.seek(0)
    Upload.objects.filter(pk=upload.pk).update(offset=size, received=size)
    upload.offset = upload.received = size
    check_arrived(upload)
    if upload.status != UploadStatus.READY:
        remove(upload)
        return None
    return upload


def remove(upload: Upload) -> None:
    upload.remove_files()
    upload.delete()


@dataclass
class Claimed:
    """An upload moved into a job: where its bytes now are, and the names to store them under."""

    upload: Upload
    path: Path  # relative to MEDIA_ROOT


def claim(uploads: list[Upload], folder: Path, names: list[str] | None = None) -> list[Claimed]:
    """Move the uploads' files into `folder` (a job's sources/ or targets/), keeping their order and
    giving each a unique safe name (or the one in `names`). The caller deletes the rows in its transaction; on failure it calls
    `unclaim`, which puts the files back, so a Start that fails loses nothing that was sent."""
    if not uploads:
        return []
    _private_dirs(folder)
    used: set[str] = set()
    moved: list[Claimed] = []
    root = Path(settings.MEDIA_ROOT)
    try:
        for i, upload in enumerate(uploads):
            name = names[i] if names else unique_name(safe_name(upload.name), used)
            dest = folder / name
            os.replace(upload.path, dest)
            moved.append(Claimed(upload, dest.relative_to(root)))
    except OSError:
        unclaim(moved)
        raise
    return moved


def unclaim(claimed: list[Claimed]) -> None:
    root = Path(settings.MEDIA_ROOT)
    for c in claimed:
        try:
            os.replace(root / c.path, c.upload.path)
        except OSError as exc:  # pragma: no cover - the job's folder vanished under us
            log.error("could not put upload %s back: %s", c.upload.id, exc)


def expire(now=None) -> int:
    """Delete the uploads no Start used in time (UploadPolicy); returns how many."""
    n = 0
    for upload in Upload.objects.expired(now).iterator(chunk_size=500):
        with transaction.atomic():
            if Upload.objects.filter(pk=upload.pk).expired(now).delete()[0]:
                upload.remove_files()
                n += 1
    if n:
        log.info("removed %d unused upload(s)", n)
    return n


def keep_alive(uploads) -> None:
    """Push back the expiry of uploads the user is looking at (shown on the form again)."""
    Upload.objects.filter(pk__in=[u.pk for u in uploads]).update(
        expires_at=timezone.now() + UploadPolicy.current().expiry)


def _private_dirs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    # mkdir's mode is masked by the umask: make sure, for every level the portal made
    root = Path(settings.MEDIA_ROOT)
    for p in [folder, *folder.parents]:
        if p == root or root not in p.parents:
            break
        if p.stat().st_mode & 0o077:
            os.chmod(p, 0o700)
