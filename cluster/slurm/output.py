"""Pure parsers of Slurm 22.05's output (OpenAPI v0.0.38) and the records they return.

Each parser takes the text a command of `cluster.slurm.commands` printed; see `cluster.slurm` for
the traps of 22.05's JSON that they work around.
"""
from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from ..errors import SlurmError
from ..sbatch import compress_ranges
from ..states import base_state, is_terminal
from .commands import checked_job_ids

_NOTHING_FOUND = 9003  # ESLURM_REST_EMPTY_RESULT: an empty answer, not a failure
_MAX_EXPANDED = 1_000_000  # refuse to expand absurd ranges into memory


# ---- parsed records -----------------------------------------------------------------------------

@dataclasses.dataclass
class SlurmTask:
    """One task (array index) of a job as Slurm reports it. Times are epoch seconds.

    `exit_code` is None while the task runs, when it was killed by a signal (then `signal` is set),
    and when Slurm's JSON lost it. `job_id` is the array's id ("123"), even for the task that runs
    under the array's own id. `pending_array_range` is the range of a collapsed pending record
    ("2-3%1") that this task was expanded from.
    """

    job_id: str
    task_index: int | None
    state: str
    reason: str = ""
    node: str = ""
    exit_code: int | None = None
    signal: int | None = None
    elapsed_seconds: int | None = None
    name: str = ""
    comment: str = ""
    gpus: int = 0
    start_time: int | None = None
    end_time: int | None = None
    pending_array_range: str | None = None
    #: times Slurm requeued the task (preempted by more urgent work, node failure); squeue's RestartCnt
    restarts: int = 0


@dataclasses.dataclass
class SlurmPartition:
    """One partition as `scontrol show partition --oneliner` prints it."""

    name: str
    state: str  # "UP", "DOWN", "DRAIN", "INACTIVE"
    is_default: bool
    max_time: str  # "UNLIMITED" or a Slurm time such as "1-00:00:00"
    nodes: str  # Slurm's host list expression: "vm", "gpu[01-04]"; "" when it has none
    total_cpus: int
    total_nodes: int
    gpus: int  # configured GPUs of its nodes (TRES gres/gpu=N)


# ---- reading Slurm's JSON (shared with `nodes`, `queue`, `history`) ------------------------------

def load_answer(text: str, what: str) -> dict:
    """The JSON object a Slurm command printed (`what` names the command in messages). SlurmError
    when it is not JSON, not an object, or reports an error ("nothing found" is an empty answer)."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError):
        raise SlurmError(f"{what} did not print JSON: {str(text)[:200]!r}") from None
    if not isinstance(data, dict):
        raise SlurmError(f"{what} printed JSON of an unexpected shape")
    errors = [e for e in data.get("errors") or []
              if not (isinstance(e, dict) and e.get("error_number") == _NOTHING_FOUND)]
    if errors:
        first = errors[0]
        words = first.get("description") or first.get("error") if isinstance(first, dict) else first
        raise SlurmError(f"{what} reported an error: {words}")
    return data


def json_number(value: Any) -> int | None:
    """An int from 22.05's plain numbers or later versions' {"set", "infinite", "number"} objects."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _epoch(value: Any) -> int | None:
    number = json_number(value)
    return number if number else None  # 0 means "not yet" / "unknown"


def _wait_status(raw: Any) -> tuple[int | None, int | None]:
    """(exit code, signal) from squeue's raw wait status (or a newer JSON structure)."""
    if isinstance(raw, dict) and "status" in raw:
        return _exit_struct(raw)
    status = json_number(raw)
    if status is None:
        return None, None
    if status & 0x7F:
        return None, status & 0x7F
    return (status >> 8) & 0xFF, None


def _exit_struct(value: Any) -> tuple[int | None, int | None]:
    """(exit code, signal) from sacct's {"status", "return_code", "signal"} structure."""
    if not isinstance(value, dict):
        return _wait_status(value) if value is not None else (None, None)
    status = str(value.get("status") or "").upper()
    if "SIGNALED" in status:
        sig = value.get("signal") or {}
        return None, json_number(sig.get("signal_id") if isinstance(sig, dict) else sig)
    if status in ("SUCCESS", "ERROR") or "SUCCESS" in status or "ERROR" in status:
        return json_number(value.get("return_code")), None
    return None, None  # PENDING, CORE_DUMPED without detail, unknown


def _gpus_from_pairs(pairs: list[tuple[str, Any]]) -> int:
    counts = {key: json_number(count) or 0 for key, count in pairs}
    if "gpu" in counts:
        return counts["gpu"]
    return sum(count for key, count in counts.items() if key.startswith("gpu:"))


def tres_gpus(text: str | None) -> int:
    """GPUs in a TRES text: "cpu=1,mem=200M,node=1,billing=1,gres/gpu=1" -> 1 (typed form:
    "gres/gpu:h200=1"); 0 without any."""
    pairs = [item.split("=", 1) for item in (text or "").split(",") if "=" in item]
    return _gpus_from_pairs([(k[len("gres/"):], v) for k, v in pairs if k.startswith("gres/")])


