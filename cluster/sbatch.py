"""Rendering the batch script of one job (one Slurm array) from a validated `SbatchSpec`.

Two parsers read the script, and each value is made safe for the one that reads it:

- sbatch reads the `#SBATCH` lines (bash never does: to bash they are comments). Its directive
  parser splits on unquoted spaces, ends the line at an unquoted `#`, and honours "..." and
  backslash escapes. User-given values (job name, comment, paths) are written as "..." with `\\`
  and `"` escaped; what cannot be made safe is refused with ValueError: control characters (a
  newline would start a new directive) and the words `hetjob`/`packjob` (which split a script into
  heterogeneous components in some Slurm code paths). In --output/--error a `%` is doubled (Slurm
  expands %A, %a, %j there) and a backslash is refused (it turns that expansion off).
- bash reads the rest: every word is `shlex.quote`d, so `$(...)`, `;` or quotes in a path or
  argument stay data.

No `--signal`: at the time limit (and on scancel) Slurm sends SIGTERM and waits KillWait (30 s by
default) before SIGKILL, which is the worker's cleanup window; the command is `exec`ed so the worker
itself receives it. An early `--signal=B:TERM@60` would make the worker stop a minute early and end
FAILED (exit 143) instead of TIMEOUT, hiding the real reason from the user.
"""
from __future__ import annotations

import dataclasses
import re
import shlex

from .resources import check_slurm_fields, validate_mem, validate_slurm_name, validate_time_limit

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SPLITTERS = re.compile(r"hetjob|packjob", re.IGNORECASE)


def compress_ranges(indexes: list[int]) -> str:
    """Array indexes as Slurm's range text: [0, 1, 2, 3, 7, 9, 10] -> "0-3,7,9-10"."""
    values = sorted(set(int(i) for i in indexes))
    if not values or values[0] < 0:
        raise ValueError("array indexes must be a non-empty list of numbers >= 0")
    ranges, first, last = [], values[0], values[0]
    for value in values[1:] + [None]:
        if value is not None and value == last + 1:
            last = value
            continue
        ranges.append(str(first) if first == last else f"{first}-{last}")
        if value is not None:
            first = last = value
    return ",".join(ranges)


def _directive_text(field: str, value: str, limit: int = 1000) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{field} must be text, got {type(value).__name__}")
    if _CONTROL.search(value):
        raise ValueError(f"{field} must not contain newlines or other control characters: {value!r}")
    if _SPLITTERS.search(value):
        raise ValueError(f"{field} must not contain the words 'hetjob' or 'packjob' "
                         f"(Slurm reads them as a job separator): {value!r}")
    if len(value.encode()) > limit:
        raise ValueError(f"{field} is longer than {limit} bytes")
    return value


def _path(field: str, value: str) -> str:
    value = _directive_text(field, value, 4000)
    if not value.startswith("/"):
        raise ValueError(f"{field} must be an absolute path on the cluster: {value!r}")
    return value


