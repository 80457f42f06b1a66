"""Reservations, GPU inventory and GPU-use history: argv builders and parsers, with real 22.05 output.

Samples were captured on the local cluster (node `vm`, 2 CPUs, gpu:h200:2) as user ffportal.
"""
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from cluster import (
    REFUSAL_CODES,
    GpuUse,
    NodeGpus,
    SlurmError,
    SlurmReservation,
    expand_hostlist,
    gpu_history_argv,
    gpu_inventory_argv,
    parse_gpu_history,
    parse_gpu_inventory,
    parse_reservations,
    reservation_create_argv,
    reservation_delete_argv,
    reservation_refusal,
    reservation_update_argv,
    reservations_show_argv,
    slurm_time,
    window_minutes,
)

SAMPLES = Path(__file__).parent / "samples" / "22.05"
UTC = timezone.utc
START = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)


def sample(name):
    return (SAMPLES / name).read_text()


# ---- commands -----------------------------------------------------------------------------------

def test_create_holds_cores_for_the_portal_user_in_utc():
    assert reservation_create_argv("ffp-b12", START, 120, ["ffportal"], ["vm"], 1) == [
        "env", "TZ=UTC", "scontrol", "create", "reservation", "reservationname=ffp-b12",
        "starttime=2026-12-02T10:00:00", "duration=120", "users=ffportal", "nodes=vm", "corecnt=1"]


def test_create_converts_any_zone_to_utc_and_takes_now_partition_and_ignore_jobs():
    berlin = timezone(timedelta(hours=1))
    argv = reservation_create_argv("r.1", datetime(2026, 12, 2, 11, 0, tzinfo=berlin), 30,
                                   ["ffportal", "root"], ["gpu01", "gpu02"], [2, 4], "gpu", ignore_jobs=True)
    assert argv[6:] == ["starttime=2026-12-02T10:00:00", "duration=30", "users=ffportal,root",
                        "nodes=gpu01,gpu02", "corecnt=2,4", "partitionname=gpu", "flags=ignore_jobs"]
    assert reservation_create_argv("r", "now", 1, ["u"], ["vm"], 1)[6] == "starttime=now"


@pytest.mark.parametrize("kwargs", [
    dict(name="bad name"), dict(name="x;rm -rf /"), dict(name=""), dict(name="a" * 65), dict(name="a,b"),
    dict(start=datetime(2026, 12, 2, 10, 0)),  # naive: its zone would be a guess
    dict(start="tomorrow"), dict(minutes=0), dict(minutes=1.5), dict(minutes=True),
    dict(users=[]), dict(users="ffportal"), dict(users=["a,b"]), dict(users=["-rf"]),
    dict(nodes=[]), dict(nodes=["vm x"]), dict(nodes=["vm\n"]),
    dict(core_count=0), dict(core_count=[1, 2]),  # two counts for one node
    dict(partition="gpu cpu"),
])
def test_create_refuses_values_that_would_change_the_command(kwargs):
    args = dict(name="ok", start=START, minutes=60, users=["ffportal"], nodes=["vm"], core_count=1)
    args.update(kwargs)
    with pytest.raises(ValueError):
        reservation_create_argv(**args)


def test_update_changes_start_and_or_length_and_refuses_nothing_to_change():
    assert reservation_update_argv("r1", minutes=90) == [
        "env", "TZ=UTC", "scontrol", "update", "reservationname=r1", "duration=90"]
    assert reservation_update_argv("r1", start=START, minutes=30)[5:] == [
        "starttime=2026-12-02T10:00:00", "duration=30"]
    with pytest.raises(ValueError):
        reservation_update_argv("r1")
    with pytest.raises(ValueError):
        reservation_update_argv("r 1", minutes=5)


def test_delete_show_inventory_commands():
    assert reservation_delete_argv("r1") == ["scontrol", "delete", "reservationname=r1"]
    assert reservations_show_argv() == ["env", "TZ=UTC", "scontrol", "show", "reservation", "--oneliner"]
    assert reservations_show_argv("r1")[-2:] == ["r1", "--oneliner"]
    assert gpu_inventory_argv() == ["sinfo", "--json"]
    with pytest.raises(ValueError):
        reservation_delete_argv("$(id)")


