"""The clusters' nodes and GPUs by state: read by the watcher, stored on the profile, shown to admins.

The watcher's sweep reads each active, reachable cluster's `sinfo --json` every `READ_EVERY`
(`read_due`: one round trip per cluster) and stores what each node is doing on
`ClusterProfile.node_states`. The admin's Clusters page (jobs.admin.clusters) and /metrics
(`ffportal_gpus`, jobs.ops.collectors) show that stored reading: neither ever waits on SSH. A node
that was taking work and is now drained or down is emailed to the admins once, when the reading
first shows it (jobs.clusters.node_mail).

Stored shape: {"read_at": ISO time of the last answer, "nodes": [node record, ...],
"failed_since": ISO time of the first failed read since the last answer (absent when answering),
"error": what the failure said}. A node record: {"name", "condition" (cluster.CONDITIONS),
"reason", "reason_by", "reservation", "gpus": {gres type: [configured, in use]}, and for a node
being powered on "waking_since" (ISO time first seen waking)}.
"""
from __future__ import annotations

import dataclasses
import logging
import time
from datetime import datetime, timedelta

from django.utils import timezone
from django.utils.translation import gettext as _

import cluster
from jobs.background import enqueue
from jobs.models import ClusterProfile

log = logging.getLogger(__name__)

#: how often the sweep reads each cluster's nodes: a drained node is emailed within about this
READ_EVERY = timedelta(minutes=1)
#: seconds sinfo may take to answer: the watcher's loop waits that long at most
READ_TIMEOUT = 15

#: when this process last read each profile (monotonic seconds)
_last_read: dict[int, float] = {}


def node_record(node: cluster.SlurmNode) -> dict:
    """What the portal keeps of one node (JSON)."""
    return {"name": node.name, "condition": cluster.node_condition(node), "reason": node.reason,
            "reason_by": node.reason_by, "reservation": node.reservation,
            "gpus": {kind: list(counts) for kind, counts in cluster.node_gpus(node).items()}}


#: Slurm's reason for a node that did not answer within ResumeTimeout after ResumeProgram (power_save.c)
RESUME_TIMEOUT_REASON = "ResumeTimeout reached"


def newly_stopped(before: list[dict], after: list[dict]) -> list[dict]:
    """The nodes of `after` that took work in `before` and are drained, draining or down now, and
    those that were waking (or asleep) and are down now: they failed to wake. A node not in `before`
    (the first reading, a node added) is not news: nothing is emailed for it."""
    was = {n["name"]: n["condition"] for n in before}

    def stopped(node: dict) -> bool:
        then, now = was.get(node["name"]), node["condition"]
        if then in ("waking", "asleep"):
            return now == "down"
        return then in cluster.USABLE_CONDITIONS and now not in cluster.USABLE_CONDITIONS and now not in (
            "asleep", "waking")
    return [n for n in after if stopped(n)]


def read_nodes(profile: ClusterProfile, now: datetime | None = None) -> list[dict]:
    """Read the cluster's nodes now, store them and email the admins about nodes newly stopped.
    A failure is stored (failed_since, error) and raised (cluster.ClusterError)."""
    now = now or timezone.now()
    before = profile.node_states or {}
    try:
        answer = cluster.runner_for(profile).run(cluster.sinfo_argv(), timeout=READ_TIMEOUT, check=True)
        nodes = [node_record(n) for n in cluster.parse_sinfo(answer.stdout)]
    except Exception as exc:
        failed = {**before, "failed_since": before.get("failed_since") or now.isoformat(), "error": str(exc)[:500]}
        ClusterProfile.objects.filter(pk=profile.pk).update(node_states=failed)
        profile.node_states = failed
        raise
    _note_waking_since(before.get("nodes") or [], nodes, now)
    stored = {"read_at": now.isoformat(), "nodes": nodes}
    ClusterProfile.objects.filter(pk=profile.pk).update(node_states=stored)
    profile.node_states = stored
    for node in newly_stopped(before.get("nodes") or [], nodes):
        log.warning("cluster %s: node %s is %s now (%s)", profile.slug, node["name"], node["condition"],
                    node["reason"] or "no reason given")
        enqueue.enqueue_node_email(profile.pk, node, now.isoformat())
    return nodes


def _note_waking_since(before: list[dict], after: list[dict], now: datetime) -> None:
    """Give each waking node of `after` the time it was first seen waking (`waking_since`, kept
    from `before` while it still wakes): with the cluster's boot time, when it should be ready."""
    since = {n["name"]: n.get("waking_since") for n in before if n.get("condition") == "waking"}
    for node in after:
        if node["condition"] == "waking":
            node["waking_since"] = since.get(node["name"]) or now.isoformat()


