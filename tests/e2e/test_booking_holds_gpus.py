"""A booking holds the GPUs themselves where Slurm can (24.11 and 26.05: `TRES=cpu=C,gres/gpu=N` in
the reservation), shown on the real clusters: a job from outside the booking that wants the node's
GPUs waits until the booking is cancelled, then runs. (Slurm 22.05 refuses GPUs in a reservation:
there a booking holds cores, tests/e2e/test_job_booking_cluster.py and docs/slurm-bookings.md.)"""
import time

import pytest

from jobs import bookings
from jobs.models import Booking, BookingState, GpuType
from tests.e2e import sites
from tests.e2e.conftest import run_rq


@pytest.mark.parametrize("version", ["24.11", "26.05"], ids=sites.site_id)
def test_a_bookings_gpus_are_not_taken_by_a_job_from_outside_it(local, version, redis_queue):
    from django.contrib.auth.models import User

    site = sites.site(version)
    node = site.nodes[0]  # the node with the two h200s
    # Only the h200s can be booked here (the other clusters' types are larger than asked for: none exists).
    GpuType.objects.create(cluster=site.profile, gres_type="h200", memory_gb=141, compute_capability="9.0")
    assert bookings.refresh_inventory(site.profile).get("h200") == 2
    site.profile.refresh_from_db()
    assert site.profile.slurm_release.startswith(version)  # read from sinfo with the GPUs

    user = User.objects.get(username="demo")
    request = bookings.parse_request({
        "task_name": f"holds a GPU on {version}", "image_resolution": "1920x1080",
        "gpu_requirement": {"min_memory_gb": 141, "compute_capability": "9.0", "count": 1},
        "duration_hours": 1, "priority": 0})
    booking = bookings.book(user, request)
    assert booking.state == BookingState.CONFIRMED and booking.cluster == site.profile, booking.reason
    outside = None
    try:
        run_rq(redis_queue)  # makes the reservation over the cluster's SSH login
        booking.refresh_from_db()
        assert booking.reservation_made, booking.reason
        shown = site.slurm("scontrol", "show", "reservation", booking.reservation_name, "--oneliner")
        assert f"Nodes={node} " in shown and ",gres/gpu=1 " in shown, shown
        # Its hour has come (an "asap" booking starts at the next quarter: the administrator brings it forward).
        start_now(site, booking.reservation_name)
        shown = site.slurm("scontrol", "show", "reservation", booking.reservation_name, "--oneliner")
        assert " State=ACTIVE " in shown and ",gres/gpu=1 " in shown, shown

        # The service user's job outside the booking, wanting both of the node's GPUs: it waits.
        outside = site.slurm("runuser", "-u", "ffportal", "--", "sbatch", "--parsable", "-p", "gpu", "-w", node,
                             "--gres=gpu:h200:2", "--time=1", "-o", "/dev/null", "--wrap", "sleep 1").strip()
        time.sleep(8)  # several scheduling passes
        state = site.slurm("squeue", "-h", "-j", outside, "-o", "%T %r").strip()
        assert state.startswith("PENDING"), (outside, state, site.slurm(
            "sacct", "-X", "-P", "-j", outside, "-o", "JobID,State,Reason,NodeList,AllocTRES,Reservation"),
            site.slurm("scontrol", "show", "reservation"))
    finally:
        bookings.cancel(Booking.objects.get(pk=booking.pk), user)
        run_rq(redis_queue)  # deletes the reservation
    assert booking.reservation_name not in site.slurm("scontrol", "show", "reservation")
    # The booking gone, the GPUs are free again: the outside job runs and ends.
    deadline = time.monotonic() + 90
    while (state := site.slurm("sacct", "-n", "-X", "-P", "-j", outside, "-o", "State").strip()) != "COMPLETED":
        assert time.monotonic() < deadline, f"the outside job did not run once the booking was cancelled: {state}"
        time.sleep(1)


def start_now(site, name: str) -> None:
    """Bring reservation `name`'s start forward to now. A booking made a moment before a quarter
    starts at that quarter: its reservation may have started by itself meanwhile, and Slurm then
    refuses the change ("Reservation already started", seen in CI at :30): nothing is left to do."""
    if " State=ACTIVE " in site.slurm("scontrol", "show", "reservation", name, "--oneliner"):
        return
    try:
        site.slurm("scontrol", "update", f"reservationname={name}", "starttime=now")
    except AssertionError as exc:  # it started between the two commands
        if "Reservation already started" not in str(exc):
            raise
