"""Keeping user-chosen paths inside the folders a cluster profile allows, and mapping portal paths.

`check_in_roots` is pure and lexical; `resolve_remote_in_roots` also asks the cluster where the path
really leads (symlinks), because a link inside an allowed root may point anywhere. Use the path
these functions RETURN, never the one that came in.

`list_folder_in_roots` lists a folder with EVERY entry resolved on the cluster, in one command (one
round trip, however many files): a file that is a link leading out of the roots (to a system file,
to another user's upload in the work root) comes back `refused`, never as a usable path. The
command is built by `list_folder_argv` and its answer read by `parse_folder_listing`, both pure.

Each function also takes `refused`: folders inside the roots that may NOT be used (another team's
folders, jobs.clusters.team_roots). A path is allowed when the deepest folder holding it, of the
roots and the refused ones, is a root (`allows`): /srv/storage allows /srv/storage/x, refuses
/srv/storage/teams/post/x when /srv/storage/teams/post is refused, and allows it again below a root
lying deeper still. A refused path is refused in the same words as one outside the roots.
"""
from __future__ import annotations

import dataclasses
import posixpath
from collections.abc import Iterable, Sequence
from typing import Literal, Protocol

from .errors import ClusterError, PathNotAllowed, RemoteFileError


class _Resolver(Protocol):
    def realpath(self, remote_path: str) -> str: ...


class _CommandResult(Protocol):
    rc: int
    stdout: str
    stderr: str


class CommandRunner(Protocol):
    """What a function here needs of `cluster.SSHRunner` to run a command (tests pass stand-ins)."""

    def run(self, argv: list[str], stdin: bytes | str | None = None, timeout: float = 60,
            check: bool = False) -> _CommandResult: ...


def normal_path(path: str, what: str = "path") -> str:
    """`path` normalized (no `//`, `.` or trailing `/`); PathNotAllowed, naming it as `what`, when it
    is empty, relative, holds `..`, a NUL byte or a line break."""
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


def is_inside(path: str, root: str) -> bool:
    """Whether the normalized `path` is `root` or lies below it, by whole folder names (/database is
    not inside /data)."""
    return root == "/" or path == root or path.startswith(root + "/")


def allows(path: str, roots: Iterable[str], refused: Iterable[str] = ()) -> bool:
    """Whether the normalized `path` may be used: it lies inside one of the normalized `roots`, and
    no `refused` folder holding it lies deeper than the deepest of those roots (one as deep, the
    same folder named twice, does not refuse it). Pure and lexical."""
    deepest = max((len(root) for root in roots if is_inside(path, root)), default=0)
    return deepest > 0 and not any(len(no) > deepest for no in refused if is_inside(path, no))


def check_in_roots(path: str, roots: list[str], refused: Sequence[str] = ()) -> str:
    """The normalized `path` if it lies inside one of `roots` (a root itself counts) and not inside
    one of `refused` (see `allows`); else PathNotAllowed, in the same words either way."""
    normal = normal_path(path)
    clean_roots = [normal_path(root, "allowed root") for root in roots]
    clean_refused = [normal_path(no, "refused folder") for no in refused]
    if not allows(normal, clean_roots, clean_refused):
        raise PathNotAllowed(f"{normal} is outside the folders this cluster profile allows")
    return normal


def resolve_remote_in_roots(runner: _Resolver, path: str, roots: list[str], refused: Sequence[str] = ()) -> str:
    """Like `check_in_roots`, then resolve symlinks on the cluster and check again.

    Returns the resolved path. Roots (and refused folders) are resolved too, so a root that is
    itself a symlink (e.g. /storage -> /mnt/nfs/storage) still admits paths under its target. Errors
    from the runner (a path that does not exist: RemoteFileError) propagate.
    """
    normal = check_in_roots(path, roots, refused)
    real = normal_path(runner.realpath(normal), "resolved path")

    def both_forms(folders: Sequence[str], what: str) -> list[str]:
        out = [normal_path(folder, what) for folder in folders]
        for folder in list(out):
            try:
                out.append(normal_path(runner.realpath(folder), what))
            except RemoteFileError:  # a folder that does not exist (yet) adds nothing
                continue
        return out

    if not allows(real, both_forms(roots, "allowed root"), both_forms(refused, "refused folder")):
        raise PathNotAllowed(f"{normal} leads to {real} (through a symbolic link), which is outside "
                             f"the folders this cluster profile allows")
    return real


