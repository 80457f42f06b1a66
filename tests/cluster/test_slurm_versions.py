"""The parsers against the same scenarios captured on every Slurm version the portal is proven on.

`scripts/cluster/capture-samples.sh VERSION` runs the same jobs on each local cluster (22.05: the
host's; 24.11 and 26.05: scripts/cluster/newer.sh, two nodes each) and saves what Slurm printed in
tests/cluster/samples/<version>/. Job ids and node names differ; what the portal reads from them
must not. What differs between the versions, and where the parsers deal with it:

- sinfo --json: 22.05 lists nodes ("nodes"); 24.11 and 26.05 list sinfo's groups ("sinfo": a
  partition and alike nodes each, states as lists). `cluster.slurm.nodes.parse_sinfo` reads both.
- A single-task array (`--array=1`, a retry of one chunk) while it runs: 22.05's sacct prints it
  without its index and PENDING; 24.11 and 26.05 print index 1, RUNNING.
- 26.05's squeue --json gives pending tasks their expected start (22.05 and 24.11: none).
- 26.05's slurmstepd writes its lines in the task's log as "[time] error: ..." (earlier:
  "slurmstepd-NODE: error: ..."): the memory-kill words are the same.
- squeue --json: 22.05 ignores its filters and lists finished jobs until MinJobAge; 24.11 and 26.05
  list queued and running jobs only. The portal never relied on the former (sacct decides).
- JSON numbers are plain in 22.05 and {"set", "infinite", "number"} objects from 23.02 on.
"""
from pathlib import Path

import pytest

from cluster import SlurmError, find_job_by_name, parse_sacct, parse_sbatch_parsable, parse_sinfo, parse_squeue
from cluster.slurm import (
    parse_gpu_history,
    parse_gpu_inventory,
    parse_reservations,
    parse_scontrol_config,
    parse_scontrol_partitions,
    parse_slurm_release,
    parse_squeue_tasks,
    reservation_create_argv,
    reserves_gpus,
    sbatch_refusal,
)
from cluster.states import effective_state

SAMPLES = Path(__file__).parent / "samples"
VERSIONS = ["22.05", "24.11", "26.05"]
NEWER = ["24.11", "26.05"]
#: what capture-samples.sh saves on every version (22.05 has more, captured by hand: test_slurm_parsers.py)
CAPTURED = {
    "sinfo.json", "squeue_array_running.json", "sacct_array_running.json", "sacct_array_running.txt",
    "sacct_by_name.json", "sacct_cancelled.json", "sacct_cancelled.txt", "sacct_array_mixed.json",
    "sacct_array_mixed.txt", "sacct_single_task_array_running.json", "sacct_single_task_array_ended.json",
    "sacct_memkill.json", "sacct_memkill.txt", "memkill_output.txt", "sbatch_parsable.txt",
    "sacct_by_name_just_submitted.json", "sacct_by_name_completed.json", "sacct_by_name_none.json",
    "sbatch_error_gres.txt", "sacct_timeout.json", "sacct_timeout.txt", "timeout_output.txt",
    "squeue_finished.json", "squeue_empty.json",
}
#: what it saves besides on the newer clusters: the portal's own text commands
CAPTURED_NEWER = CAPTURED | {
    "scontrol_config.txt", "scontrol_partitions.txt", "scontrol_show_res_none.txt", "squeue_tasks_running.txt",
    "squeue_tasks_ended.txt", "sacct_gpu_history.txt", "squeue_tasks_unknown_job.stderr",
}


def sample(version: str, name: str) -> str:
    return (SAMPLES / version / name).read_text()


def test_every_version_has_every_scenario_and_nothing_untested():
    for version in VERSIONS:
        names = {p.name for p in (SAMPLES / version).iterdir()}
        assert CAPTURED <= names, (version, CAPTURED - names)
    # and, on 24.11, a dead node's requeued tasks (tests/jobs/test_node_failure_watcher.py); on 26.05, a drained
    # node and the teams' GPU-seconds (tests/cluster/test_account_usage.py), an asleep node beside one the GPU
    # health check drained, and tasks waiting for a node to wake (tests/cluster/test_power.py)
    for version in NEWER:
        extra = {"24.11": {"squeue_tasks_node_failed.txt"},
                 "26.05": {"sinfo_drained.json", "sacct_account_usage.txt", "sinfo_asleep_and_health_drained.json",
                           "squeue_tasks_configuring.txt"}}[version]
        assert {p.name for p in (SAMPLES / version).iterdir()} == CAPTURED_NEWER | extra, version
    assert sorted(p.name for p in SAMPLES.iterdir()) == VERSIONS


def the_array(tasks):
    """The 4-task array of the scenario (the only job with four tasks)."""
    by_job: dict[str, list] = {}
    for t in tasks:
        by_job.setdefault(t.job_id, []).append(t)
    [array] = [ts for ts in by_job.values() if len(ts) == 4]
    return array


