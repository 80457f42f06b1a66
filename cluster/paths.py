"""Keeping user-chosen paths inside the folders a cluster profile allows, and mapping portal paths.

`check_in_roots` is pure and lexical; `resolve_remote_in_roots` also asks the cluster where the path
really leads (symlinks), because a link inside an allowed root may point anywhere. Use the path
these functions RETURN, never the one that came in.
"""
from __future__ import annotations

import posixpath
from typing import Protocol

from .errors import PathNotAllowed, RemoteFileError


class _Resolver(Protocol):
    def realpath(self, remote_path: str) -> str: ...


def _normalize(path: str, what: str = "path") -> str:
    if not isinstance(path, str) or not path:
        raise PathNotAllowed(f"the {what} is empty")
    if any(c in path for c in "\0\n\r"):
        raise PathNotAllowed(f"the {what} contains a NUL byte or a line break: {path!r}")
    if not path.startswith("/"):
        raise PathNotAllowed(f"the {what} must be absolute (start with /): {path!r}")
    # '..' is refused outright rather than collapsed: lexically "/root/link/.." is "/root", but on
    # the filesystem it is the link target's parent, so collapsing it could hide an escape.
    if ".." in path.split("/"):
        raise PathNotAllowed(f"the {what} must not contain '..': {path!r}")
    normal = posixpath.normpath(path)
    return "/" + normal.lstrip("/")  # normpath keeps a leading '//' (POSIX allows it): drop it


def _inside(path: str, root: str) -> bool:
    return root == "/" or path == root or path.startswith(root + "/")


def check_in_roots(path: str, roots: list[str]) -> str:
    """The normalized `path` if it lies inside one of `roots` (a root itself counts); else PathNotAllowed."""
    normal = _normalize(path)
    clean_roots = [_normalize(root, "allowed root") for root in roots]
    if not any(_inside(normal, root) for root in clean_roots):
        raise PathNotAllowed(f"{normal} is outside the folders this cluster profile allows")
    return normal


def resolve_remote_in_roots(runner: _Resolver, path: str, roots: list[str]) -> str:
    """Like `check_in_roots`, then resolve symlinks on the cluster and check again.

    Returns the resolved path. Roots are resolved too, so a root that is itself a symlink (e.g.
    /storage -> /mnt/nfs/storage) still admits paths under its target. Errors from the runner (a
    path that does not exist: RemoteFileError) propagate.
    """
    normal = check_in_roots(path, roots)
    real = _normalize(runner.realpath(normal), "resolved path")
    candidates = [_normalize(root, "allowed root") for root in roots]
    for root in list(candidates):
        try:
            candidates.append(_normalize(runner.realpath(root), "resolved root"))
        except RemoteFileError:  # a root that does not exist (yet) admits nothing extra
            continue
    if not any(_inside(real, root) for root in candidates):
        raise PathNotAllowed(f"{normal} leads to {real} (through a symbolic link), which is outside "
                             f"the folders this cluster profile allows")
    return real


def map_path(path: str, mapping: list[tuple[str, str]]) -> str:
    """Translate `path` with (from_prefix, to_prefix) pairs; the longest matching prefix wins.

    Prefixes match whole folder names: ("/data", "/mnt/data") maps /data/x but not /database.
    Pass the pairs reversed to map the other way. No matching prefix: PathNotAllowed.
    """
    normal = _normalize(path)
    best: tuple[str, str] | None = None
    for source, target in mapping:
        source_n = _normalize(source, "mapped folder")
        if _inside(normal, source_n) and (best is None or len(source_n) > len(best[0])):
            best = (source_n, _normalize(target, "mapped folder"))
    if best is None:
        raise PathNotAllowed(f"{normal} is not inside any folder mapped between the portal and the cluster")
    source, target = best
    rest = normal[len(source):].lstrip("/") if source != "/" else normal.lstrip("/")
    return posixpath.join(target, rest) if rest else target