def map_path(path: str, mapping: list[tuple[str, str]]) -> str:
    """Translate `path` with (from_prefix, to_prefix) pairs; the longest matching prefix wins.

    Prefixes match whole folder names: ("/data", "/mnt/data") maps /data/x but not /database.
    Pass the pairs reversed to map the other way. No matching prefix: PathNotAllowed.
    """
    normal = normal_path(path)
    best: tuple[str, str] | None = None
    for source, target in mapping:
        source_n = normal_path(source, "mapped folder")
        if is_inside(normal, source_n) and (best is None or len(source_n) > len(best[0])):
            best = (source_n, normal_path(target, "mapped folder"))
    if best is None:
        raise PathNotAllowed(f"{normal} is not inside any folder mapped between the portal and the cluster")
    source, target = best
    rest = normal[len(source):].lstrip("/") if source != "/" else normal.lstrip("/")
    return posixpath.join(target, rest) if rest else target


# ---- a folder, every entry resolved, in one command ------------------------------------------------

#: why an entry of a listing may not be used (`FolderEntry.refused`); the portal words it
Refusal = Literal["link_outside"]


@dataclasses.dataclass(frozen=True)
class FolderEntry:
    """One entry of a folder as `list_folder_in_roots` found it, links followed.

    `path` is where the entry really is (symlinks resolved): use it, not folder + name. A refused
    entry (a link leading out of the roots) keeps the link's own path, so its target is never
    handed on by mistake. `type` is what the entry leads to; a broken link is "other".
    """

    name: str
    path: str
    type: Literal["dir", "file", "other"]
    size: int
    mtime: int
    link: bool = False
    refused: Refusal | None = None


@dataclasses.dataclass(frozen=True)
class FolderListing:
    path: str  # the folder's resolved path, inside the roots
    entries: tuple[FolderEntry, ...]  # sorted by name


#: Prints, NUL-separated: the roots resolved, an empty field, the folder resolved, then one record
#: per entry: `p|l, type, size, mtime, name` (p: plain, l: a link; `find -L` reports what a link
#: leads to). Links are resolved in batches by `_RESOLVE_LINKS` (one `realpath` per batch, not per
#: file). The folder is entered with `cd -P` and listed as `.`, so the listing is exactly the
#: folder whose resolved path was printed, even if a link on the way changes meanwhile.
#: Exit 102, 120, 113: the folder is missing, not a folder, not readable (100 + the errno; find's own
#: exit statuses are 0 and 1).
_LIST_FOLDER = r"""resolve=$1 folder=$2; shift 2
realpath -mz -- "$@" || exit 3
printf '\0'
[ -e "$folder" ] || { echo 'no such file or folder' >&2; exit 102; }
[ -d "$folder" ] || { echo 'not a folder' >&2; exit 120; }
{ cd -P -- "$folder" && [ -r . ] && [ -x . ]; } 2>/dev/null || { echo 'permission denied' >&2; exit 113; }
realpath -z -- . || exit 3
exec find -L . -mindepth 1 -maxdepth 1 \( -xtype l -printf 'l\0%y\0%s\0%T@\0%f\0' -exec sh -c "$resolve" sh {} + \) \
  -o -printf 'p\0%y\0%s\0%T@\0%f\0'"""

#: One batch of links: `r, count, the links (./name) ..., their resolved paths ..., an empty field`.
#: A link realpath cannot resolve prints nothing, so a short batch leaves all its links unresolved.
_RESOLVE_LINKS = r"""printf 'r\0%s\0' "$#"; printf '%s\0' "$@"; realpath -mz -- "$@"; printf '\0'"""

_EXIT_ERRNO = {102: 2, 120: 20, 113: 13}
_ERRNO_WORDS = {2: "no such file or folder", 20: "not a folder", 13: "permission denied"}


def list_folder_argv(folder: str, roots: list[str]) -> list[str]:
    """The command listing `folder` (absolute, checked by `check_in_roots`) with its entries and
    `roots` (the allowed roots, then any refused folders) resolved on the cluster; its answer is
    read by `parse_folder_listing`."""
    return ["sh", "-c", _LIST_FOLDER, "sh", _RESOLVE_LINKS, folder, *roots]


@dataclasses.dataclass(frozen=True)
class _Raw:
    kind: str  # "p" plain or "l" link
    type: str  # find's %y after following links: f, d, l (broken), ...
    size: int
    mtime: int
    name: str


