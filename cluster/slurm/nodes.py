"""Compute nodes as `sinfo --json` describes them, in every Slurm version the portal meets.

Slurm 22.05 (OpenAPI v0.0.38) prints one record per node under "nodes", with its partitions.
From 23.02 on (data_parser v0.0.39 and later; captured on 24.11 and 26.05 in
tests/cluster/samples/<version>/sinfo.json) it prints sinfo's own groups under "sinfo": one record
per partition and set of alike nodes, the names in `nodes.nodes`, the states a list
(["IDLE", "DRAIN"]), numbers as {"set", "infinite", "number"} objects, the GPUs as
`gres.total`/`gres.used` texts. Both become the same `SlurmNode` per node, its partitions merged.
"""
from __future__ import annotations

import dataclasses
import re

from .output import json_number, json_records, load_answer

#: node states and flags in which a new task gets nothing from the node. A node asleep (power saving:
#: POWERED_DOWN, POWERING_DOWN) is not among them: Slurm wakes it for the work or booking given it.
_UNUSABLE_NODE_STATES = {"down", "drained", "draining", "fail", "failing", "future", "unknown", "inval"}
_UNUSABLE_NODE_FLAGS = {"DRAIN", "FAIL", "NOT_RESPONDING", "MAINTENANCE"}


@dataclasses.dataclass
class SlurmNode:
    name: str
    state: str  # "idle", "mixed", "allocated", "down", ... (lower case, as sinfo prints it)
    partitions: list[str]
    cpus: int
    memory_mb: int
    gpus: int  # configured
    gres: str  # "gpu:h200:2"
    gpus_used: int = 0  # allocated to running jobs now (sinfo's gres_used "gpu:h200:1(IDX:1)")
    gpu_types: list[str] = dataclasses.field(default_factory=list)  # ["h200"] from gres "gpu:h200:2"
    state_flags: list[str] = dataclasses.field(default_factory=list)  # ["DRAIN"], ...
    gres_used: str = ""  # "gpu:h200:1(IDX:1)": what running jobs hold, per type (gpus_by_type)
    reason: str = ""  # why an admin (or Slurm) drained it or took it down: "maintenance"
    reason_by: str = ""  # who set the reason ("root"; "" when the version does not say)
    reason_at: int = 0  # when, in Unix seconds (0: not said)
    reservation: str = ""  # the reservation holding the node now (24.11 on; 22.05 only flags RESERVED)

    @property
    def usable(self) -> bool:
        """Whether a new task could get anything from the node: not down, failed, drained or draining
        (asleep is usable: it is woken for the task)."""
        return self.state not in _UNUSABLE_NODE_STATES and not _UNUSABLE_NODE_FLAGS & set(self.state_flags)

    @property
    def gpus_free(self) -> int:
        """GPUs a new task could get now: none on a node that is not `usable`."""
        return max(self.gpus - self.gpus_used, 0) if self.usable else 0


def parse_sinfo(json_text: str) -> list[SlurmNode]:
    """Nodes from `sinfo --json`, in the order sinfo names them, whichever shape it printed."""
    data = load_answer(json_text, "sinfo")
    if "sinfo" in data:
        return _from_groups(json_records(data, "sinfo"))
    nodes = []
    for rec in json_records(data, "nodes"):
        gres = str(rec.get("gres") or "")
        node = _node(str(rec.get("name") or ""), str(rec.get("state") or ""),
                     [str(f) for f in rec.get("state_flags") or []],
                     [str(p) for p in rec.get("partitions") or []], json_number(rec.get("cpus")),
                     json_number(rec.get("real_memory")), gres, str(rec.get("gres_used") or ""))
        nodes.append(_with_reason(node, rec))
    return nodes


def _with_reason(node: SlurmNode, rec: dict) -> SlurmNode:
    """The reason fields of a record: 22.05 prints `reason` as a text with `reason_set_by_user` and
    `reason_changed_at` beside it; 24.11 a {"description", "time", "user"} object; 26.05 the object
    without "user", which moved back beside it as `reason_set_by_user`."""
    reason = rec.get("reason")
    if isinstance(reason, dict):
        node.reason = str(reason.get("description") or "")
        node.reason_by = str(reason.get("user") or rec.get("reason_set_by_user") or "")
        node.reason_at = json_number(reason.get("time")) or 0
    else:
        node.reason = str(reason or "")
        node.reason_by = str(rec.get("reason_set_by_user") or "")
        node.reason_at = json_number(rec.get("reason_changed_at")) or 0
    node.reservation = str(rec.get("reservation") or "")
    return node


def parse_slurm_release(json_text: str) -> str:
    """The Slurm release ("24.11.5") a `--json` answer names in its meta ("" when it names none)."""
    meta = (load_answer(json_text, "Slurm").get("meta") or {})
    return str((meta.get("Slurm") or meta.get("slurm") or {}).get("release") or "")