def _quoted(value: str) -> str:
    """A value for sbatch's directive parser: inside "...", a backslash escapes the next character."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _bind_pair(bind: str) -> tuple[str, str, str]:
    """("/a", "/a", "") from "/a", ("/a", "/b", "") from "/a:/b", ("/a", "/b", "ro") from "/a:/b:ro":
    apptainer's --bind syntax, where ':' and ',' are separators and so cannot be part of a path.
    "ro": the container may read the folder, never change it (models, the user's target folders)."""
    parts = str(bind).split(":")
    mode = parts.pop() if len(parts) == 3 and parts[2] in ("ro", "rw") else ""
    if len(parts) > 2 or "," in bind:
        raise ValueError(f"container bind {bind!r} must be /path, /path:/inside or /path:/inside:ro "
                         f"(no ',' or ':' in paths)")
    return _path("container bind", parts[0]), _path("container bind", parts[-1]), mode


def _bind_arg(bind: str) -> str:
    return ":".join(part for part in _bind_pair(bind) if part)


@dataclasses.dataclass(frozen=True)
class SbatchSpec:
    """Everything one array job needs; validated when built, so an invalid spec cannot exist.

    Its Slurm fields are checked by `cluster.resources.check_slurm_fields`, as a template's are.
    """

    job_name: str
    comment: str
    partition: str
    time_limit: str
    cpus_per_task: int
    mem: str  # "4G"; "" for the partition's default
    gres: str
    array_indexes: list[int]
    array_limit: int | None
    log_dir: str
    #: the log's file name, with Slurm's %A (array job id) and %a (task index): the portal passes
    #: the job folder layout's (worker/layout.py), so the watcher finds each task's log there
    log_name: str
    workdir: str
    command: list[str]
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    qos: str = ""
    reservation: str = ""
    account: str = ""
    container_image: str = ""
    container_binds: list[str] = dataclasses.field(default_factory=list)  # "/p", "/p:/inside" or "/p:/inside:ro"
    #: Slurm may put a task back in the queue after it started (preempted by more urgent work, node
    #: failure) instead of ending it; the worker then skips the targets already done
    requeue: bool = False

    def __post_init__(self) -> None:
        if not self.job_name:
            raise ValueError("job name is required")
        _directive_text("job name", self.job_name, 200)  # slurmdbd keeps at most 255 bytes
        if "'" in self.job_name:
            # Seen on 22.05: `sacct --name` never finds a name with a ' in it, and the portal looks
            # jobs up by name to make submission idempotent.
            raise ValueError(f"job name must not contain ' (Slurm's accounting cannot look such a "
                             f"name up): {self.job_name!r}")
        _directive_text("comment", self.comment)
        problems = check_slurm_fields(
            partition=self.partition, qos=self.qos, time_limit=self.time_limit, mem=self.mem,
            gres=self.gres, cpus_per_task=self.cpus_per_task, array_limit=self.array_limit,
            container_image=self.container_image)
        if problems:
            raise ValueError("; ".join(problems.values()))
        for field in ("reservation", "account"):
            if getattr(self, field):
                validate_slurm_name(field, getattr(self, field))
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in self.array_indexes):
            raise ValueError("array indexes must be whole numbers")
        compress_ranges(self.array_indexes)
        if "\\" in _path("log folder", self.log_dir):
            raise ValueError("log folder must not contain a backslash (it turns off Slurm's %A/%a "
                             "file name patterns)")
        name = _directive_text("log file name", self.log_name, 255)
        if not name or "/" in name or "\\" in name:
            raise ValueError(f"log file name must be a plain file name (no / or backslash): {name!r}")
        _path("working folder", self.workdir)
        if not self.command or not all(isinstance(a, str) and "\0" not in a for a in self.command):
            raise ValueError("command must be a non-empty list of text arguments without NUL bytes")
        for name, value in self.env.items():
            if not _ENV_NAME.fullmatch(str(name)) or not isinstance(value, str) or "\0" in value:
                raise ValueError(f"environment variable {name!r} has a bad name or value")
        for bind in self.container_binds:
            _bind_pair(bind)


def render_script(spec: SbatchSpec) -> str:
    """The batch script text: #SBATCH directives, strict bash, exports, then `exec` of the command."""
    log = spec.log_dir.rstrip("/").replace("%", "%%") + "/" + spec.log_name
    array = compress_ranges(spec.array_indexes)
    if spec.array_limit:
        array += f"%{spec.array_limit}"
    directives = [
        f"--job-name={_quoted(spec.job_name)}",
        f"--comment={_quoted(spec.comment)}",
        f"--partition={spec.partition}",
        f"--time={validate_time_limit(spec.time_limit)}",
        f"--cpus-per-task={spec.cpus_per_task}",
    ]
    if spec.mem:
        directives.append(f"--mem={validate_mem(spec.mem)}")
    if spec.gres:
        directives.append(f"--gres={spec.gres}")
    directives += [
        f"--array={array}",
        f"--output={_quoted(log)}",
        f"--error={_quoted(log)}",
        f"--chdir={_quoted(spec.workdir)}",
    ]
    for option, value in (("qos", spec.qos), ("reservation", spec.reservation),
                          ("account", spec.account)):
        if value:
            directives.append(f"--{option}={value}")
    if spec.requeue:
        directives.append("--requeue")
    command = list(spec.command)
    if spec.container_image:
        binds = [arg for bind in spec.container_binds for arg in ("--bind", _bind_arg(bind))]
        command = ["apptainer", "exec", "--nv", *binds, spec.container_image, *command]
    # umask 077: what the task writes (outputs, progress records) is the service user's alone.
    lines = ["#!/bin/bash", *(f"#SBATCH {d}" for d in directives), "set -euo pipefail", "umask 077"]
    lines += [f"export {name}={shlex.quote(value)}" for name, value in spec.env.items()]
    lines.append("exec " + shlex.join(command))
    return "\n".join(lines) + "\n"
