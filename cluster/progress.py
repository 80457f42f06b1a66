"""Reading the workers' progress records of many jobs in the same round trip as the Slurm poll.

The worker writes one whole JSON document per task, `<job out dir>/progress/task-<N>.json`, on a
single line (see worker/progress.py). One `find` over all the active jobs' progress folders
prints `<path>\\t<document>` per file; missing folders (a job not started yet) are not an error.
"""
from __future__ import annotations

import posixpath


def progress_argv(progress_dirs: list[str]) -> list[str]:
    """`find` printing `path<TAB>content` for every task record under the given folders."""
    return ["find", *progress_dirs, "-maxdepth", "1", "-name", "task-*.json", "-type", "f",
            "-printf", "%p\\t", "-exec", "cat", "{}", ";", "-printf", "\\n"]


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
