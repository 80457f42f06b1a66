"""Several clusters, on the REAL local clusters: the first (scripts/cluster/up.sh, gpu:h200) and the
second (scripts/cluster/second.sh: its own slurmctld and slurmd, ClusterName ffportal2, gpu:a100,
reached through its own sshd on port 2223). `seed_local` makes a profile and a template for each.

A job started with each template runs on that template's cluster (Slurm's accounting of THAT cluster
names the job's node and the portal's job id); the watcher polls both profiles, one SSH round trip
each, until both jobs completed. A booking whose GPU requirement only the second cluster's GPU type
meets lands there, and its Slurm reservation exists on the second cluster, not on the first.
"""
import os
import socket
import subprocess
import time

import pytest

from jobs.models import Booking, BookingState, ClusterProfile, GpuType, JobStatus
from tests.e2e.conftest import JOB_WAIT_S, SAMPLES, fill, run_rq
from tests.e2e.test_end_to_end import start

NODE = socket.gethostname().split(".")[0]  # scripts/cluster: the first node; the second's is NODE-a100
FIRST = os.environ.get("FFP_SLURM_CLUSTER", "ffportal")
SECOND = os.environ.get("FFP_SECOND_CLUSTER", "ffportal2")
SECOND_CONF = os.environ.get("FFP_SECOND_SLURM_CONF", "/etc/slurm-second/slurm.conf")
ENDED = {JobStatus.COMPLETED, JobStatus.PARTIALLY_FAILED, JobStatus.FAILED, JobStatus.CANCELLED}


def slurm(*argv: str, conf: str | None = None) -> str:
    """A Slurm command run here as root; `conf`: the slurm.conf of the cluster to ask."""
    env = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}
    if conf:
        env["SLURM_CONF"] = conf
    r = subprocess.run(list(argv), capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, f"{' '.join(argv)} failed ({r.returncode}): {r.stdout}{r.stderr}"
    return r.stdout


@pytest.fixture
def second(local):
    profile = ClusterProfile.objects.filter(slug="second", is_active=True).first()
    if profile is None:
        pytest.fail("seed_local made no 'second' profile: is the second cluster up (scripts/cluster/second.sh up)?",
                    pytrace=False)
    return profile


def test_each_template_runs_on_its_cluster_and_the_watcher_polls_both_once(api, local, second, folder, redis_queue):
    from jobs.watcher.poll import poll_profile

    fill(folder, {"a.jpg": SAMPLES / "t1.jpg", "b.png": SAMPLES / "astronaut.png"})
    first_job = start(api, folder, template="gpu-batch", name="on the first cluster")
    second_job = start(api, folder, template="gpu-second", name="on the second cluster")
    assert second_job.cluster == second and first_job.cluster == local
    run_rq(redis_queue)
    for job in (first_job, second_job):
        job.refresh_from_db()
        assert job.status == JobStatus.PENDING and job.slurm_job_id, (job.cluster.slug, job.status, job.error)

    deadline, errors = time.monotonic() + JOB_WAIT_S, []
    while True:
        # What the watcher does each beat: every active profile, one SSH round trip each.
        for profile in ClusterProfile.objects.filter(is_active=True):
            # (an error is not fatal: the watcher tries again next beat, as after a slurmctld restart)
            result = poll_profile(profile)
            assert result.execs == (1 if result.jobs else 0), (profile.slug, result)
            errors.extend([f"{profile.slug}: {result.error}"] if result.error else [])
        run_rq(redis_queue)
        first_job.refresh_from_db()
        second_job.refresh_from_db()
        if first_job.status in ENDED and second_job.status in ENDED:
            break
        assert time.monotonic() < deadline, (first_job.status, second_job.status, errors[-5:])
        time.sleep(1)
    for job in (first_job, second_job):
        assert job.status == JobStatus.COMPLETED, (job.cluster.slug, job.error,
                                                   [(t.name, t.status, t.message) for t in job.targets.all()])
        assert job.done == 2 and all(t.output_file for t in job.targets.all())

    # Each cluster's own accounting has its job, on its node, with the portal's job id as comment.
    for job, cluster_name, node in ((first_job, FIRST, NODE), (second_job, SECOND, f"{NODE}-a100")):
        rows = slurm("sacct", "-M", cluster_name, "-j", job.slurm_job_id, "-X", "-n", "-P",
                     "-o", "Cluster,NodeList,Comment,State").splitlines()
        assert rows, f"{cluster_name} has no job {job.slurm_job_id}"
        for row in rows:
            assert row.split("|") == [cluster_name, node, row.split("|")[2], "COMPLETED"], row
            assert str(job.id) in row.split("|")[2]  # the portal's job id: this is that job


def test_a_booking_only_the_second_clusters_gpu_type_meets_lands_there(local, second, redis_queue):
    from django.contrib.auth.models import User

    from jobs import bookings

    # The admin's table of GPU types: the first cluster's card is made small here, so a request for
    # 40 GB can only be met by the second cluster's a100. Counts come from the clusters themselves.
    GpuType.objects.create(cluster=local, gres_type="h200", memory_gb=24, compute_capability="8.9")
    GpuType.objects.create(cluster=second, gres_type="a100", memory_gb=80, compute_capability="8.0")
    assert bookings.refresh_inventory(local).get("h200") == 2
    assert bookings.refresh_inventory(second).get("a100") == 2

    user = User.objects.get(username="demo")
    request = bookings.parse_request({
        "task_name": "second cluster booking", "image_resolution": "1920x1080",
        "gpu_requirement": {"min_memory_gb": 40, "compute_capability": "8.0", "count": 1},
        "duration_hours": 1, "priority": 0})
    booking = bookings.book(user, request)
    assert booking.state == BookingState.CONFIRMED, booking.reason
    assert booking.cluster == second and booking.gpu_type.gres_type == "a100"
    run_rq(redis_queue)  # makes the reservation over the second cluster's SSH login
    booking.refresh_from_db()
    try:
        assert booking.reservation_made, booking.reason
        on_second = slurm("scontrol", "show", "reservation", conf=SECOND_CONF)
        assert f"ReservationName={booking.reservation_name} " in on_second
        assert f"Nodes={NODE}-a100 " in on_second
        assert booking.reservation_name not in slurm("scontrol", "show", "reservation")
    finally:
        bookings.cancel(Booking.objects.get(pk=booking.pk), user)
        run_rq(redis_queue)
    assert booking.reservation_name not in slurm("scontrol", "show", "reservation", conf=SECOND_CONF)