def read_due(now: datetime | None = None) -> list[str]:
    """The sweep's duty: read the nodes of every active, reachable cluster not read for READ_EVERY.
    Returns the slugs read. One cluster failing is logged, never raised."""
    read = []
    for profile in ClusterProfile.objects.filter(is_active=True, unreachable_since__isnull=True):
        if time.monotonic() - _last_read.get(profile.pk, -1e12) < READ_EVERY.total_seconds():
            continue
        _last_read[profile.pk] = time.monotonic()
        try:
            read_nodes(profile, now)
        except Exception:  # one cluster's answer never stops the sweep
            log.warning("cluster %s: nodes not read", profile.slug, exc_info=True)
            continue
        read.append(profile.slug)
    return read


@dataclasses.dataclass
class ClusterGpus:
    """One cluster's GPUs by type and state, and its nodes, as last read."""

    profile: ClusterProfile
    read_at: datetime | None  # None: never read
    failed_since: datetime | None  # not answering since (None: answering)
    error: str
    by_type: dict[str, dict[str, int]]  # {gres type: {GPU state: count}}, every GPU_STATES key present
    nodes: list[dict]
    reasons: dict[str, list[str]]  # {gres type: ["n2: maintenance (root)", ...]}: why GPUs are draining


def cluster_gpus(profile: ClusterProfile) -> ClusterGpus:
    """`profile`'s stored reading counted: per GPU type, GPUs free, busy, booked, draining, down, asleep."""
    stored = profile.node_states or {}
    by_type: dict[str, dict[str, int]] = {}
    reasons: dict[str, list[str]] = {}
    nodes = stored.get("nodes") or []
    for node in nodes:
        for kind, (configured, used) in (node.get("gpus") or {}).items():
            counts = by_type.setdefault(kind, dict.fromkeys(cluster.GPU_STATES, 0))
            for state, n in cluster.gpu_states(node["condition"], configured, used).items():
                counts[state] += n
            if node["condition"] in ("draining", "drained"):
                health = health_text(node.get("reason") or "")  # the GPU health check's, in the reader's words
                reasons.setdefault(kind, []).append(
                    f"{node['name']}: {health}" if health else
                    f"{node['name']}: {node.get('reason') or '-'}" + (f" ({node['reason_by']})" if node.get("reason_by") else ""))
    unreachable = profile.unreachable_since
    failed = _when(stored.get("failed_since")) or unreachable
    return ClusterGpus(profile=profile, read_at=_when(stored.get("read_at")), failed_since=failed,
                       error=stored.get("error", "") if stored.get("failed_since") else profile.last_error,
                       by_type=dict(sorted(by_type.items())), nodes=nodes, reasons=reasons)


def all_cluster_gpus() -> list[ClusterGpus]:
    """Every active cluster's stored reading, counted (database only)."""
    return [cluster_gpus(p) for p in ClusterProfile.objects.filter(is_active=True).order_by("name")]


def health_text(reason: str) -> str:
    """The GPU health check's reason (cluster.health_fault) in the active language; "" for another."""
    fault = cluster.health_fault(reason)
    if fault is None:
        return ""
    kind, values = fault
    return {
        "ecc": lambda: _("GPU %(gpu)s reports memory errors (%(count)s uncorrected ECC errors)") % values,
        "hot": lambda: _("GPU %(gpu)s is too hot (%(celsius)s °C)") % values,
        "lost": lambda: _("a GPU stopped answering: %(seen)s of %(count)s seen (fell off the bus)") % values,
        "unreadable": lambda: _("its GPUs could not be read"),
    }.get(kind, lambda: values["text"])()


def condition_text(node: dict) -> str:
    """A node's condition in plain words, in the active language, with Slurm's reason and who gave it."""
    condition, reason, by = node["condition"], node.get("reason") or "", node.get("reason_by") or ""
    values = {"reason": reason or _("no reason given"), "by": by, "reservation": node.get("reservation") or ""}
    fault = health_text(reason)
    if condition in ("drained", "draining") and fault:
        text = (_("taken out of service by the GPU health check: %(fault)s") if condition == "drained"
                else _("being taken out of service by the GPU health check (its running work may finish): "
                       "%(fault)s"))
        return text % {"fault": fault}
    if condition in ("drained", "draining"):
        if by:
            text = (_("drained by %(by)s: %(reason)s") if condition == "drained"
                    else _("being drained by %(by)s (its running work may finish): %(reason)s"))
        else:
            text = (_("drained by an admin: %(reason)s") if condition == "drained"
                    else _("being drained by an admin (its running work may finish): %(reason)s"))
        return text % values
    if condition == "down" and reason == RESUME_TIMEOUT_REASON:
        return _("failed to wake up: it did not answer within the time Slurm allows (ResumeTimeout)")
    if condition == "down":
        return (_("down or not answering: %(reason)s") if reason else _("down or not answering")) % values
    if condition == "booked":
        return (_("booked (reservation %(reservation)s)") if values["reservation"] else _("booked")) % values
    return {"free": _("free"), "busy": _("busy"), "asleep": _("asleep (powered down until work comes)"),
            "waking": _("waking up (being powered on for work or a booking)")}.get(condition, condition)


def _when(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None
