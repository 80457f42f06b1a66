"""How many GPUs of each type a cluster has: read from Slurm, never typed in by an admin.

One SSH round trip (`cluster.gpu_inventory_argv`, parsed by `cluster.parse_gpu_inventory`). Only
usable nodes count (not down or drained): a booking must never be confirmed on GPUs that cannot run.

Every GPU type the cluster reports becomes bookable without an admin step: a type without a
GpuType row gets one (`add_found_types`), named and described from `KNOWN_GPUS` ("h200" -> "H200",
141 GB, compute capability 9.0). An admin may rename it, correct it or switch it off; counting
again never changes what an admin set. The watcher's beat counts every active cluster every
`COUNT_EVERY` (`count_due`), so a fresh `make up` can book within a minute.
"""
from __future__ import annotations

import logging
import re
import time
from datetime import timedelta

from django.db.models import Min
from django.utils import timezone

import cluster
from jobs.models import ClusterProfile, GpuType

log = logging.getLogger(__name__)

#: seconds sinfo may take to answer
INVENTORY_TIMEOUT = 30
#: how often the beat counts each cluster's GPUs again
COUNT_EVERY = timedelta(minutes=10)

#: gres type -> (name shown to users, memory in GB, compute capability). A card that comes in two
#: sizes is listed with the smaller one: a booking is never placed on a card with less than asked.
KNOWN_GPUS: dict[str, tuple[str, int, str]] = {
    "b200": ("B200", 180, "10.0"), "gh200": ("GH200", 96, "9.0"), "h200": ("H200", 141, "9.0"),
    "h100": ("H100", 80, "9.0"), "h800": ("H800", 80, "9.0"), "l40s": ("L40S", 48, "8.9"), "l40": ("L40", 48, "8.9"),
    "l4": ("L4", 24, "8.9"), "a100": ("A100", 40, "8.0"), "a800": ("A800", 40, "8.0"), "a40": ("A40", 48, "8.6"),
    "a30": ("A30", 24, "8.0"), "a10": ("A10", 24, "8.6"), "a6000": ("RTX A6000", 48, "8.6"),
    "rtx4090": ("RTX 4090", 24, "8.9"), "rtx3090": ("RTX 3090", 24, "8.6"), "v100": ("V100", 16, "7.0"),
    "t4": ("T4", 16, "7.5"), "p100": ("P100", 12, "6.0"),
}
#: "a100_80g", "a100-80gb", "nvidia_h100_80gb_hbm3": the card, then maybe its memory
_CARD = re.compile(r"^(?:nvidia[_-]?)?([a-z]+[0-9]+[a-z]?)(?:[_-]?(?:pcie|sxm[0-9]?|nvl))?(?:[_-]?([0-9]+)g(?:b)?)?",
                   re.IGNORECASE)


def gpu_facts(gres_type: str) -> tuple[str, int, str]:
    """(name shown to users, memory GB, compute capability) for a gres type. A card not in
    `KNOWN_GPUS` is named by its type, with memory 0 and capability 0.0 ("not known"): it matches a
    booking that asks no minimum, and an admin can fill in the rest."""
    match = _CARD.match(gres_type.strip())
    card = match.group(1).lower() if match else ""
    label, memory, capability = KNOWN_GPUS.get(card, (gres_type.upper(), 0, "0.0"))
    if match and match.group(2) and card in KNOWN_GPUS:
        memory = int(match.group(2))
    return label, memory, capability


def count_gpus(profile) -> dict[str, list]:
    """{gres type: [NodeGpus ...]} as the cluster says now (raises cluster.ClusterError when it cannot)."""
    result = cluster.runner_for(profile).run(cluster.gpu_inventory_argv(), timeout=INVENTORY_TIMEOUT, check=True)
    found = cluster.parse_gpu_inventory(result.stdout)
    release = cluster.parse_slurm_release(result.stdout)
    if release and release != profile.slurm_release:  # sinfo names its release: an upgrade is seen here
        type(profile).objects.filter(pk=profile.pk).update(slurm_release=release)
        profile.slurm_release = release
    return found


def add_found_types(profile, found: dict[str, list]) -> list[GpuType]:
    """A bookable GpuType for every typed GPU the cluster reports and the portal does not know yet.
    Untyped GPUs ("gpu:2") are left out: a booking needs a type to ask Slurm for."""
    known = set(GpuType.objects.filter(cluster=profile).values_list("gres_type", flat=True))
    added = []
    for gres_type in sorted(found):
        if not gres_type or gres_type in known:
            continue
        label, memory, capability = gpu_facts(gres_type)
        gpu_type, created = GpuType.objects.get_or_create(
            cluster=profile, gres_type=gres_type,
            defaults={"label": label, "memory_gb": memory, "compute_capability": capability})
        if created:
            log.info("cluster %s: GPU type %s found and made bookable", profile.slug, gres_type)
            added.append(gpu_type)
    return added


def refresh_inventory(profile) -> dict[str, int]:
    """Count the GPUs of every GpuType of `profile` on its cluster and store them (inventory, nodes,
    inventory_checked_at), adding the types not known yet. Returns {gres type: usable GPUs} for
    every type the cluster has."""
    found = count_gpus(profile)
    add_found_types(profile, found)
    now = timezone.now()
    for gpu_type in GpuType.objects.filter(cluster=profile):
        usable = [n for n in found.get(gpu_type.gres_type, []) if n.usable]
        GpuType.objects.filter(pk=gpu_type.pk).update(
            inventory=sum(n.gpus for n in usable), inventory_checked_at=now,
            nodes=[{"name": n.node, "gpus": n.gpus, "cpus": n.cpus, "cores_per_gpu": n.cores_per_gpu} for n in usable])
    return {gres: sum(n.gpus for n in nodes if n.usable) for gres, nodes in found.items()}


#: when this process last tried each profile (monotonic seconds): a cluster without GPUs has no
#: GpuType row to remember it by, and must not be asked every few seconds
_last_try: dict[int, float] = {}


def count_due(now=None) -> list[str]:
    """The beat's duty: count the GPUs of every active, reachable cluster not counted for
    `COUNT_EVERY`. Returns the slugs counted. One cluster failing is logged, never raised."""
    now = now or timezone.now()
    counted = []
    last = dict(GpuType.objects.values("cluster").annotate(at=Min("inventory_checked_at")).values_list("cluster", "at"))
    for profile in ClusterProfile.objects.filter(is_active=True, unreachable_since__isnull=True):
        checked = last.get(profile.pk)
        if checked is not None and now - checked < COUNT_EVERY:
            continue
        if time.monotonic() - _last_try.get(profile.pk, -1e12) < COUNT_EVERY.total_seconds():
            continue
        _last_try[profile.pk] = time.monotonic()
        try:
            refresh_inventory(profile)
        except Exception:  # one cluster's answer never stops the beat
            log.warning("cluster %s: GPUs not counted", profile.slug, exc_info=True)
            continue
        counted.append(profile.slug)
    return counted