def _gpus_from_tres_list(items: list | None) -> int:
    return _gpus_from_pairs([(str(t.get("name") or ""), t.get("count")) for t in items or []
                             if isinstance(t, dict) and t.get("type") == "gres"])


def expand_array_range(text: str) -> list[int]:
    """Indexes of Slurm's array range text: "2-3", "1-3%1", "0-9:2,12", "[1-3]", or a hex bitmap "0xC"."""
    text = (text or "").strip().strip("[]").split("%")[0]
    if text.lower().startswith("0x"):
        try:
            bits = int(text, 16)
        except ValueError:
            raise SlurmError(f"not an array bitmap: {text!r}") from None
        if bits.bit_length() > _MAX_EXPANDED:
            raise SlurmError(f"array bitmap too large: {text[:40]!r}")
        return [i for i in range(bits.bit_length()) if bits >> i & 1]
    indexes: list[int] = []
    for item in filter(None, text.split(",")):
        match = re.fullmatch(r"(\d+)(?:-(\d+)(?::(\d+))?)?", item.strip())
        if not match:
            raise SlurmError(f"not an array range: {text!r}")
        first = int(match.group(1))
        last = int(match.group(2) or first)
        step = int(match.group(3) or 1)
        if step < 1 or last < first or len(indexes) + (last - first) // step >= _MAX_EXPANDED:
            raise SlurmError(f"unusable array range: {text!r}")
        indexes.extend(range(first, last + 1, step))
    return sorted(set(indexes))


def json_records(data: dict, key: str = "jobs") -> list[dict]:
    """The objects of the list `data[key]` (none when absent); SlurmError when it is not a list."""
    records = data.get(key) or []
    if not isinstance(records, list):
        raise SlurmError(f"Slurm's JSON has no list of {key}")
    return [r for r in records if isinstance(r, dict)]


def _expand(job_id: str, array_id: int, task_id: int | None, pending: str | None,
            fields: dict) -> list[SlurmTask]:
    if array_id and task_id is None and pending:
        indexes = expand_array_range(pending)
        shown = pending if not pending.lower().startswith("0x") else compress_ranges(indexes)
        return [SlurmTask(job_id, i, pending_array_range=shown, **fields) for i in indexes]
    return [SlurmTask(job_id, task_id if array_id else None, **fields)]


def sorted_tasks(tasks: list[SlurmTask]) -> list[SlurmTask]:
    """The tasks in job id order, then by array index (a task without one first)."""
    return sorted(tasks, key=lambda t: (int(t.job_id), -1 if t.task_index is None else t.task_index))


# ---- parsers ------------------------------------------------------------------------------------

def parse_sbatch_parsable(stdout: str) -> str:
    """The job id from `sbatch --parsable` output ("123" or "123;cluster")."""
    lines = [line.strip() for line in (stdout or "").splitlines() if line.strip()]
    job_id = lines[-1].split(";")[0].strip() if lines else ""
    if not job_id.isdigit():
        raise SlurmError(f"sbatch did not print a job id: {(stdout or '')[:200]!r}")
    return job_id


def parse_squeue(json_text: str, job_ids: list[str] | None = None) -> list[SlurmTask]:
    """Tasks in `squeue --json` output, collapsed pending arrays expanded; only `job_ids` if given."""
    wanted = set(checked_job_ids(job_ids)) if job_ids else None
    tasks: list[SlurmTask] = []
    for rec in json_records(load_answer(json_text, "squeue")):
        array_id = json_number(rec.get("array_job_id")) or 0
        job_id = str(array_id or json_number(rec.get("job_id")))
        if wanted is not None and job_id not in wanted:
            continue
        state = base_state(rec.get("job_state"))
        done = is_terminal(state)
        start, end = _epoch(rec.get("start_time")), _epoch(rec.get("end_time"))
        node = str(rec.get("nodes") or "")
        # A job that never ran (refused, cancelled while pending) carries a plain 1 or 0 there, not
        # a wait status: 1 would read as "killed by SIGHUP". It has no exit code to report.
        ran = done and bool(node)
        exit_code, sig = _wait_status(rec.get("exit_code")) if ran else (None, None)
        fields = dict(
            state=state, reason=str(rec.get("state_reason") or ""), node=node,
            exit_code=exit_code, signal=sig,
            elapsed_seconds=(end - start) if done and start and end else None,
            name=str(rec.get("name") or ""), comment=str(rec.get("comment") or ""),
            gpus=tres_gpus(rec.get("tres_alloc_str")),
            start_time=start, end_time=end if done else None,  # a running job's end is a forecast
        )
        tasks += _expand(job_id, array_id, json_number(rec.get("array_task_id")),
                         str(rec.get("array_task_string") or ""), fields)
    return sorted_tasks(tasks)