def parse_folder_listing(stdout: str, n_roots: int) -> tuple[list[str], str, list[_Raw], dict[str, str]]:
    """(resolved roots, resolved folder, entries, {link name: resolved path}) from the answer of
    `list_folder_argv`. A link missing from the map could not be resolved. ClusterError when the
    answer is not in that shape."""
    fields = stdout.split("\0")
    if fields[-1] != "":
        raise ClusterError("the folder listing from the cluster was cut off")
    fields = iter(fields[:-1])
    try:
        roots = [next(fields) for _ in range(n_roots)]
        if next(fields) != "":
            raise ValueError("roots")
        folder = next(fields)
        entries: list[_Raw] = []
        resolved: dict[str, str] = {}
        for kind in fields:
            if kind in ("p", "l"):
                type_, size, mtime, name = next(fields), next(fields), next(fields), next(fields)
                entries.append(_Raw(kind, type_, int(size), int(float(mtime)), name))
            elif kind == "r":
                links = [next(fields).removeprefix("./") for _ in range(int(next(fields)))]
                reals = []
                while (real := next(fields)) != "":
                    reals.append(real)
                if len(reals) == len(links):
                    resolved.update(zip(links, reals))
            else:
                raise ValueError(kind)
    except (StopIteration, ValueError):
        raise ClusterError("the folder listing from the cluster could not be read") from None
    return roots, folder, entries, resolved


def list_folder_in_roots(runner: CommandRunner, path: str, roots: list[str], timeout: float = 120,
                         refused: Sequence[str] = ()) -> FolderListing:
    """The entries of the folder `path`, each resolved on the cluster and checked against `roots`
    and `refused` (folders inside the roots that may not be used: `allows`).

    One command, whatever the number of entries. The folder itself must resolve inside a root and
    outside the refused folders (PathNotAllowed otherwise, as from `resolve_remote_in_roots`); an
    entry that is a link leading out of the roots, or into a refused folder, is returned with
    `refused="link_outside"`, its link path and no target; a refused folder itself (a sub-folder
    that is another team's) is left out. A missing or unreadable folder raises RemoteFileError.
    """
    normal = check_in_roots(path, roots, refused)
    clean_roots = [normal_path(root, "allowed root") for root in roots]
    clean_refused = [normal_path(no, "refused folder") for no in refused]
    res = runner.run(list_folder_argv(normal, clean_roots + clean_refused), timeout=timeout)
    if res.rc in _EXIT_ERRNO:
        errno = _EXIT_ERRNO[res.rc]
        raise RemoteFileError(f"cannot list {normal} on the cluster: {_ERRNO_WORDS[errno]}", normal, errno)
    if res.rc != 0 and not res.stdout:
        last = res.stderr.strip().splitlines()[-1:] or [f"exit status {res.rc}"]
        raise ClusterError(f"cannot list {normal} on the cluster: {last[0]}")
    # find's own exit status is not checked: it is 1 after a link loop, whose entry it leaves out.
    real_all, real, raw, resolved = parse_folder_listing(res.stdout, len(clean_roots) + len(clean_refused))
    real_roots, real_refused = real_all[:len(clean_roots)], real_all[len(clean_roots):]
    candidates = clean_roots + [r for r in real_roots if r.startswith("/")]
    refusing = clean_refused + [r for r in real_refused if r.startswith("/")]
    if not real.startswith("/") or not allows(real, candidates, refusing):
        raise PathNotAllowed(f"{normal} leads to {real} (through a symbolic link), which is outside "
                             f"the folders this cluster profile allows")
    entries = []
    for e in raw:
        here = posixpath.join(real, e.name)
        kind = "file" if e.type == "f" else "dir" if e.type == "d" else "other"
        if e.kind == "p":
            if allows(here, candidates, refusing):  # else: a refused folder itself, never shown
                entries.append(FolderEntry(e.name, here, kind, e.size, e.mtime))
            continue
        target = resolved.get(e.name)
        if target is None:  # could not be resolved: offered as nothing
            entries.append(FolderEntry(e.name, here, "other", e.size, e.mtime, link=True))
        elif not allows(target, candidates, refusing):
            entries.append(FolderEntry(e.name, here, kind, e.size, e.mtime, link=True, refused="link_outside"))
        else:
            entries.append(FolderEntry(e.name, target, kind, e.size, e.mtime, link=True))
    return FolderListing(real, tuple(sorted(entries, key=lambda e: e.name)))


def answer_folder_listing(argv: list[str], entries) -> str:
    """For tests' fake runners: what the cluster answers to `list_folder_argv(folder, roots)` (given
    as `argv`) for a folder that holds `entries` (anything with `name`, `type` "file" | "dir" and
    `size`), no links, the folder and the roots being where they are. Read by `parse_folder_listing`."""
    folder, roots = argv[5], argv[6:]
    fields = [*roots, "", folder]
    for e in entries:
        fields += ["p", {"file": "f", "dir": "d"}.get(e.type, "p"), str(e.size or 0), "0", e.name]
    return "\0".join(fields) + "\0"
