"""Reservations, GPU inventory and GPU history against the REAL local Slurm 22.05, as user ffportal.

Never skipped: when the cluster is down these tests FAIL and say how to bring it up. ffportal needs
AdminLevel=Operator to manage reservations (scripts/cluster; docs/slurm-bookings.md). Reservations
made here are far in the future or one core from now on, and are deleted in any case.
"""
import re
import socket
import time
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from cluster import (
    gpu_history_argv,
    gpu_inventory_argv,
    parse_gpu_history,
    parse_gpu_inventory,
    parse_reservations,
    parse_sbatch_parsable,
    reservation_create_argv,
    reservation_delete_argv,
    reservation_refusal,
    reservation_update_argv,
    reservations_show_argv,
    sbatch_argv,
    scancel_argv,
)

from .real_cluster import GRES, PARTITION, USER

NODE = socket.gethostname()  # the local cluster's one node is this machine
GPU_TYPE = GRES.split(":")[1]


def new_name():
    return f"ffp_test_{uuid.uuid4().hex[:10]}"


@pytest.fixture
def made(runner):
    """Names of reservations a test made; each is deleted afterwards, whatever happened."""
    names = []
    yield names
    for name in names:
        runner.run(reservation_delete_argv(name), timeout=30)


def show(runner, name):
    return parse_reservations(runner.run(reservations_show_argv(name), timeout=30).stdout)


def far_future():
    # A whole hour weeks ahead: blocks nobody's jobs (their time limits end long before).
    return (datetime.now(timezone.utc) + timedelta(days=30)).replace(minute=0, second=0, microsecond=0)


def test_a_reservation_is_made_read_back_lengthened_moved_and_deleted(runner, made):
    name, start = new_name(), far_future()
    created = runner.run(reservation_create_argv(name, start, 30, [USER], [NODE], 1))
    made.append(name)
    assert created.rc == 0, created.stderr
    (res,) = show(runner, name)
    assert (res.name, res.start, res.end) == (name, start, start + timedelta(minutes=30))
    assert (res.nodes, res.core_count, res.users, res.state) == ([NODE], 1, [USER], "INACTIVE")

    assert runner.run(reservation_update_argv(name, minutes=90), timeout=30).rc == 0
    assert show(runner, name)[0].end == start + timedelta(minutes=90)
    later = start + timedelta(hours=2)
    assert runner.run(reservation_update_argv(name, start=later), timeout=30).rc == 0
    moved = show(runner, name)[0]
    assert (moved.start, moved.end) == (later, later + timedelta(minutes=90))
    assert name in [r.name for r in parse_reservations(runner.run(reservations_show_argv(), timeout=30).stdout)]

    assert runner.run(reservation_delete_argv(name), timeout=30).rc == 0
    assert show(runner, name) == []
    gone = runner.run(reservation_delete_argv(name), timeout=30)
    assert gone.rc != 0 and reservation_refusal(gone.stderr + gone.stdout) == "not_found"


def test_slurm_refuses_more_cores_than_are_free_and_a_second_reservation_of_one_name(runner, made):
    inventory = parse_gpu_inventory(runner.run(gpu_inventory_argv(), check=True, timeout=30).stdout)
    cpus = next(n.cpus for n in inventory[GPU_TYPE] if n.node == NODE)
    name, start = new_name(), far_future()
    first = runner.run(reservation_create_argv(name, start, 30, [USER], [NODE], cpus), timeout=30)
    made.append(name)
    assert first.rc == 0, first.stderr
    # Every core of the node is held for that window: one more core is "busy"
    other = new_name()
    busy = runner.run(reservation_create_argv(other, start + timedelta(minutes=10), 30, [USER], [NODE], 1))
    made.append(other)
    assert busy.rc != 0 and reservation_refusal(busy.stderr) == "busy"
    twice = runner.run(reservation_create_argv(name, start + timedelta(days=1), 30, [USER], [NODE], 1))
    assert twice.rc != 0 and reservation_refusal(twice.stderr) == "exists"


def finished_job(runner, job_id, deadline_s=300):
    """`scontrol show job` fields of a job once it ended. sacct is not asked here: its Reservation
    column came back empty for jobs that ran in one (slurmdbd learns the reservation late)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        out = runner.run(["scontrol", "show", "job", "--oneliner", job_id], timeout=30).stdout
        fields = dict(re.findall(r"(\w+)=(\S*)", out))
        if fields.get("JobState") not in (None, "PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
            return fields
        time.sleep(2)
    runner.run(scancel_argv([job_id]), timeout=30)
    pytest.fail(f"job {job_id} did not finish within {deadline_s} s (is the cluster full?)")


def test_a_job_submitted_into_a_reservation_runs_inside_it_with_a_gpu(runner, made):
    name = new_name()
    # ignore_jobs: other tests' jobs may hold the cores now; this job then waits for one
    created = runner.run(reservation_create_argv(name, "now", 10, [USER], [NODE], 1, ignore_jobs=True))
    made.append(name)
    assert created.rc == 0, created.stderr
    assert show(runner, name)[0].state == "ACTIVE"
    job_id = parse_sbatch_parsable(runner.run(sbatch_argv(extra=[
        f"--reservation={name}", f"--partition={PARTITION}", f"--gres={GRES}:1", "--time=1",
        "--output=/dev/null", "--chdir=/tmp", "--job-name=ffp-test-reservation", "--wrap=sleep 1"]),
        check=True, timeout=30).stdout)
    job = finished_job(runner, job_id)
    assert (job["JobState"], job.get("Reservation")) == ("COMPLETED", name)
    assert "gres/gpu=1" in job["TRES"].split(",")


def test_it_reads_the_gpu_inventory_of_the_real_node(runner):
    inventory = parse_gpu_inventory(runner.run(gpu_inventory_argv(), check=True, timeout=30).stdout)
    (node,) = [n for n in inventory[GPU_TYPE] if n.node == NODE]
    assert node.gpus == 2 and node.usable and PARTITION in node.partitions
    assert node.cores_per_gpu == max(1, node.cpus // 2)


def test_the_gpu_history_holds_a_job_that_just_used_a_gpu(runner):
    since = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(seconds=1)
    job_id = parse_sbatch_parsable(runner.run(sbatch_argv(extra=[
        f"--partition={PARTITION}", f"--gres={GRES}:1", "--time=1", "--output=/dev/null", "--chdir=/tmp",
        "--job-name=ffp-test-history", "--wrap=sleep 1"]), check=True, timeout=30).stdout)
    assert finished_job(runner, job_id)["JobState"] == "COMPLETED"
    until = datetime.now(timezone.utc) + timedelta(minutes=1)
    result = runner.run(gpu_history_argv(since, until), check=True, timeout=60)
    uses = parse_gpu_history(result.stdout)
    # Other users' jobs count too; ours is one that started after `since` with one GPU
    ours = [u for u in uses if u.start >= since and u.gpus == 1 and u.end is not None]
    assert ours and all(u.start <= u.end <= until for u in uses if u.end)