def parse_sacct_exit_codes(text: str) -> dict[str, tuple[int | None, int | None]]:
    """{JobIDRaw: (exit code, signal)} from `sacct -P` output.

    Reads the headerless two-column output of `sacct_exit_codes_argv` ("36|3:0", "37|0:9"), or any
    `sacct -P` output with a header line naming JobIDRaw and ExitCode. "0:9" means killed by signal
    9: (None, 9); "3:0" means exit 3: (3, None). Steps ("36.batch") are skipped.
    """
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    raw_col, code_col = 0, 1
    if lines and "JobIDRaw" in lines[0].split("|"):
        header = lines.pop(0).split("|")
        if "ExitCode" not in header:
            raise SlurmError("sacct output has no ExitCode column")
        raw_col, code_col = header.index("JobIDRaw"), header.index("ExitCode")
    codes: dict[str, tuple[int | None, int | None]] = {}
    for line in lines:
        fields = line.split("|")
        if len(fields) <= max(raw_col, code_col) or not fields[raw_col].isdigit():
            continue
        match = re.fullmatch(r"(\d+):(\d+)", fields[code_col].strip())
        if match:
            code, sig = int(match.group(1)), int(match.group(2))
            codes[fields[raw_col]] = (None, sig) if sig else (code, None)
    return codes


def parse_sacct(json_text: str, exit_codes: str | None = None) -> list[SlurmTask]:
    """One task per array index (steps skipped) from `sacct --json`.

    `exit_codes` is the output of `sacct_exit_codes_argv` for the same jobs; its codes replace the
    JSON's, which 22.05 loses (see the module docstring).
    """
    codes = parse_sacct_exit_codes(exit_codes) if exit_codes else {}
    by_key: dict[tuple[str, int | None], SlurmTask] = {}
    for rec in json_records(load_answer(json_text, "sacct")):
        raw_id = str(json_number(rec.get("job_id")))
        array = rec.get("array") or {}
        array_id = json_number(array.get("job_id")) or 0
        job_id = str(array_id or raw_id)
        state_info = rec.get("state") or {}
        state = base_state(state_info.get("current") if isinstance(state_info, dict) else state_info)
        done = is_terminal(state)
        exit_code, sig = _exit_struct(rec.get("exit_code")) if done else (None, None)
        if state != "COMPLETED" and exit_code == 0 and sig is None:
            exit_code = None  # 22.05 dumps every normal exit as 0: unknown, not success
        if done and raw_id in codes:
            exit_code, sig = codes[raw_id]
        times = rec.get("time") or {}
        start, end = _epoch(times.get("start")), _epoch(times.get("end"))
        node = str(rec.get("nodes") or "")
        comment = rec.get("comment")
        fields = dict(
            state=state,
            reason=str(state_info.get("reason") or "") if isinstance(state_info, dict) else "",
            node="" if node == "None assigned" else node,
            exit_code=exit_code, signal=sig,
            elapsed_seconds=json_number(times.get("elapsed")) if start else None,
            name=str(rec.get("name") or ""),
            comment=str((comment.get("job") if isinstance(comment, dict) else comment) or ""),
            gpus=_gpus_from_tres_list((rec.get("tres") or {}).get("allocated")),
            start_time=start, end_time=end,
        )
        pending = array.get("task")
        for task in _expand(job_id, array_id, json_number(array.get("task_id")),
                            str(pending) if pending else None, fields):
            by_key[(task.job_id, task.task_index)] = task  # a later record (requeue) wins
    return sorted_tasks(list(by_key.values()))


_PARTITION_FIELD = re.compile(r"(\w+)=(\S*)")


def parse_scontrol_partitions(text: str) -> list[SlurmPartition]:
    """Partitions from `scontrol show partition --oneliner` (one `Key=Value ...` line each)."""
    partitions = []
    for line in text.splitlines():
        fields = dict(_PARTITION_FIELD.findall(line))
        if "PartitionName" not in fields:
            continue
        tres = dict(item.split("=", 1) for item in fields.get("TRES", "").split(",") if "=" in item)
        nodes = fields.get("Nodes", "")
        partitions.append(SlurmPartition(
            name=fields["PartitionName"], state=fields.get("State", "").upper(),
            is_default=fields.get("Default", "NO").upper() == "YES", max_time=fields.get("MaxTime", ""),
            nodes="" if nodes == "(null)" else nodes, total_cpus=json_number(fields.get("TotalCPUs")) or 0,
            total_nodes=json_number(fields.get("TotalNodes")) or 0, gpus=json_number(tres.get("gres/gpu")) or 0))
    return partitions


def find_job_by_name(squeue_json: str | None, sacct_json: str | None, name: str) -> str | None:
    """The job id of an already submitted job named `name`, or None (safe to submit).

    squeue answers at once; sacct remembers finished jobs (but lags the controller by seconds).
    Either text may be None or empty when that command was not run or failed. Should two jobs carry
    the name (a double submission), the oldest (lowest id) is returned. slurmdbd stores a `"` in a
    job name as a backtick, so sacct's names are compared with that substitution.
    """
    found: set[str] = set()
    if squeue_json and squeue_json.strip():
        found |= {t.job_id for t in parse_squeue(squeue_json) if t.name == name}
    if sacct_json and sacct_json.strip():
        stored = name.replace('"', "`")
        found |= {t.job_id for t in parse_sacct(sacct_json) if t.name.replace('"', "`") == stored}
    return min(found, key=int) if found else None
