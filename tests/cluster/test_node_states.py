"""What each node is doing, read from the real `sinfo --json` of every Slurm version the portal meets
(tests/cluster/samples/<version>/), and its GPUs counted by state (cluster.slurm.node_states)."""
from __future__ import annotations

from pathlib import Path

import pytest

from cluster import SlurmNode, gpu_states, node_condition, node_gpus, parse_sinfo

SAMPLES = Path(__file__).parent / "samples"


def sample(version: str, name: str) -> str:
    return (SAMPLES / version / name).read_text()


@pytest.mark.parametrize("version", ["22.05", "24.11", "26.05"])
def test_it_reads_idle_nodes_of_every_version_as_free_with_no_reason(version):
    nodes = parse_sinfo(sample(version, "sinfo.json"))
    assert nodes and all(node_condition(n) == "free" for n in nodes)
    assert all((n.reason, n.reason_by, n.reason_at, n.reservation) == ("", "", 0, "") for n in nodes)
    assert all(node_gpus(n) == {n.gpu_types[0]: (2, 0)} for n in nodes)


def test_a_mixed_22_05_node_has_one_gpu_busy_and_one_free():
    (node,) = parse_sinfo(sample("22.05", "sinfo_gpu_busy.json"))
    assert (node.state, node_condition(node), node_gpus(node)) == ("mixed", "free", {"h200": (2, 1)})
    assert gpu_states("free", 2, 1) == {"busy": 1, "free": 1}


def test_a_drained_26_05_node_says_why_who_and_when():
    nodes = {n.name: n for n in parse_sinfo(sample("26.05", "sinfo_drained.json"))}
    drained = nodes["ffp2605-n2"]
    assert (node_condition(drained), drained.reason, drained.reason_by) == ("drained", "maintenance", "root")
    assert drained.reason_at == 1796188988
    assert node_condition(nodes["ffp2605-n1"]) == "free"
    assert gpu_states("drained", 2, 0) == {"draining": 2}


def node(state: str, *flags: str, used: int = 0, reservation: str = "") -> SlurmNode:
    return SlurmNode(name="n1", state=state, partitions=["gpu"], cpus=8, memory_mb=1000, gpus=4,
                     gres="gpu:a100:4", gres_used=f"gpu:a100:{used}(IDX:N/A)", gpus_used=used,
                     state_flags=list(flags), reservation=reservation)


@pytest.mark.parametrize("slurm, condition", [
    (node("idle"), "free"),
    (node("mixed", used=2), "free"),
    (node("allocated", used=4), "busy"),
    (node("mixed", "DRAIN", used=1), "draining"),
    (node("idle", "DRAIN"), "drained"),
    (node("drained"), "drained"),
    (node("down"), "down"),
    (node("idle", "NOT_RESPONDING"), "down"),
    (node("down", "DRAIN"), "down"),
    (node("idle", "POWERED_DOWN"), "asleep"),
    (node("idle", "POWERING_DOWN"), "asleep"),
    (node("idle", "RESERVED"), "booked"),
    (node("mixed", used=1, reservation="ffp_b7"), "booked"),
])
def test_slurms_states_and_flags_fold_into_one_plain_condition(slurm, condition):
    assert node_condition(slurm) == condition


@pytest.mark.parametrize("condition, used, counts", [
    ("free", 1, {"busy": 1, "free": 3}),
    ("booked", 1, {"busy": 1, "booked": 3}),
    ("busy", 2, {"busy": 4}),
    ("draining", 1, {"draining": 4}),
    ("down", 0, {"down": 4}),
    ("asleep", 0, {"asleep": 4}),
])
def test_a_nodes_gpus_split_over_the_gpu_states(condition, used, counts):
    assert gpu_states(condition, 4, used) == counts
