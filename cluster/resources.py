"""What a job asks Slurm for, read and checked in one place: time limit, memory, GPUs, CPUs, names.

A template (in the portal) and a batch script (`cluster.sbatch.SbatchSpec`) hold the same Slurm
fields; both are checked by `check_slurm_fields`, so a template that saves renders a script that
builds, and one refused here is refused there for the same reason.

Each `validate_*` raises ValueError with a plain-English message and returns the value as it is
written into the script; `check_slurm_fields` collects those messages per field instead.

Patterns are matched with `fullmatch`: a `$` alone would let a trailing newline through, and a
newline in a value written into an `#SBATCH` line ends the directives there.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

_TIME = re.compile(r"^(?:(\d+)-(\d+)(?::(\d+)(?::(\d+))?)?|(\d+)(?::(\d+)(?::(\d+))?)?)$")
_MEM = re.compile(r"^(\d+)([KMGT]?)$", re.IGNORECASE)
_MB_PER_UNIT = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024 * 1024}
_GRES_ITEM = re.compile(r"^[a-z][a-z0-9_]*(:[A-Za-z0-9_.\-]*[A-Za-z_.\-][A-Za-z0-9_.\-]*)?(:\d+)?$")
_SLURM_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")
_LINE_BREAKS = re.compile(r"[\x00\n\r]")


# ---- time limit ---------------------------------------------------------------------------------

def time_limit_seconds(value: str) -> int:
    """Seconds in a Slurm time limit: "30" (minutes), "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM[:SS]"."""
    match = _TIME.fullmatch(str(value).strip())
    if not match:
        raise ValueError(f"time limit {value!r} is not a Slurm time (e.g. 00:30:00 or 1-12:00:00)")
    g = [int(x) if x else 0 for x in match.groups()]
    if match.group(1) is not None:  # days-hours[:minutes[:seconds]]
        return ((g[0] * 24 + g[1]) * 60 + g[2]) * 60 + g[3]
    parts = [p for p in match.groups()[4:] if p is not None]
    if len(parts) == 1:
        return g[4] * 60  # bare number: minutes
    if len(parts) == 2:
        return g[4] * 60 + g[5]  # minutes:seconds
    return (g[4] * 60 + g[5]) * 60 + g[6]


def validate_time_limit(value: str) -> str:
    """A Slurm time limit that is set and finite. 0 would mean "no limit", and jobs without a limit
    never start next to a future reservation: every template must set one."""
    if time_limit_seconds(value) <= 0:
        raise ValueError(f"time limit {value!r} must be longer than zero")
    return str(value).strip()


# ---- memory -------------------------------------------------------------------------------------

def _mem_parts(value: Any) -> tuple[str, str] | None:
    """(digits, unit) of Slurm memory text such as "4G" or "500"; None when it is not a positive amount.

    The one reading of memory text: `mem_mb` and `validate_mem` both go through it.
    """
    match = _MEM.fullmatch(str(value if value is not None else "").strip())
    if not match or int(match.group(1)) <= 0:
        return None
    return match.group(1), match.group(2).upper()


def mem_mb(text: str | None) -> int | None:
    """Slurm memory text in MB: "4G" -> 4096, "500M" -> 500, "2048" -> 2048 (M by default),
    "1T" -> 1048576, "2048K" -> 2. An amount under 1 MB counts as 1 MB. None when the text is
    empty, zero or not memory text ("4GB", "-1G", "4 G"): exactly the texts `validate_mem` refuses."""
    parts = _mem_parts(text)
    if parts is None:
        return None
    digits, unit = parts
    return max(1, int(int(digits) * _MB_PER_UNIT[unit]))


def mem_text(mb: int) -> str:
    """MB as Slurm memory text: whole GB as "4G", anything else as "500M"."""
    if isinstance(mb, bool) or not isinstance(mb, int) or mb < 1:
        raise ValueError(f"memory must be a whole number of MB >= 1, got {mb!r}")
    return f"{mb // 1024}G" if mb % 1024 == 0 else f"{mb}M"


def validate_mem(value: str) -> str:
    """Memory per node as Slurm takes it: a number with an optional K/M/G/T unit (M by default)."""
    parts = _mem_parts(value)
    if parts is None:
        raise ValueError(f"memory {value!r} must be a positive amount like 4G or 500M")
    return parts[0] + parts[1]


# ---- GPUs, names, counts ------------------------------------------------------------------------

def validate_gres(value: str) -> str:
    """"" (no GPU) or generic resources such as "gpu:h200:1", "gpu:1", "gpu:a100:2,shard:1"."""
    value = str(value).strip()
    for item in filter(None, value.split(",")) if value else []:
        if not _GRES_ITEM.fullmatch(item) or item.endswith(":0"):
            raise ValueError(f"GPU request {value!r} must look like gpu:h200:1 (name[:type][:count])")
    return value


def validate_slurm_name(what: str, value: str) -> str:
    """A partition, QOS, reservation or account name as a batch script may carry it unquoted."""
    if not value:
        raise ValueError(f"{what} is required")
    if not isinstance(value, str) or not _SLURM_NAME.fullmatch(value):
        raise ValueError(f"{what} {value!r} is not a Slurm {what} name (letters, digits, _ . - only)")
    return value


def validate_count(what: str, value: int) -> int:
    """A whole number >= 1 (CPUs per task, tasks at once, images per task)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be a whole number >= 1, got {value!r}")
    return value


def validate_container_image(value: str) -> str:
    """"" (no container) or a container image on one line."""
    value = "" if value is None else value
    if not isinstance(value, str) or _LINE_BREAKS.search(value):
        raise ValueError("container image must be a single line")
    return value


# ---- all of a template's Slurm fields -----------------------------------------------------------

def check_slurm_fields(*, partition: str, time_limit: str, cpus_per_task: int, mem: str = "",
                       max_mem: str = "", gres: str = "", qos: str = "", array_limit: int | None = None,
                       chunk_size: int | None = None, container_image: str = "") -> dict[str, str]:
    """{field name: plain-English message} for every field Slurm would refuse; {} when all are fine.

    Empty means "not asked for" where Slurm has a default: `mem` (the partition's), `max_mem` (twice
    `mem`), `gres` (no GPU), `qos`, `container_image`; `array_limit` None means no limit and
    `chunk_size` None means the caller does not chunk. `partition`, `time_limit` and
    `cpus_per_task` are always required.
    """
    checks: list[tuple[str, Callable[[], Any]]] = [
        ("partition", lambda: validate_slurm_name("partition", partition)),
        ("qos", lambda: qos and validate_slurm_name("QOS", qos)),
        ("time_limit", lambda: validate_time_limit(time_limit)),
        ("mem", lambda: mem and validate_mem(mem)),
        ("max_mem", lambda: max_mem and validate_mem(max_mem)),
        ("gres", lambda: validate_gres(gres)),
        ("cpus_per_task", lambda: validate_count("CPUs per task", cpus_per_task)),
        ("array_limit", lambda: array_limit is None or validate_count("tasks at once", array_limit)),
        ("chunk_size", lambda: chunk_size is None or validate_count("images per task", chunk_size)),
        ("container_image", lambda: validate_container_image(container_image)),
    ]
    errors: dict[str, str] = {}
    for field, check in checks:
        try:
            check()
        except ValueError as exc:
            errors[field] = str(exc)
    return errors