@pytest.mark.parametrize("version", VERSIONS)
def test_a_running_array_two_on_gpus_two_waiting_for_them(version):
    # --array=0-3 --gres=gpu:h200:1 on a node with two h200s: 0 and 1 run, 2 and 3 wait (Resources).
    for tasks in (parse_squeue(sample(version, "squeue_array_running.json")),
                  parse_sacct(sample(version, "sacct_array_running.json"), sample(version, "sacct_array_running.txt"))):
        array = the_array(tasks)
        assert [(t.task_index, t.state) for t in array] == [(0, "RUNNING"), (1, "RUNNING"), (2, "PENDING"), (3, "PENDING")]
        assert array[0].node and array[0].node == array[1].node and not array[2].node
        assert [t.gpus for t in array] == [1, 1, 0, 0]
    squeued = the_array(parse_squeue(sample(version, "squeue_array_running.json")))
    assert [t.reason for t in squeued[2:]] == ["Resources", "Resources"]
    assert squeued[0].end_time is None  # a running task's end is only a forecast
    assert squeued[0].name == squeued[0].comment and squeued[0].name.startswith("ffp-")


@pytest.mark.parametrize("version", VERSIONS)
def test_a_cancelled_array_is_cancelled_task_by_task(version):
    array = the_array(parse_sacct(sample(version, "sacct_cancelled.json"), sample(version, "sacct_cancelled.txt")))
    assert [(t.task_index, t.state) for t in array] == [(i, "CANCELLED") for i in range(4)]
    assert [bool(t.node) for t in array] == [True, True, False, False]


@pytest.mark.parametrize("version", VERSIONS)
def test_one_failed_task_keeps_its_exit_code_and_the_others_theirs(version):
    array = the_array(parse_sacct(sample(version, "sacct_array_mixed.json"), sample(version, "sacct_array_mixed.txt")))
    assert [(t.task_index, t.state, t.exit_code) for t in array] == [
        (0, "COMPLETED", 0), (1, "COMPLETED", 0), (2, "FAILED", 3), (3, "COMPLETED", 0)]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_single_task_array_ends_as_its_one_index(version):
    running = parse_sacct(sample(version, "sacct_single_task_array_running.json"))
    [ended] = parse_sacct(sample(version, "sacct_single_task_array_ended.json"))
    assert (ended.task_index, ended.state, ended.exit_code) == (1, "COMPLETED", 0)
    [now] = running
    if version == "22.05":  # no index and PENDING while it runs (the watcher reads it as the attempt's index)
        assert (now.task_index, now.state) == (None, "PENDING")
    else:
        assert (now.task_index, now.state) == (1, "RUNNING")


@pytest.mark.parametrize("version", VERSIONS)
def test_a_task_over_its_memory_reads_as_out_of_memory(version):
    [task] = parse_sacct(sample(version, "sacct_memkill.json"), sample(version, "sacct_memkill.txt"))
    assert (task.state, task.signal) == ("FAILED", 9)
    assert effective_state(task, sample(version, "memkill_output.txt")) == "OUT_OF_MEMORY"


@pytest.mark.parametrize("version", VERSIONS)
def test_a_task_past_its_time_limit_reads_as_timeout(version):
    [task] = parse_sacct(sample(version, "sacct_timeout.json"), sample(version, "sacct_timeout.txt"))
    assert task.state == "TIMEOUT" and task.elapsed_seconds >= 60
    assert "DUE TO TIME LIMIT" in sample(version, "timeout_output.txt")


@pytest.mark.parametrize("version", VERSIONS)
def test_sbatch_its_id_its_refusal_and_finding_a_job_by_name(version):
    job_id = parse_sbatch_parsable(sample(version, "sbatch_parsable.txt"))
    assert job_id.isdigit()
    with pytest.raises(SlurmError):
        parse_sbatch_parsable(sample(version, "sbatch_error_gres.txt"))
    assert sbatch_refusal(sample(version, "sbatch_error_gres.txt")) == "Requested node configuration is not available"
    completed = sample(version, "sacct_by_name_completed.json")
    [task] = parse_sacct(completed)
    assert task.job_id == job_id and task.state == "COMPLETED"
    assert find_job_by_name(None, completed, task.name) == job_id
    assert parse_sacct(sample(version, "sacct_by_name_none.json")) == []
    assert find_job_by_name(None, sample(version, "sacct_by_name_none.json"), task.name) is None


