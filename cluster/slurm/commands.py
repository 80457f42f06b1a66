"""Slurm commands as argument lists for `SSHRunner.run`/`run_batch`.

Pure functions: nothing here talks to the cluster. Job ids and option values are checked, since a
comma or newline in one would change the query. `cluster.slurm` lists the traps of 22.05 that
shape these commands (ignored squeue filters, sacct's lost exit codes, its look-back to midnight).
"""
from __future__ import annotations

import re

_JOB_ID = re.compile(r"^\d+(_\d+)?$")

#: put before a command that reads or prints times: Slurm uses the caller's time zone, the portal UTC
IN_UTC = ("env", "TZ=UTC")


def checked_job_ids(job_ids: list[str] | None) -> list[str]:
    """The ids as text, each checked to be a Slurm job id ("123" or "123_4")."""
    ids = [str(j) for j in (job_ids or [])]
    for job_id in ids:
        if not _JOB_ID.fullmatch(job_id):
            raise ValueError(f"not a Slurm job id: {job_id!r} (expected 123 or 123_4)")
    return ids


def _name_value(what: str, value: str) -> str:
    # Slurm splits these option values on commas, and a newline would end up in the query.
    if not value or any(c in value for c in ",\n\r\0"):
        raise ValueError(f"{what} must be non-empty, without commas or newlines: {value!r}")
    return value


def sbatch_argv(script_path: str | None = None, extra: list[str] | None = None) -> list[str]:
    """`sbatch --parsable [extra...] [SCRIPT]`; without a path sbatch reads the script from stdin."""
    argv = ["sbatch", "--parsable", *(extra or [])]
    if script_path is not None:
        if not script_path or script_path.startswith("-"):
            raise ValueError(f"not a script path: {script_path!r}")
        argv.append(script_path)
    return argv


def squeue_argv(job_ids: list[str] | None = None, user: str | None = None) -> list[str]:
    """`squeue --json` (22.05 ignores the filters: see `cluster.slurm`; the watcher, which asks
    every few seconds, uses the text `queue.squeue_tasks_argv`, which honours --jobs)."""
    argv = ["squeue", "--json"]
    if job_ids:
        argv.append("--jobs=" + ",".join(checked_job_ids(job_ids)))
    if user:
        argv.append("--user=" + _name_value("user", user))
    return argv


def sacct_argv(job_ids: list[str] | None = None, name: str | None = None, user: str | None = None,
               start: str | None = None) -> list[str]:
    """`sacct --json` for jobs by id and/or job name.

    Without job ids sacct only looks back to midnight, so a lookup by name defaults to
    `--starttime=now-7days` (a submission retried just after midnight must still find its job).
    """
    argv = ["sacct", "--json"]
    if job_ids:
        argv.append("--jobs=" + ",".join(checked_job_ids(job_ids)))
    if name is not None:
        if "'" in name:  # slurmdbd never matches such a name (seen on 22.05)
            raise ValueError(f"sacct cannot look up a job name containing ': {name!r}")
        argv.append("--name=" + _name_value("job name", name))
    if user:
        argv.append("--user=" + _name_value("user", user))
    if start is None and not job_ids:
        start = "now-7days"
    if start:
        argv.append("--starttime=" + _name_value("start time", start))
    return argv


def sacct_exit_codes_argv(job_ids: list[str]) -> list[str]:
    """`sacct -P` of JobIDRaw and ExitCode, the exit codes 22.05's JSON loses (see parse_sacct)."""
    if not job_ids:
        raise ValueError("sacct_exit_codes_argv needs at least one job id")
    return ["sacct", "--noheader", "--parsable2", "--allocations", "--format=JobIDRaw,ExitCode",
            "--jobs=" + ",".join(checked_job_ids(job_ids))]


def scancel_argv(job_ids: list[str]) -> list[str]:
    """`scancel ID...` (an array's id cancels all its tasks; `123_4` cancels one task)."""
    if not job_ids:
        raise ValueError("scancel_argv needs at least one job id")
    return ["scancel", *checked_job_ids(job_ids)]


def sinfo_argv() -> list[str]:
    return ["sinfo", "--json"]


def scontrol_partitions_argv() -> list[str]:
    """Every partition, one line each. 22.05's scontrol has no --json; sinfo --json lists only
    nodes, so a partition without nodes (or its state and time limit) is seen only here."""
    return ["scontrol", "show", "partition", "--oneliner"]

