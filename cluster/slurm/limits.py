"""What a cluster allows one job, and what sbatch's refusals mean.

`scontrol show config` (no --json in 22.05) tells the array and job limits slurmctld enforces:
an array's indexes must be below MaxArraySize, and slurmctld holds at most MaxJobCount jobs (each
array task that starts becomes one). The portal sizes its arrays from them, so a big folder is
split into bigger chunks instead of being refused.

sbatch exits non-zero for two kinds of reasons: the cluster could not take the job now (the
controller is restarting, a socket timed out) - worth retrying; or it will never take this job
as written (a partition that does not exist, an array too large) - retrying only repeats the
refusal, so the job fails and the user reads why.
"""
from __future__ import annotations

import dataclasses
import re

#: Slurm's defaults when `scontrol show config` does not say (Slurm 22.05's own defaults)
DEFAULT_MAX_ARRAY_SIZE = 1001
DEFAULT_MAX_JOB_COUNT = 10000


@dataclasses.dataclass(frozen=True)
class ClusterLimits:
    max_array_size: int = DEFAULT_MAX_ARRAY_SIZE
    max_job_count: int = DEFAULT_MAX_JOB_COUNT

    @property
    def max_tasks(self) -> int:
        """The most array tasks one job may have: indexes 0..MaxArraySize-1, and never more than
        half the controller's job table (other users' jobs need the rest)."""
        return max(1, min(self.max_array_size, self.max_job_count // 2))


def scontrol_config_argv() -> list[str]:
    return ["scontrol", "show", "config"]


_CONFIG_LINE = re.compile(r"^(\w+)\s*=\s*(.*?)\s*$")


def parse_scontrol_config(text: str) -> ClusterLimits:
    """The limits from `scontrol show config` output; Slurm's defaults for what it does not say."""
    values: dict[str, str] = {}
    for line in (text or "").splitlines():
        match = _CONFIG_LINE.match(line)
        if match:
            values[match.group(1)] = match.group(2)

    def number(key: str, default: int) -> int:
        raw = values.get(key, "")
        return int(raw) if raw.isdigit() and int(raw) > 0 else default

    return ClusterLimits(max_array_size=number("MaxArraySize", DEFAULT_MAX_ARRAY_SIZE),
                         max_job_count=number("MaxJobCount", DEFAULT_MAX_JOB_COUNT))


def chunk_size_for(n_targets: int, chunk_size: int, limits: ClusterLimits) -> int:
    """The template's chunk size, or a bigger one when `n_targets` would need more array tasks
    than the cluster allows one job."""
    chunk_size = max(1, int(chunk_size))
    if n_targets <= 0:
        return chunk_size
    return max(chunk_size, -(-n_targets // limits.max_tasks))


#: sbatch errors that say "not now", not "never": the submission is retried
_TRANSIENT = re.compile(
    r"Socket timed out|Unable to contact slurm controller|Connection refused|temporarily unable|"
    r"Resource temporarily unavailable|Slurm backup controller in standby|Zero Bytes were transmitted|"
    r"Communication connection failure|Transport endpoint is not connected|Job submit/allocate failed: "
    r"(?:Slurm temporarily unable|Resource temporarily)",
    re.IGNORECASE)
_SBATCH_ERROR = re.compile(r"sbatch: error:\s*(?:Batch job submission failed:\s*)?(.*)")


def sbatch_refusal(stderr: str) -> str | None:
    """Slurm's own words when sbatch refused the job for good (its last error line); None when the
    failure may pass (retry later) or is not sbatch's own refusal (no `sbatch: error:` line)."""
    if _TRANSIENT.search(stderr or ""):
        return None
    errors = [m.group(1).strip() for m in _SBATCH_ERROR.finditer(stderr or "") if m.group(1).strip()]
    return errors[-1] if errors else None
