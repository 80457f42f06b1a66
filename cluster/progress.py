"""What the watcher reads besides Slurm, in the same round trip as its poll: the workers'
progress records of many jobs, and the end of the logs of tasks that just failed.

The worker writes one whole JSON document per task, `<job out dir>/progress/task-<N>.json`, on a
single line (see worker/progress.py). One `find` over all the active jobs' progress folders
prints `<path>\\t<document>` per file; missing folders (a job not started yet) are not an error.
The files are printed by one `awk` per batch of paths (`-exec ... +`), not one `cat` per file: with
hundreds of records a process per file was most of the watcher's cycle.

Only what changed is read: `newer_than` (a time on the CLUSTER's clock, from `clock_argv` in an
earlier round trip) keeps `find` to records rewritten since then (`-newermt @T`), so a cycle reads
the records of the targets that moved, not every record of every active job (a job of 100,000
targets once sent 24 MB of unchanged records every cycle). The cluster's own clock is used because
the portal's may differ from the file server's.
"""
from __future__ import annotations

import math
import posixpath


def progress_argv(progress_dirs: list[str], newer_than: float | None = None) -> list[str]:
    """`find` printing `path<TAB>content` for every task record under the given folders (a record
    is one line: the worker writes each document on a single line); with `newer_than` (seconds since
    the epoch, the cluster's clock), only those modified after it. No folders: a command that prints
    nothing (find without a folder would search the login directory)."""
    if not progress_dirs:
        return ["true"]
    newer = ["-newermt", f"@{newer_than:.3f}"] if newer_than is not None else []
    return ["find", *progress_dirs, "-maxdepth", "1", "-name", "task-*.json", "-type", "f", *newer,
            "-exec", "awk", '{ print FILENAME "\\t" $0 }', "{}", "+"]


def clock_argv() -> list[str]:
    """The cluster's time, seconds since the epoch with a fraction (`date +%s.%N`)."""
    return ["date", "+%s.%N"]


def parse_clock(stdout: str) -> float | None:
    """`clock_argv`'s answer as a number; None for anything else (the next read is then whole)."""
    try:
        value = float(stdout.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def parse_progress_dump(stdout: str) -> dict[str, list[str]]:
    """{progress folder: [json text, ...]} from `progress_argv`'s output.

    Lines that are not `path<TAB>{...}` (a file caught mid-rename cannot happen: the worker renames
    whole files; but find's own warnings could) are ignored.
    """
    out: dict[str, list[str]] = {}
    for line in stdout.splitlines():
        path, sep, doc = line.partition("\t")
        if not sep or not doc.startswith("{"):
            continue
        out.setdefault(posixpath.dirname(path), []).append(doc)
    return out


#: bytes read from the end of a task's log: enough for slurmstepd's lines and a traceback's last frames
LOG_TAIL_BYTES = 4000


def log_tail_argv(path: str, nbytes: int = LOG_TAIL_BYTES) -> list[str]:
    """`tail -c N -- PATH`: the end of one task's log (a missing log prints nothing, exit 1)."""
    if not path.startswith("/"):
        raise ValueError(f"not an absolute path: {path!r}")
    return ["tail", "-c", str(int(nbytes)), "--", path]