@pytest.mark.parametrize("version", VERSIONS)
def test_finished_jobs_leave_squeue_json_at_once_or_after_min_job_age(version):
    states = {t.state for t in parse_squeue(sample(version, "squeue_finished.json"))}
    if version == "22.05":  # it ignores every filter, --states included: finished jobs until MinJobAge
        assert {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED"} <= states
    else:  # queued and running jobs only (what ended is sacct's)
        assert states == set()
    assert parse_squeue(sample(version, "squeue_empty.json")) == []


@pytest.mark.parametrize("version", NEWER)
def test_two_nodes_each_with_two_gpus_of_its_own_type(version):
    nodes = parse_sinfo(sample(version, "sinfo.json"))
    cluster = "ffp" + version.replace(".", "")
    assert [(n.name, n.state, sorted(n.partitions), n.cpus, n.gpus, n.gpu_types, n.gpus_free) for n in nodes] == [
        (f"{cluster}-n1", "idle", ["cpu", "gpu"], 2, 2, ["h200"], 2),
        (f"{cluster}-n2", "idle", ["cpu", "gpu"], 2, 2, ["a100"], 2)]
    inventory = parse_gpu_inventory(sample(version, "sinfo.json"))
    assert {kind: [(g.node, g.gpus, g.usable) for g in found] for kind, found in inventory.items()} == {
        "h200": [(f"{cluster}-n1", 2, True)], "a100": [(f"{cluster}-n2", 2, True)]}
    partitions = parse_scontrol_partitions(sample(version, "scontrol_partitions.txt"))
    assert [(p.name, p.state, p.is_default, p.total_nodes, p.gpus) for p in partitions] == [
        ("gpu", "UP", True, 2, 4), ("cpu", "UP", False, 2, 4)]
    limits = parse_scontrol_config(sample(version, "scontrol_config.txt"))
    assert limits.max_array_size == 1001
    assert parse_reservations(sample(version, "scontrol_show_res_none.txt")) == []


@pytest.mark.parametrize("version", NEWER)
def test_the_watchers_text_squeue_agrees_with_the_json(version):
    text = parse_squeue_tasks(sample(version, "squeue_tasks_running.txt"))
    json_ = the_array(parse_squeue(sample(version, "squeue_array_running.json")))
    assert [(t.job_id, t.task_index, t.state, t.reason, t.node, t.gpus) for t in text] == [
        (t.job_id, t.task_index, t.state, t.reason, t.node, t.gpus) for t in json_]
    assert text[0].start_time and not text[2].node
    ended = parse_squeue_tasks(sample(version, "squeue_tasks_ended.txt"))
    assert [(t.task_index, t.state) for t in ended] == [(0, "COMPLETED"), (1, "COMPLETED"), (2, "FAILED"), (3, "COMPLETED")]
    # One id squeue no longer knows (purged after MinJobAge): exit 1, and the answer is "not queued".
    assert parse_squeue_tasks("", rc=1, stderr=sample(version, "squeue_tasks_unknown_job.stderr")) == []


@pytest.mark.parametrize("version", NEWER)
def test_the_gpu_history_counts_the_gpu_tasks_that_ran(version):
    text = sample(version, "sacct_gpu_history.txt")
    uses = parse_gpu_history(text)
    # every allocation that held GPUs in the hour (the capture's CPU jobs held none)
    assert len(uses) == sum("gres/gpu=" in line for line in text.splitlines())
    assert sum(u.gpus for u in uses) >= 11 and all(u.end is None or u.end >= u.start for u in uses)


@pytest.mark.parametrize("version, release, holds", [
    ("22.05", "22.05.8", False), ("24.11", "24.11.5", True), ("26.05", "26.05.5", True)])
def test_the_release_sinfo_names_says_whether_a_reservation_can_hold_gpus(version, release, holds):
    assert parse_slurm_release(sample(version, "sinfo.json")) == release
    assert reserves_gpus(release) is holds


@pytest.mark.parametrize("release", ["", "unknown", "23.02.0", "23.11.10", "22.05.11"])
def test_reserving_gpus_starts_with_23_02(release):
    assert reserves_gpus(release) is release.startswith("23.")


def test_a_reservation_holds_the_gpus_where_slurm_can_and_only_cores_where_it_cannot():
    cores_only = reservation_create_argv("ffp_b1", "now", 60, ["ffportal"], ["n1", "n2"], [1, 2])
    assert cores_only[-2:] == ["nodes=n1,n2", "corecnt=1,2"]
    holding = reservation_create_argv("ffp_b1", "now", 60, ["ffportal"], ["n1", "n2"], [1, 2], gpus=3)
    assert holding[-2:] == ["nodes=n1,n2", "tres=cpu=3,gres/gpu=3"] and not any("corecnt" in a for a in holding)
    with pytest.raises(ValueError):
        reservation_create_argv("ffp_b1", "now", 60, ["ffportal"], ["n1"], 1, gpus=-1)


def test_a_drained_nodes_gpus_are_not_offered_to_bookings():
    # 26.05, `scontrol update nodename=ffp2605-n2 state=drain reason=maintenance` (state ["IDLE", "DRAIN"])
    nodes = {n.name: n for n in parse_sinfo(sample("26.05", "sinfo_drained.json"))}
    assert (nodes["ffp2605-n2"].state, nodes["ffp2605-n2"].state_flags, nodes["ffp2605-n2"].gpus_free) == ("idle", ["DRAIN"], 0)
    assert nodes["ffp2605-n1"].gpus_free == 2
    inventory = parse_gpu_inventory(sample("26.05", "sinfo_drained.json"))
    assert [(g.node, g.usable) for g in inventory["a100"]] == [("ffp2605-n2", False)]
    assert [(g.node, g.usable) for g in inventory["h200"]] == [("ffp2605-n1", True)]