def test_history_asks_every_users_allocations_that_ran_in_the_window_in_utc():
    since = datetime(2026, 11, 3, 0, 0, tzinfo=UTC)
    until = datetime(2026, 12, 1, 1, 0, tzinfo=timezone(timedelta(hours=1)))
    assert gpu_history_argv(since, until) == [
        "env", "TZ=UTC", "sacct", "--allusers", "--allocations", "--duplicates", "--truncate", "--state=RUNNING",
        "--starttime=2026-11-03T00:00:00", "--endtime=2026-12-01T00:00:00",
        "--parsable2", "--noheader", "--format=Start,End,AllocTRES"]
    with pytest.raises(ValueError):
        gpu_history_argv(until, since)
    with pytest.raises(ValueError):
        gpu_history_argv(datetime(2026, 11, 3), datetime(2026, 11, 4))


def test_times_and_lengths():
    assert slurm_time("now") == "now"
    assert slurm_time(datetime(2026, 1, 1, 23, 30, tzinfo=timezone(timedelta(hours=-2)))) == "2026-01-02T01:30:00"
    assert window_minutes(START, START + timedelta(hours=2)) == 120
    assert window_minutes(START, START + timedelta(minutes=30, seconds=1)) == 31  # never shorter
    assert window_minutes(START, START) == 1


# ---- reservations -------------------------------------------------------------------------------

def test_it_reads_real_reservations_future_and_active():
    reservations = parse_reservations(sample("scontrol_show_res_several.txt"))
    assert [r.name for r in reservations] == ["ffp-b.12_x", "ffp_b_13", "ffp_b_14"]
    first, second, active = reservations
    assert first == SlurmReservation(
        name="ffp-b.12_x", start=START, end=START + timedelta(hours=2), nodes=["vm"], core_count=1,
        users=["ffportal", "root"], state="INACTIVE", flags=["SPEC_NODES"], partition="gpu")
    assert second.flags == ["IGNORE_JOBS", "SPEC_NODES"] and second.users == ["ffportal"]
    assert active.state == "ACTIVE" and active.end - active.start == timedelta(minutes=1)
    assert active.start.tzinfo == UTC


def test_no_reservations_and_an_unknown_one_read_as_none():
    assert sample("scontrol_show_res_none.txt").strip() == "No reservations in the system"
    assert parse_reservations(sample("scontrol_show_res_none.txt")) == []
    assert parse_reservations("Reservation nosuch not found\n") == []
    assert parse_reservations("") == []


def test_it_expands_host_lists_and_reads_null_fields():
    line = ("ReservationName=r StartTime=2026-12-02T10:00:00 EndTime=2026-12-02T10:30:00 Duration=00:30:00 "
            "Nodes=gpu[01-03,07] NodeCnt=4 CoreCnt=8 Features=(null) PartitionName=(null) Flags=(null) "
            "NodeName=gpu01 CoreIDs=0-1 NodeName=gpu02 CoreIDs=0-1 TRES=cpu=8 Users=(null) Groups=(null) "
            "Accounts=ffportal State=INACTIVE")
    (res,) = parse_reservations(line)
    assert res.nodes == ["gpu01", "gpu02", "gpu03", "gpu07"] and res.core_count == 8
    assert res.users == [] and res.flags == [] and res.partition == ""
    assert expand_hostlist("vm") == ["vm"]
    assert expand_hostlist("a[8-10],b1,c[1-2]x") == ["a8", "a9", "a10", "b1", "c1x", "c2x"]


def test_a_reservation_without_times_is_an_error_not_a_guess():
    with pytest.raises(SlurmError):
        parse_reservations("ReservationName=r StartTime=Unknown EndTime=2026-12-02T10:30:00 CoreCnt=1")
    with pytest.raises(SlurmError):
        parse_reservations("ReservationName=r StartTime=12/02-10:00 EndTime=2026-12-02T10:30:00 CoreCnt=1")


@pytest.mark.parametrize("stderr, code", [
    (sample("scontrol_res_error_busy.txt"), "busy"),  # real: cores taken (reservations or running jobs)
    ("Error creating the reservation: Duplicate reservation name\n", "exists"),  # the rest: seen on 22.05
    ("Error creating the reservation: Invalid user id\n", "not_allowed"),
    ("delete_reservation reservationname=nosuch: Invalid user id\n", "not_allowed"),  # caller unknown to Slurm
    ("Error creating the reservation: Access/permission denied\n", "not_allowed"),
    ("Error updating the reservation: Requested reservation is invalid\n"
     "slurm_update error: Requested reservation is invalid\n", "not_found"),
    ("delete_reservation reservationname=nosuch: Requested reservation is invalid\n", "not_found"),
    ("Reservation nosuch not found\n", "not_found"),
    ("delete_reservation reservationname=r: Requested reservation is in use\n", "in_use"),  # a job waits in it
    ("Error creating the reservation: Invalid time specified\n", "invalid"),
    ("Error creating the reservation: Invalid node name specified\n", "invalid"),
    ("Error creating the reservation: Requested reservation overlaps with another reservation\n", "overlap"),
    ("scontrol: error: Unable to contact slurm controller (connect failure)\n", "unavailable"),
    ("Error creating the reservation: Socket timed out on send/recv operation\n", "unavailable"),
    ("something new\n", "unknown"), ("", "unknown"),
])
def test_refusals_become_codes_the_portal_can_word(stderr, code):
    assert reservation_refusal(stderr) == code
    assert code in REFUSAL_CODES


