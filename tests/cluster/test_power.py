"""Power saving and GPU health as the portal reads them (pure: cluster.slurm.power, node_states,
states): the warm-up job that wakes a booking's nodes, a node being woken, the health check's
reasons, and what a task says while its computer boots."""
from __future__ import annotations

from pathlib import Path

import pytest

from cluster import (
    SlurmNode,
    gpu_states,
    health_fault,
    node_condition,
    parse_sinfo,
    pending_reason,
    wake_job_argv,
    wake_minutes,
    waking_reason,
)
from cluster.slurm.queue import parse_squeue_tasks

SAMPLES = Path(__file__).parent / "samples" / "26.05"


def node(state: str, *flags: str) -> SlurmNode:
    return SlurmNode(name="n2", state=state, partitions=["gpu"], cpus=2, memory_mb=1000, gpus=2,
                     gres="gpu:a100:2", state_flags=list(flags))


def test_the_warm_up_job_asks_for_exactly_the_asleep_nodes_and_sleeps_until_just_before_the_start():
    argv = wake_job_argv(["ffp2605-n2", "ffp2605-n3"], until=1_800_000_000, minutes=2, partition="gpu")
    assert argv[:2] == ["sbatch", "--parsable"]
    assert "--nodelist=ffp2605-n2,ffp2605-n3" in argv and "--nodes=2" in argv and "--time=2" in argv
    assert "--partition=gpu" in argv and "--job-name=ffportal-wake" in argv
    assert not any(a.startswith("--gres") for a in argv)  # holds no GPU: the booking's job gets them all
    wrap = [a for a in argv if a.startswith("--wrap=")][0]
    assert "1799999990" in wrap  # stops 10 s before the booking's start


@pytest.mark.parametrize("nodes, minutes, partition", [
    ([], 2, ""), (["n2; rm -rf /"], 2, ""), (["n2"], 0, ""), (["n2"], 2, "gpu --qos=urgent"),
])
def test_the_warm_up_job_refuses_what_is_not_a_node_a_partition_or_a_time(nodes, minutes, partition):
    with pytest.raises(ValueError):
        wake_job_argv(nodes, until=1_800_000_000, minutes=minutes, partition=partition)


def test_its_time_limit_is_the_whole_minutes_left_before_the_start():
    assert [wake_minutes(s) for s in (30, 59.9, 60, 75, 179)] == [0, 0, 1, 1, 2]


@pytest.mark.parametrize("flags, condition", [
    (("POWERED_DOWN",), "asleep"), (("POWERING_DOWN",), "asleep"), (("POWERING_UP",), "waking"),
    (("POWER_UP",), "waking"), (("DRAIN", "POWERED_DOWN"), "drained"),
])
def test_a_node_being_powered_on_is_waking_and_its_gpus_count_as_asleep(flags, condition):
    assert node_condition(node("idle", *flags)) == condition
    assert gpu_states("waking", 2, 0) == {"asleep": 2}


def test_an_asleep_node_can_still_be_given_work_and_bookings_a_drained_one_cannot():
    assert node("idle", "POWERED_DOWN").usable and node("idle", "POWERED_DOWN").gpus_free == 2
    assert not node("idle", "DRAIN").usable


@pytest.mark.parametrize("reason, fault", [
    ("gpu health: GPU 1 ECC errors (12 uncorrected)", ("ecc", {"gpu": "1", "count": "12"})),
    ("gpu health: GPU 0 too hot (97 C)", ("hot", {"gpu": "0", "celsius": "97"})),
    ("gpu health: a GPU fell off the bus (1 of 2 seen)", ("lost", {"seen": "1", "count": "2"})),
    ("gpu health: the GPUs could not be read (nvidia-smi: not found)", ("unreadable", {})),
    ("gpu health: something new", ("other", {"text": "something new"})),
    ("maintenance", None),
    ("GPU 1 too hot (97 C)", None),  # an admin's words that look alike are the admin's
])
def test_the_health_checks_reasons_are_told_apart_from_an_admins(reason, fault):
    assert health_fault(reason) == fault


def test_a_task_whose_computer_boots_says_so_with_the_clusters_wake_up_time():
    assert waking_reason(10) == waking_reason(89) == "starting a cluster computer, about a minute"
    assert waking_reason(90) == waking_reason(149) == "starting a cluster computer, about 2 minutes"
    assert waking_reason(120) == "starting a cluster computer, about 2 minutes"
    assert waking_reason(300, _=lambda text: text.replace("starting", "STARTING")) == \
        "STARTING a cluster computer, about 5 minutes"  # translated whole, the number put in after
    assert pending_reason("Resources") == "waiting for a free GPU"  # unchanged beside it


def test_real_26_05_an_asleep_node_beside_one_the_health_check_drained():
    """sinfo --json on 26.05: ffp2605-n1 powered down (scontrol power down), ffp2605-n2 drained by
    deploy/slurm/gpu-health.sh after its fake GPU 1 was set to 97 C."""
    nodes = {n.name: n for n in parse_sinfo((SAMPLES / "sinfo_asleep_and_health_drained.json").read_text())}
    asleep, sick = nodes["ffp2605-n1"], nodes["ffp2605-n2"]
    assert (node_condition(asleep), asleep.usable) == ("asleep", True)
    assert (node_condition(sick), sick.usable) == ("drained", False)
    assert health_fault(sick.reason) == ("hot", {"gpu": "1", "celsius": "97"})


def test_real_26_05_tasks_given_an_asleep_node_are_configuring_from_when_they_got_it():
    """The watcher's squeue text on 26.05 while ffp2605-n1 boots for a two-task array."""
    tasks = parse_squeue_tasks((SAMPLES / "squeue_tasks_configuring.txt").read_text())
    assert [(t.task_index, t.state, t.node) for t in tasks] == [(0, "CONFIGURING", "ffp2605-n1"),
                                                                 (1, "CONFIGURING", "ffp2605-n1")]
    assert all(t.start_time == 1796275072 for t in tasks)  # 2026-12-03T05:17:52 UTC, when Slurm gave the node
