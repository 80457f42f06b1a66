"""Slurm reservations and the GPU inventory behind GPU bookings (docs/slurm-bookings.md).

Slurm 22.05 cannot put GPUs in a reservation: `TRES=gres/gpu=1` answers "TRES type 'gres/gpu' not
supported with reservations". A booking of N GPUs therefore reserves the CORES that go with them on
a node that has that GPU type (CoreCnt = N x the node's cores per GPU). The reservation keeps those
cores, and the booked time, for the portal's Slurm user; a job submitted with `--reservation`
then runs in it and gets its GPUs from the node. The reservation does NOT stop a job outside it
from taking the node's GPUs with the cores left free (seen on the real cluster), so that no GPU type
is booked beyond its inventory remains the portal's rule.

Every command runs under `env TZ=UTC`: scontrol reads and prints times in the caller's zone, and
the portal's times are UTC. Pure functions: builders return argv lists, parsers take the text the
command printed.
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

from ..errors import SlurmError
from .commands import IN_UTC, sinfo_argv
from .nodes import expand_hostlist, gpus_by_type, parse_sinfo

_RESERVATION_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_USER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
# A node name or a Slurm host list of one bracket group: "vm", "gpu07", "gpu[01-04,07]".
_NODE_NAME = re.compile(r"[A-Za-z0-9_.-]+(?:\[[0-9,-]+\][A-Za-z0-9_.-]*)?")
_PARTITION_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_SLURM_TIME = "%Y-%m-%dT%H:%M:%S"


# ---- records ------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class SlurmReservation:
    """One reservation as `scontrol show reservation --oneliner` printed it (under TZ=UTC)."""

    name: str
    start: datetime  # aware, UTC
    end: datetime  # aware, UTC
    nodes: list[str]
    core_count: int
    users: list[str]
    state: str  # "ACTIVE" (its window has begun) or "INACTIVE"
    flags: list[str] = dataclasses.field(default_factory=list)  # ["IGNORE_JOBS", "SPEC_NODES"]
    partition: str = ""


@dataclasses.dataclass(frozen=True)
class NodeGpus:
    """The GPUs of one type on one node, as sinfo said."""

    node: str
    gpus: int  # of this type
    cpus: int
    partitions: list[str]
    usable: bool  # False while the node is down, drained or draining
    cores_per_gpu: int = 1  # the node's CPUs over ALL its GPUs, at least 1: what one booked GPU reserves


# ---- checked values -----------------------------------------------------------------------------

def _checked(pattern: re.Pattern, what: str, value: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise ValueError(f"not a Slurm {what}: {value!r}")
    return value


def _names(pattern: re.Pattern, what: str, values: Sequence[str]) -> str:
    if isinstance(values, str) or not values:
        raise ValueError(f"give a non-empty list of {what}s, not {values!r}")
    return ",".join(_checked(pattern, what, v) for v in values)


def _positive(what: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be a whole number of at least 1, not {value!r}")
    return value


def slurm_time(when: datetime | str) -> str:
    """"now", or an aware datetime as Slurm's "YYYY-MM-DDTHH:MM:SS" in UTC (pair it with TZ=UTC).

    A naive datetime is refused: its zone would be a guess, and a booking an hour off is wrong.
    """
    if when == "now":
        return "now"
    if not isinstance(when, datetime) or when.tzinfo is None or when.utcoffset() is None:
        raise ValueError(f"a reservation time must be 'now' or an aware datetime, not {when!r}")
    return when.astimezone(timezone.utc).strftime(_SLURM_TIME)


def parse_slurm_time(text: str) -> datetime | None:
    """An aware UTC datetime from a time Slurm printed under TZ=UTC; None for "Unknown", "None", ""."""
    text = (text or "").strip()
    if text in ("", "Unknown", "None", "(null)", "N/A"):
        return None
    try:
        return datetime.strptime(text, _SLURM_TIME).replace(tzinfo=timezone.utc)
    except ValueError:
        raise SlurmError(f"not a Slurm time: {text[:40]!r}") from None


# ---- commands -----------------------------------------------------------------------------------

def reservation_create_argv(name: str, start: datetime | str, minutes: int, users: Sequence[str],
                            nodes: Sequence[str], core_count: int | Sequence[int], partition: str = "",
                            *, ignore_jobs: bool = False, gpus: int = 0) -> list[str]:
    """`scontrol create reservation` holding `core_count` cores of `nodes` for `users`.

    `gpus`: hold that many GPUs themselves as well (`tres=cpu=C,gres/gpu=N`, the cores summed):
    Slurm 23.02 and later (`reserves_gpus`); a job outside the reservation then cannot take them.
    Without, only the cores are held (22.05), sized so that the GPUs left outside have too few
    cores to be used. `core_count` is one number (Slurm spreads it over the nodes) or one per node. Without
    `ignore_jobs`, Slurm refuses ("Requested nodes are busy") when running jobs' time limits
    overlap the cores it would need: the honest answer for a booking that starts now. With it, the
    reservation is made anyway and its jobs wait for those cores.
    """
    counts = [core_count] if isinstance(core_count, int) else list(core_count)
    if not counts or (len(counts) > 1 and len(counts) != len(nodes)):
        raise ValueError(f"give one core count, or one per node: {core_count!r}")
    argv = [*IN_UTC, "scontrol", "create", "reservation",
            "reservationname=" + _checked(_RESERVATION_NAME, "reservation name", name),
            "starttime=" + slurm_time(start),
            f"duration={_positive('the duration in minutes', minutes)}",
            "users=" + _names(_USER_NAME, "user name", users),
            "nodes=" + _names(_NODE_NAME, "node name", nodes)]
    if gpus:
        argv.append(f"tres=cpu={sum(_positive('the core count', c) for c in counts)},"
                    f"gres/gpu={_positive('the GPU count', gpus)}")
    else:
        argv.append("corecnt=" + ",".join(str(_positive("the core count", c)) for c in counts))
    if partition:
        argv.append("partitionname=" + _checked(_PARTITION_NAME, "partition name", partition))
    if ignore_jobs:
        argv.append("flags=ignore_jobs")
    return argv


def reservation_update_argv(name: str, *, start: datetime | str | None = None,
                            minutes: int | None = None) -> list[str]:
    """`scontrol update reservation`: a new start and/or length (a booking moved or extended)."""
    argv = [*IN_UTC, "scontrol", "update",
            "reservationname=" + _checked(_RESERVATION_NAME, "reservation name", name)]
    if start is not None:
        argv.append("starttime=" + slurm_time(start))
    if minutes is not None:
        argv.append(f"duration={_positive('the duration in minutes', minutes)}")
    if len(argv) == 5:
        raise ValueError("reservation_update_argv needs a start or a duration to change")
    return argv


def reservation_delete_argv(name: str) -> list[str]:
    """`scontrol delete reservation`. Refused ("in_use") while jobs wait or run in it: cancel those first."""
    return ["scontrol", "delete", "reservationname=" + _checked(_RESERVATION_NAME, "reservation name", name)]


_JOB_ID = re.compile(r"[0-9]{1,20}")


def job_leave_reservation_argv(job_id: str) -> list[str]:
    """`scontrol update jobid=<id> reservation=`: a waiting job (every waiting task of an array) leaves
    its reservation and joins the open queue; a blank value clears it (scontrol's man page). Cancelling
    a booking does this first: a reservation with jobs waiting in it cannot be deleted ("in_use").
    Tasks already running keep it; scontrol says "Job is no longer pending execution" for them."""
    return ["scontrol", "update", "jobid=" + _checked(_JOB_ID, "job id", str(job_id)), "reservation="]


def reservations_show_argv(name: str | None = None) -> list[str]:
    """Every reservation (or one), one line each. 22.05's scontrol has no --json. An unknown name
    exits 1 printing "Reservation NAME not found" on stdout: parse it, do not `check=True`."""
    argv = [*IN_UTC, "scontrol", "show", "reservation"]
    if name is not None:
        argv.append(_checked(_RESERVATION_NAME, "reservation name", name))
    return argv + ["--oneliner"]


def gpu_inventory_argv() -> list[str]:
    """The nodes with their gres, CPUs, partitions and state: `sinfo --json` (one record per node)."""
    return sinfo_argv()


# ---- parsers ------------------------------------------------------------------------------------

_FIELD = re.compile(r"(\w+)=(\S*)")
_NONE = ("", "(null)", "N/A")


def parse_reservations(stdout: str) -> list[SlurmReservation]:
    """Reservations from `reservations_show_argv` output (run under TZ=UTC), in the order printed.

    "No reservations in the system" and "Reservation X not found" are empty answers, not errors.
    """
    reservations = []
    for line in (stdout or "").splitlines():
        fields = dict(_FIELD.findall(line))  # later NodeName=/CoreIDs= pairs per node are not needed
        if "ReservationName" not in fields:
            continue
        start, end = parse_slurm_time(fields.get("StartTime", "")), parse_slurm_time(fields.get("EndTime", ""))
        if start is None or end is None:
            raise SlurmError(f"reservation {fields['ReservationName']!r} has no start or end: {line[:200]!r}")
        nodes, users = fields.get("Nodes", ""), fields.get("Users", "")
        partition, flags = fields.get("PartitionName", ""), fields.get("Flags", "")
        reservations.append(SlurmReservation(
            name=fields["ReservationName"], start=start, end=end,
            nodes=[] if nodes in _NONE else expand_hostlist(nodes),
            core_count=int(fields["CoreCnt"]) if fields.get("CoreCnt", "").isdigit() else 0,
            users=[] if users in _NONE else users.split(","),
            state=fields.get("State", "").upper(),
            flags=[] if flags in _NONE else flags.split(","),
            partition="" if partition in _NONE else partition))
    return reservations


#: refusal codes of `reservation_refusal`, most specific first; the portal words each for its users
_REFUSALS = [
    ("unavailable", re.compile(r"Unable to contact slurm controller|Socket timed out|Connection refused|"
                               r"Zero Bytes were transmitted|temporarily unavailable", re.IGNORECASE)),
    ("busy", re.compile(r"Requested nodes are busy|Nodes required for job are busy", re.IGNORECASE)),
    ("overlap", re.compile(r"overlap", re.IGNORECASE)),
    ("exists", re.compile(r"Duplicate reservation name", re.IGNORECASE)),
    ("in_use", re.compile(r"Requested reservation is in use", re.IGNORECASE)),
    ("not_found", re.compile(r"Requested reservation is invalid|Reservation \S+ not found", re.IGNORECASE)),
    # The caller lacks AdminLevel=Operator ("Access/permission denied"), or is unknown to Slurm's
    # accounting (22.05 says "Invalid user id" then, as for an unknown name in users=).
    ("not_allowed", re.compile(r"Access/permission denied|Invalid user id|not authorized", re.IGNORECASE)),
    ("invalid", re.compile(r"Invalid|not valid|error: .*unknown", re.IGNORECASE)),
]
REFUSAL_CODES = tuple(code for code, _ in _REFUSALS) + ("unknown",)


def reservation_refusal(stderr: str) -> str:
    """Why scontrol refused a reservation command, as a code of REFUSAL_CODES (never prose):

    busy         the nodes' cores are taken for that window (other reservations, running jobs)
    overlap      the window collides with another reservation of the same nodes
    exists       a reservation of that name exists
    in_use       delete refused: jobs are waiting or running in it (cancel them first, then delete)
    not_found    no such reservation (update/delete/show of a deleted one, or one past its end:
                 Slurm removes a reservation when it ends)
    not_allowed  the portal's Slurm user may not manage reservations (docs/slurm-bookings.md)
    invalid      a time, node, partition or count Slurm does not accept
    unavailable  the controller did not answer: try again later
    unknown      anything else
    """
    for code, pattern in _REFUSALS:
        if pattern.search(stderr or ""):
            return code
    return "unknown"


def parse_gpu_inventory(stdout: str) -> dict[str, list[NodeGpus]]:
    """{gres type: [NodeGpus]} from `gpu_inventory_argv` output; nodes without GPUs are left out.

    Gres texts: "gpu:h200:2", "gpu:h200:2(S:0-1)", "gpu:a100:4,gpu:v100:2", untyped "gpu:2" (type "").
    A node that is down or drained is listed with usable=False: its GPUs exist but cannot be booked.
    """
    inventory: dict[str, list[NodeGpus]] = {}
    for node in parse_sinfo(stdout):
        by_type = gpus_by_type(node.gres)
        total = sum(by_type.values())
        for gpu_type, gpus in by_type.items():
            if gpus <= 0:
                continue
            inventory.setdefault(gpu_type, []).append(NodeGpus(
                node=node.name, gpus=gpus, cpus=node.cpus, partitions=list(node.partitions),
                usable=node.usable,
                cores_per_gpu=max(1, node.cpus // total) if node.cpus else 1))
    return inventory


def window_minutes(start: datetime, end: datetime) -> int:
    """A reservation's length in whole minutes (rounded up: never shorter than the booking)."""
    return max(1, -(-int((end - start) / timedelta(seconds=1)) // 60))
