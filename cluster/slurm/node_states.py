"""What each node is doing, in the plain categories an admin reads, and its GPUs counted by them.

Slurm names a node's state with a base state and flags ("IDLE" + ["DRAIN"], "MIXED" + ["RESERVED"],
"IDLE" + ["POWERED_DOWN"]); the portal folds them into one condition per node, first match wins:

    down      down, failed, unknown, or not answering (NOT_RESPONDING)
    drained   drained (by an admin, or by the GPU health check), nothing runs on it any more
    draining  drained, its running work still finishing
    waking    being powered on (power saving: work or a booking needs it); its GPUs count as asleep
    asleep    powered down (or powering down) to save energy; Slurm wakes it when work comes
    booked    held by a reservation (a booking, a maintenance window)
    busy      every GPU, or the whole node, in use
    free      idle, or some GPUs still free (mixed)

Drain comes before asleep and booked: an admin's drain is what an admin needs to see. The GPU
counts use GPU states ("free", "busy", "booked", "draining", "down", "asleep"): a drained node's
GPUs count as draining too, the reason saying why.
"""
from __future__ import annotations

import re

from .nodes import SlurmNode, gpus_by_type

#: node conditions, in the order the admin page lists them
CONDITIONS = ("free", "busy", "booked", "draining", "drained", "waking", "asleep", "down")
#: GPU states (the /metrics `state` label), in the order the admin page shows their columns
GPU_STATES = ("free", "busy", "booked", "draining", "down", "asleep")
#: conditions in which a node takes new work: leaving them for drained or down is news for an admin
USABLE_CONDITIONS = frozenset({"free", "busy", "booked"})

_DOWN_STATES = {"down", "fail", "failing", "unknown", "inval"}
_DOWN_FLAGS = {"NOT_RESPONDING", "FAIL"}
_ASLEEP_FLAGS = {"POWERED_DOWN", "POWERING_DOWN", "POWER_DOWN"}
_WAKING_FLAGS = {"POWERING_UP", "POWER_UP"}
_BUSY_STATES = {"allocated", "completing"}


def node_condition(node: SlurmNode) -> str:
    """One of CONDITIONS for `node`."""
    flags = set(node.state_flags)
    if node.state in _DOWN_STATES or flags & _DOWN_FLAGS:
        return "down"
    if "DRAIN" in flags or node.state in ("drained", "draining"):
        # DRAIN on an idle node: drained; on one still running work: draining
        return "drained" if node.state in ("idle", "drained") and not node.gpus_used else "draining"
    if flags & _WAKING_FLAGS:
        return "waking"
    if flags & _ASLEEP_FLAGS or node.state == "future":
        return "asleep"
    if "RESERVED" in flags or "MAINTENANCE" in flags or node.reservation or node.state in ("reserved", "maint"):
        return "booked"
    if node.state in _BUSY_STATES:
        return "busy"
    return "free"


def node_gpus(node: SlurmNode) -> dict[str, tuple[int, int]]:
    """{gres type: (configured, in use)} of `node`: "gpu:a100:4" with "gpu:a100:1(IDX:0)" -> {"a100": (4, 1)}."""
    used = gpus_by_type(node.gres_used)
    return {kind: (total, min(used.get(kind, 0), total)) for kind, total in gpus_by_type(node.gres).items()}


def gpu_states(condition: str, configured: int, used: int) -> dict[str, int]:
    """How a node's `configured` GPUs of one type, `used` of them by running jobs, split over GPU_STATES."""
    if condition in ("draining", "drained"):
        return {"draining": configured}
    if condition in ("down", "asleep"):
        return {condition: configured}
    if condition == "waking":  # not usable until it has booted
        return {"asleep": configured}
    if condition == "busy":  # allocated: whatever the GPUs, nothing more fits
        return {"busy": configured}
    rest = "booked" if condition == "booked" else "free"
    return {"busy": used, rest: configured - used}


#: how the GPU health check (deploy/slurm/gpu-health.sh, Slurm's HealthCheckProgram) starts the
#: reason of a node it drained: "gpu health: GPU 1 too hot (97 C)"
HEALTH_TAG = "gpu health:"
#: its faults: (kind, the rest of the reason); the portal says each in the reader's language
_HEALTH_FAULTS = (
    ("ecc", re.compile(r"GPU (?P<gpu>\d+) ECC errors \((?P<count>\d+) uncorrected\)$")),
    ("hot", re.compile(r"GPU (?P<gpu>\d+) too hot \((?P<celsius>\d+) C\)$")),
    ("lost", re.compile(r"a GPU fell off the bus \((?P<seen>\d+) of (?P<count>\d+) seen\)$")),
    ("unreadable", re.compile(r"the GPUs could not be read")),
)


def health_fault(reason: str) -> tuple[str, dict[str, str]] | None:
    """(kind, values) when `reason` is the GPU health check's: "gpu health: GPU 0 ECC errors (12
    uncorrected)" -> ("ecc", {"gpu": "0", "count": "12"}); any other fault of the check is ("other",
    {"text": ...}); None for a reason an admin (or Slurm) gave."""
    if not reason.startswith(HEALTH_TAG):
        return None
    text = reason[len(HEALTH_TAG):].strip()
    for kind, pattern in _HEALTH_FAULTS:
        match = pattern.match(text)
        if match:
            return kind, match.groupdict()
    return "other", {"text": text}
