"""A job in a GPU booking on the REAL local cluster: Start with the booking puts the job's Slurm
array into the booking's reservation (`--reservation`), and it runs there to the end; Slurm's
accounting says which reservation each task ran in."""
import uuid
from datetime import timedelta

from django.utils import timezone

import cluster
from jobs import bookings
from jobs.models import Booking, BookingState, GpuType, JobStatus
from tests.e2e.conftest import SAMPLES, fill, run_rq, watch_until
from tests.e2e.test_end_to_end import start


def test_a_job_started_in_a_booking_runs_inside_its_reservation(api, site, folder, redis_queue):
    local = site.profile
    gpu_type = GpuType.objects.create(cluster=local, gres_type="h200", memory_gb=141, compute_capability="9.0")
    bookings.refresh_inventory(local)
    gpu_type.refresh_from_db()
    node = gpu_type.nodes[0]["name"]
    name = f"ffp-e2e-{uuid.uuid4().hex[:8]}"
    runner = cluster.runner_for(local)
    made = runner.run(cluster.reservation_create_argv(name, "now", 30, ["ffportal"], [node], 1, ignore_jobs=True),
                      timeout=30)
    assert made.rc == 0, made.stderr
    try:
        now = timezone.now()
        booking = Booking.objects.create(
            user=api_user(), task_name="deadline", gpu_count=1, duration_minutes=30, cluster=local, gpu_type=gpu_type,
            starts_at=now - timedelta(minutes=1), ends_at=now + timedelta(minutes=29), state=BookingState.ACTIVE,
            reservation_name=name, reservation_made=True)
        fill(folder, {"a.jpg": SAMPLES / "t1.jpg", "b.png": SAMPLES / "astronaut.png", "c.jpg": SAMPLES / "t1.jpg"})
        job = start(api, folder, template=site.gpu, booking=str(booking.id))
        assert job.booking == booking
        run_rq(redis_queue)
        job.refresh_from_db()
        assert job.slurm_job_id, job.error
        job = watch_until(job, {JobStatus.COMPLETED, JobStatus.PARTIALLY_FAILED, JobStatus.FAILED})
        assert job.status == JobStatus.COMPLETED, (job.error, [(t.name, t.status, t.message) for t in job.targets.all()])
        assert job.done == 3
        out = site.slurm("sacct", "-n", "-X", "-P", "-j", job.slurm_job_id, "-o", "JobID,Reservation,State")
        rows = [line.split("|") for line in out.splitlines() if line.strip()]
        assert len(rows) == 2 and all(r[2] == "COMPLETED" for r in rows), out
        # sacct's Reservation column is sometimes still empty for a task that just ran in one (seen in
        # CI); slurmctld, which keeps an ended job for MinJobAge (60 s), says where each task ran.
        shown = site.slurm("scontrol", "-o", "show", "job", job.slurm_job_id)
        assert all(r[1] == name for r in rows) or shown.count(f" Reservation={name} ") == 2, (out, shown)
    finally:
        runner.run(cluster.reservation_delete_argv(name), timeout=30)


def api_user():
    from django.contrib.auth.models import User

    return User.objects.get(username="demo")  # the `api` fixture's user