def reserves_gpus(release: str) -> bool:
    """Whether a reservation of this Slurm release can hold GPUs themselves (`TRES=gres/gpu=N`):
    from 23.02 on; 22.05 answers "TRES type 'gres/gpu' not supported with reservations" (both seen)."""
    try:
        major, minor = (int(p) for p in release.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (23, 2)


def dead_nodes_argv() -> list[str]:
    """`sinfo` of the nodes that are down, failed or not answering, one name a line (a node in two
    partitions twice). The watcher asks it in its round trip: a task Slurm requeued from such a node
    was not paused for urgent work, its computer failed."""
    return ["sinfo", "--noheader", "--Node", "--states=down,fail,no_respond", "--format=%N"]


def parse_dead_nodes(stdout: str) -> frozenset[str]:
    return frozenset(line.strip() for line in (stdout or "").splitlines() if line.strip())


def _from_groups(groups: list[dict]) -> list[SlurmNode]:
    by_name: dict[str, SlurmNode] = {}
    for rec in groups:
        states = [str(s) for s in (rec.get("node") or {}).get("state") or []]
        partition = str((rec.get("partition") or {}).get("name") or "")
        gres = rec.get("gres") or {}
        for item in (rec.get("nodes") or {}).get("nodes") or []:
            for name in expand_hostlist(str(item)):
                if name in by_name:  # the same node in another partition's group
                    if partition and partition not in by_name[name].partitions:
                        by_name[name].partitions.append(partition)
                    continue
                # Alike nodes share a group: cpus and memory per node are its minimum (= maximum).
                by_name[name] = _with_reason(_node(
                    name, states[0] if states else "", states[1:], [partition] if partition else [],
                    json_number((rec.get("cpus") or {}).get("maximum")), json_number((rec.get("memory") or {}).get("maximum")),
                    str(gres.get("total") or ""), str(gres.get("used") or "")), rec)
    return list(by_name.values())


def _node(name: str, state: str, flags: list[str], partitions: list[str], cpus: int | None, memory_mb: int | None,
          gres: str, gres_used: str) -> SlurmNode:
    return SlurmNode(name=name, state=state.lower(), partitions=partitions, cpus=cpus or 0, memory_mb=memory_mb or 0,
                     gpus=_gpu_count(gres), gres=gres, gpus_used=_gpu_count(gres_used), gpu_types=gres_gpu_types(gres),
                     state_flags=[f.upper() for f in flags], gres_used=gres_used)


_GRES_GPU = re.compile(r"(?:^|,)gpu(?::([^:,()]+))?:(\d+)")


def _gpu_count(gres: str) -> int:
    """GPUs in a gres text: "gpu:h200:2" -> 2, "gpu:h200:1(IDX:1),gpu:a100:2(IDX:0-1)" -> 3."""
    return sum(gpus_by_type(gres).values())


def gpus_by_type(gres: str) -> dict[str, int]:
    """GPUs in a gres text by type, in the order named: "gpu:a100:4,gpu:v100:2" -> {"a100": 4, "v100": 2};
    "gpu:h200:2(S:0-1)" -> {"h200": 2}; an untyped "gpu:2" counts under ""."""
    counts: dict[str, int] = {}
    for match in _GRES_GPU.finditer(gres):
        gpu_type = match.group(1) or ""
        counts[gpu_type] = counts.get(gpu_type, 0) + int(match.group(2))
    return counts


def gres_gpu_types(gres: str) -> list[str]:
    """GPU types named in a gres text, in order, once each: "gpu:h200:2,gpu:a100:1" -> ["h200", "a100"].
    An untyped "gpu:2" names none."""
    types: list[str] = []
    for m in _GRES_GPU.finditer(gres):
        if m.group(1) and m.group(1) not in types:
            types.append(m.group(1))
    return types


def expand_hostlist(text: str) -> list[str]:
    """Node names of a Slurm host list: "vm" -> ["vm"], "gpu[01-03,07],cpu1" -> gpu01..gpu03, gpu07, cpu1.

    Handles one bracket group per name (what scontrol prints for numbered nodes); anything else is
    kept as written rather than guessed at.
    """
    names: list[str] = []
    for item in re.findall(r"[^,\[]+(?:\[[^\]]*\][^,]*)?", text or ""):
        match = re.fullmatch(r"([^\[]*)\[([0-9,-]+)\](.*)", item)
        if not match:
            names.append(item)
            continue
        prefix, ranges, suffix = match.groups()
        for part in ranges.split(","):
            first, _, last = part.partition("-")
            if not first.isdigit() or (last and not last.isdigit()):
                names.append(item)
                break
            width = len(first)
            names += [f"{prefix}{i:0{width}d}{suffix}" for i in range(int(first), int(last or first) + 1)]
    return names
