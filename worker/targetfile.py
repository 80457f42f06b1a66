"""Opening a target on the node: where it really lies is checked right before it is read.

The portal resolves and checks every file when it lists a folder, and hands the worker the path
where each one really is. But the storage may change before a task runs (a photo replaced by a
link to a system file or to another user's upload), so the worker checks again, at the last
moment, and then reads only what it checked:

1. With the manifest's `target_roots`, the target's path is resolved (every link on the way
   followed) and must lie inside one of them. Without them, the path must lead where it says: a
   target that is itself a link, or that lies behind a folder that is a link, is refused (the
   portal never hands over such a path). Either way, the job's own `targets/` folder (uploads the
   portal staged) is admitted. With the manifest's `refused_roots` (other teams' folders), a
   target that really lies inside one of them is refused in the same words as one outside, unless
   a target root holding it lies deeper still (a team's folder inside another team's).
2. The file is opened without following a link in its last part, and must be an ordinary file (a
   named pipe would hang the task, a device has no end). The path of what was opened is checked
   again (Linux: /proc/self/fd), so a swap between the check and the open is caught as well.
3. Everything then reads that open file through `OpenTarget.path`, `/proc/<pid>/fd/<n>`: ffmpeg
   in a child process too, several times over minutes. A later swap of the path changes nothing.

A refused target raises TargetRefused, a TargetError whose message starts with "skipped: ".
Only the standard library is imported.
"""
from __future__ import annotations

import errno
import os
import posixpath
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .errors import TargetError, unreadable
from .layout import JobFolder

LINK_OUTSIDE = "skipped: it is a link that leads outside the folders you may use"
LINK_UNCHECKED = "skipped: it is a link, and a link may lead outside the folders you may use"
OUTSIDE = "skipped: it lies outside the folders you may use (a folder on its way is a link that leads elsewhere)"
BEHIND_A_LINK = "skipped: a folder on its way is a link, and a link may lead outside the folders you may use"
NOT_A_FILE = "skipped: it is not an ordinary file (a pipe, a device or a socket)"

_PROC_FD = "/proc/self/fd"


class TargetRefused(TargetError):
    """The target may not be read: it leads outside the allowed folders, or is no ordinary file."""


@dataclass(frozen=True)
class OpenTarget:
    """A target opened by `open_target`. `path` reads exactly the file that was checked."""

    name: str  # the target's own file name: for messages, and to tell a video from an image
    path: Path
    fd: int


@dataclass(frozen=True)
class Allowed:
    """Where targets may really lie (see `allowed_folders`)."""

    roots: tuple[str, ...] | None  # the manifest's target roots, as written and resolved; None: none given
    uploads: tuple[str, ...] = ()  # the job's own targets/ folder, as written and resolved
    refused: tuple[str, ...] = ()  # the manifest's refused roots (other teams' folders), as written and resolved


def allowed_folders(target_roots: Sequence[str] | None, job_folder: str | None = None,
                    refused_roots: Sequence[str] = ()) -> Allowed:
    """Where a task's targets may lie: `target_roots` (None: the manifest has none) and the job's own
    `targets/` folder under `job_folder`, but not in `refused_roots` (the manifest's: other teams'
    folders), each taken as written and as resolved on this node."""
    def both_forms(folders: Sequence[str]) -> tuple[str, ...]:
        out: list[str] = []
        for folder in folders:
            for form in (posixpath.normpath(folder), os.path.realpath(folder)):
                if form not in out:
                    out.append(form)
        return tuple(out)

    return Allowed(roots=None if target_roots is None else both_forms(target_roots),
                   uploads=both_forms([JobFolder(job_folder).targets]) if job_folder else (),
                   refused=both_forms(refused_roots))


def _holding(path: str, folders: Sequence[str]) -> list[str]:
    return [root for root in folders if root == "/" or path == root or path.startswith(root.rstrip("/") + "/")]


def _inside(path: str, folders: Sequence[str]) -> bool:
    return bool(_holding(path, folders))


def _refused_inside(path: str, allowed: Allowed) -> bool:
    """Whether `path` lies in a refused root deeper than every target root holding it."""
    deepest = max(map(len, _holding(path, allowed.roots or ())), default=0)
    return any(len(no) > deepest for no in _holding(path, allowed.refused))


def _refusal(real: str, written: str, is_link: bool, allowed: Allowed) -> str | None:
    """Why a target whose path `written` resolves to `real` may not be read; None when it may."""
    if _inside(real, allowed.uploads):
        return None
    if allowed.roots is not None:
        ok = _inside(real, allowed.roots) and not _refused_inside(real, allowed)
        return None if ok else LINK_OUTSIDE if is_link else OUTSIDE
    if _refused_inside(real, allowed):  # another team's folder: as outside
        return LINK_OUTSIDE if is_link else OUTSIDE
    if is_link:
        return LINK_UNCHECKED
    return None if real == written else BEHIND_A_LINK


@contextmanager
def open_target(path: str | os.PathLike, allowed: Allowed | None = None) -> Iterator[OpenTarget]:
    """Open the target at `path` for reading, after checking where it really lies (see the module
    docstring); closed on leaving. `allowed`: from `allowed_folders` (None: no roots, no uploads).

    Raises TargetRefused (message "skipped: ...") or TargetError (missing, unreadable).
    """
    allowed = allowed or Allowed(roots=None)
    path = os.fspath(path)
    name = posixpath.basename(path)
    written = posixpath.normpath(os.path.abspath(path))
    try:
        is_link = stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError as exc:
        raise unreadable(name, exc) from None
    real = os.path.realpath(path)
    why = _refusal(real, written, is_link, allowed)
    if why:
        raise TargetRefused(why)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(real, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a link again: it changed since the check
            raise TargetRefused(LINK_OUTSIDE if allowed.roots is not None else LINK_UNCHECKED) from None
        if exc.errno == errno.ENXIO:  # a socket
            raise TargetRefused(NOT_A_FILE) from None
        raise unreadable(name, exc) from None
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            raise TargetRefused(NOT_A_FILE)
        # What was opened, checked once more: a folder on the way may have changed since realpath.
        why = _refusal(_opened_path(fd, real, opened), real, is_link, allowed)
        if why:
            raise TargetRefused(why)
        pinned = f"/proc/{os.getpid()}/fd/{fd}" if os.path.isdir(_PROC_FD) else real
        yield OpenTarget(name=name, path=Path(pinned), fd=fd)
    finally:
        os.close(fd)


def _opened_path(fd: int, real: str, opened: os.stat_result) -> str:
    """Where the open file `fd` really is. Without /proc: `real` when it is still that very file."""
    try:
        return os.readlink(f"{_PROC_FD}/{fd}")
    except OSError:
        pass
    try:
        now = os.stat(real)
    except OSError:
        return ""
    return real if (now.st_dev, now.st_ino) == (opened.st_dev, opened.st_ino) else ""
