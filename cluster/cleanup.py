"""Deleting a job's folder on the cluster (retention, "Delete job and files").

`rm -rf` is the most dangerous command the portal sends, so the folder is checked twice:

- here, lexically (`job_folder_delete_argv`): absolute, no `..`, strictly inside the work root, and
  the work root is not `/`;
- on the cluster (`_DELETE_FOLDER`): the work root and the folder's PARENT are resolved with
  `realpath` (symlinks followed) and the parent must lie inside the resolved root, else the script
  exits 3 and deletes nothing. The folder's own last name is never resolved: a job folder that is
  itself a symbolic link loses the link, never what it points to (`rm -rf link` removes the link).

The paths travel as arguments of `sh -c` (never spliced into the script), so no name can become
shell syntax.
"""
from __future__ import annotations

import dataclasses

from .errors import ClusterError, PathNotAllowed
from .paths import CommandRunner, is_inside, normal_path  # the same checks and runner shape as folder listings

#: exit 0 and "deleted" / "gone" (nothing was there); exit 3: outside the work root (nothing deleted);
#: exit 4: the work root itself is missing; exit 5: rm failed (part may be left).
_DELETE_FOLDER = r"""root=$1 folder=$2
real_root=$(realpath -e -- "$root" 2>/dev/null) || { echo 'the work root does not exist' >&2; exit 4; }
name=$(basename -- "$folder")
case $name in ''|.|..|/) echo 'refused: not a folder name' >&2; exit 3;; esac
real_parent=$(realpath -e -- "$(dirname -- "$folder")" 2>/dev/null) || { echo gone; exit 0; }
case $real_parent in
  "$real_root"|"$real_root"/*) ;;
  *) echo "refused: $folder leads outside the work root" >&2; exit 3;;
esac
target=$real_parent/$name
{ [ -e "$target" ] || [ -L "$target" ]; } || { echo gone; exit 0; }
rm -rf -- "$target" || exit 5
{ [ -e "$target" ] || [ -L "$target" ]; } && { echo 'some files could not be deleted' >&2; exit 5; }
echo deleted"""


@dataclasses.dataclass(frozen=True)
class FolderDeleted:
    """What `delete_job_folder` found: `existed` False when the folder was already gone."""

    path: str
    existed: bool


def job_folder_delete_argv(folder: str, work_root: str) -> list[str]:
    """The command deleting `folder`, which must lie strictly inside `work_root` (PathNotAllowed otherwise)."""
    root = normal_path(work_root, "work root")
    path = normal_path(folder, "job folder")
    if root == "/":
        raise PathNotAllowed("the work root must not be / (a job folder is deleted only inside a work root)")
    if path == root or not is_inside(path, root):
        raise PathNotAllowed(f"{path} is not inside the work root {root}")
    return ["sh", "-c", _DELETE_FOLDER, "sh", root, path]


def delete_job_folder(runner: CommandRunner, folder: str, work_root: str, timeout: float = 600) -> FolderDeleted:
    """Delete `folder` (a job's folder) on the cluster, checked on both sides (module docstring).

    PathNotAllowed when the folder is, or leads, outside the work root; ClusterError when the
    deletion failed; errors of the runner (unreachable cluster) propagate.
    """
    argv = job_folder_delete_argv(folder, work_root)
    res = runner.run(argv, timeout=timeout)
    last = (res.stderr.strip().splitlines() or [f"exit status {res.rc}"])[-1]
    if res.rc == 3:
        raise PathNotAllowed(f"the cluster refused to delete {argv[-1]}: {last}")
    if res.rc != 0:
        raise ClusterError(f"could not delete {argv[-1]} on the cluster: {last}")
    return FolderDeleted(argv[-1], existed=res.stdout.strip() == "deleted")