# ---- GPU inventory ------------------------------------------------------------------------------

def test_it_counts_the_real_nodes_gpus_by_type():
    assert parse_gpu_inventory(sample("sinfo_gpus_vm.json")) == {
        "h200": [NodeGpus(node="vm", gpus=2, cpus=2, partitions=["gpu", "cpu"], usable=True, cores_per_gpu=1)]}


def node(name, gres, cpus=32, state="idle", flags=()):
    return {"name": name, "state": state, "state_flags": list(flags), "cpus": cpus, "real_memory": 1000,
            "gres": gres, "gres_used": "", "partitions": ["gpu"]}


def test_it_reads_mixed_untyped_and_unusable_nodes():
    text = json.dumps({"nodes": [
        node("a", "gpu:a100:4,gpu:v100:2", cpus=48), node("b", "gpu:h200:2(S:0-1)", cpus=64),
        node("c", "gpu:2", cpus=8), node("d", "gpu:a100:4", state="drained"),
        node("e", "gpu:a100:4(S:0)", state="idle", flags=["DRAIN"]), node("f", "", cpus=8),
        node("g", "(null)", cpus=8), node("h", "gpu:h200:8", cpus=4)]})
    inventory = parse_gpu_inventory(text)
    assert sorted(inventory) == ["", "a100", "h200", "v100"]
    assert [(n.node, n.gpus, n.usable, n.cores_per_gpu) for n in inventory["a100"]] == [
        ("a", 4, True, 8), ("d", 4, False, 8), ("e", 4, False, 8)]  # 48 cores over 6 GPUs of both types
    assert inventory["v100"] == [NodeGpus("a", 2, 48, ["gpu"], True, 8)]
    assert [(n.node, n.gpus, n.cores_per_gpu) for n in inventory["h200"]] == [("b", 2, 32), ("h", 8, 1)]
    assert [(n.node, n.gpus) for n in inventory[""]] == [("c", 2)]


def test_an_error_from_sinfo_is_raised():
    with pytest.raises(SlurmError):
        parse_gpu_inventory("sinfo: error: slurm_load_node: Unable to contact slurm controller")


# ---- GPU-use history ----------------------------------------------------------------------------

def at(text):
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_it_reads_every_gpu_allocation_of_the_real_history():
    uses = parse_gpu_history(sample("sacct_gpu_history_vm.txt"))
    lines = sample("sacct_gpu_history_vm.txt").splitlines()
    assert len(lines) == 22 and len(uses) == 21  # one job cancelled before it got anything
    assert uses[0] == GpuUse(at("2026-12-01T04:22:29"), at("2026-12-01T04:22:29"), 1)
    two = [u for u in uses if u.gpus == 2]  # the one job that took both GPUs
    assert two == [GpuUse(at("2026-12-01T04:29:17"), at("2026-12-01T04:29:37"), 2)]
    assert all(u.end is not None and u.start <= u.end for u in uses)  # --truncate: running ones end "now"


def test_a_running_job_without_truncate_has_no_end():
    uses = parse_gpu_history(sample("sacct_gpu_history_running.txt"))
    assert [u for u in uses if u.end is None] == [GpuUse(at("2026-12-01T04:30:05"), None, 1)]


def test_it_skips_jobs_without_gpus_or_start_and_reads_typed_tres():
    text = ("None|2026-11-30T19:16:25|\n"
            "Unknown|Unknown|\n"
            "2026-11-30T19:16:23|2026-11-30T19:16:25|billing=1,cpu=1,mem=2G,node=1\n"
            "2026-11-30T19:16:30|2026-11-30T19:16:32|cpu=4,gres/gpu:a100=3,mem=2G,node=1\n"
            "\n")
    assert parse_gpu_history(text) == [GpuUse(at("2026-11-30T19:16:30"), at("2026-11-30T19:16:32"), 3)]
    assert parse_gpu_history("") == []


def test_output_of_another_shape_is_an_error():
    with pytest.raises(SlurmError):
        parse_gpu_history("JobID|Start|End|AllocTRES\n")
    with pytest.raises(SlurmError):
        parse_gpu_history("yesterday|today|gres/gpu=1\n")
