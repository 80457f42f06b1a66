"""The worker's container image on the cluster (a template's `container_image`): is it there and
readable by the portal's cluster account, and which file is it (SHA-256).

Pure functions returning argument lists and parsing their output; the portal runs them over SSH
before it submits a job that runs in a container (jobs.job.container), so a missing image fails the job
before any task starts instead of failing every task.
"""
from __future__ import annotations

import dataclasses
import re


def image_check_argvs(path: str) -> list[list[str]]:
    """Two commands for one round trip (`run_batch`): what the path is (type, bytes, modification
    time to the nanosecond, symlinks followed), and whether the account may read it."""
    return [["stat", "-L", "--format=%F|%s|%.9Y", "--", path], ["test", "-r", path]]


def digest_argv(path: str) -> list[str]:
    return ["sha256sum", "--", path]


@dataclasses.dataclass(frozen=True)
class ImageCheck:
    #: "ok", "missing", "unreadable" or "not_file" (not a regular file with something in it)
    verdict: str
    size: int = 0
    mtime: str = ""  # seconds since the epoch, as stat prints it (nanoseconds): a cache key, not a time

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"


def parse_image_check(stat_rc: int, stat_out: str, readable_rc: int) -> ImageCheck:
    """The verdict from the two commands' exit statuses and stat's line (`image_check_argvs`)."""
    if stat_rc != 0:
        # stat fails for a path that does not exist, a dangling symlink, or a folder on the way
        # the account may not enter: to the user, all three mean "it is not there for us".
        return ImageCheck("missing")
    kind, _sep, rest = stat_out.strip().partition("|")
    size, _sep, mtime = rest.partition("|")
    if kind != "regular file":  # a folder, a device, or an empty file: no image in any case
        return ImageCheck("not_file")
    if readable_rc != 0:
        return ImageCheck("unreadable")
    return ImageCheck("ok", int(size) if size.isdigit() else 0, mtime)


_SHA256 = re.compile(r"^([0-9a-f]{64})\s")


def parse_digest(out: str) -> str:
    """The hex SHA-256 from `sha256sum`'s line; "" when the output is not one."""
    match = _SHA256.match(out)
    return match.group(1) if match else ""
