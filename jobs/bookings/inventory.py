"""How many GPUs of each type a cluster has: read from Slurm, never typed in by an admin.

One SSH round trip (`cluster.gpu_inventory_argv`, parsed by `cluster.parse_gpu_inventory`). Only
usable nodes count (not down or drained): a booking must never be confirmed on GPUs that cannot run.
"""
from __future__ import annotations

from django.utils import timezone

import cluster
from jobs.models import GpuType

#: seconds sinfo may take to answer
INVENTORY_TIMEOUT = 30


def count_gpus(profile) -> dict[str, list]:
    """{gres type: [NodeGpus ...]} as the cluster says now (raises cluster.ClusterError when it cannot)."""
    result = cluster.runner_for(profile).run(cluster.gpu_inventory_argv(), timeout=INVENTORY_TIMEOUT, check=True)
    found = cluster.parse_gpu_inventory(result.stdout)
    release = cluster.parse_slurm_release(result.stdout)
    if release and release != profile.slurm_release:  # sinfo names its release: an upgrade is seen here
        type(profile).objects.filter(pk=profile.pk).update(slurm_release=release)
        profile.slurm_release = release
    return found


def refresh_inventory(profile) -> dict[str, int]:
    """Count the GPUs of every GpuType of `profile` on its cluster and store them (inventory, nodes,
    inventory_checked_at). Returns {gres type: usable GPUs} for every type the cluster has."""
    found = count_gpus(profile)
    now = timezone.now()
    for gpu_type in GpuType.objects.filter(cluster=profile):
        usable = [n for n in found.get(gpu_type.gres_type, []) if n.usable]
        GpuType.objects.filter(pk=gpu_type.pk).update(
            inventory=sum(n.gpus for n in usable), inventory_checked_at=now,
            nodes=[{"name": n.node, "gpus": n.gpus, "cpus": n.cpus, "cores_per_gpu": n.cores_per_gpu} for n in usable])
    return {gres: sum(n.gpus for n in nodes if n.usable) for gres, nodes in found.items()}
