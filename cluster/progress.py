"""What the watcher reads besides Slurm, in the same round trip as its poll: the workers'
progress records of many jobs, and the end of the logs of tasks that just failed.

The worker writes one whole JSON document per task, `<job out dir>/progress/task-<N>.json`, on a
single line (see worker/progress.py). One `find` over all the active jobs' progress folders
prints `<path>\\t<document>` per file; missing folders (a job not started yet) are not an error.
The files are printed by one `awk` per batch of paths (`-exec ... +`), not one `cat` per file: with
hundreds of records a process per file was most of the watcher's cycle.
"""
from __future__ import annotations

import posixpath


def progress_argv(progress_dirs: list[str]) -> list[str]:
    """`find` printing `path<TAB>content` for every task record under the given folders (a record
    is one line: the worker writes each document on a single line)."""
    return ["find", *progress_dirs, "-maxdepth", "1", "-name", "task-*.json", "-type", "f",
            "-exec", "awk", '{ print FILENAME "\\t" $0 }', "{}", "+"]


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
