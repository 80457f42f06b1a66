"""Jobs in a GPU booking: the New job page offers the user's usable bookings; Start puts the job in
one (refusing another user's, one not usable, one on another cluster, in plain words); the batch
script then carries the booking's reservation; a warning when the work will outlast the booking."""
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from cluster import render_script
from jobs.job.submit import sbatch_spec
from jobs.models import Booking, BookingState, ClusterProfile, GpuType, Job, Template

from .api_helpers import image, token_client


def photo(jpeg_bytes, name="face.jpg"):
    return image(name, jpeg_bytes)


def make_booking(user, profile, *, name="Deadline", state=BookingState.CONFIRMED, made=True,
                 starts_in=timedelta(minutes=-10), lasts=timedelta(hours=1)) -> Booking:
    gpu, _ = GpuType.objects.get_or_create(cluster=profile, gres_type="h200",
                                           defaults={"memory_gb": 141, "compute_capability": "9.0"})
    start = timezone.now() + starts_in
    booking = Booking.objects.create(
        user=user, task_name=name, gpu_count=1, duration_minutes=int(lasts.total_seconds() // 60),
        cluster=profile, gpu_type=gpu, starts_at=start, ends_at=start + lasts, state=state,
        reservation_name=f"ffp-{name.lower()}", reservation_made=made)
    return booking


@pytest.fixture
def logged_in(client, owner):
    client.force_login(owner)
    return client


@pytest.fixture
def other_cluster(db):
    return ClusterProfile.objects.create(
        name="Second", slug="second", host="127.0.0.1", port=2223, username="ffportal", private_key="not-a-real-key",
        known_hosts="[127.0.0.1]:2223 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeFakeFake",
        work_root="/srv/ffportal/work2", target_roots=["/srv/ffportal/storage"], worker_python="/usr/bin/python3")


def start_form(template, jpeg_bytes, booking="", n=1):
    return {"template": template.pk, "consent": "on", "source": photo(jpeg_bytes),
            "targets": [photo(jpeg_bytes, f"t{i}.jpg") for i in range(n)], "booking": str(booking)}


def test_the_page_offers_only_the_users_usable_bookings(logged_in, owner, colleague, profile, template):
    make_booking(owner, profile, name="Deadline")
    make_booking(owner, profile, name="Asked", state=BookingState.REQUESTED, made=False)
    make_booking(owner, profile, name="Yesterday", starts_in=timedelta(hours=-3))  # over
    make_booking(colleague, profile, name="Bobs")
    page = logged_in.get(reverse("job-new")).content.decode()
    assert "Run inside my GPU booking" in page and "Deadline: 1 × h200" in page
    assert "Asked" not in page and "Yesterday" not in page and "Bobs" not in page


def test_the_page_has_no_booking_choice_without_a_booking(logged_in, template):
    assert "Run inside my GPU booking" not in logged_in.get(reverse("job-new")).content.decode()


def test_start_runs_the_job_in_the_booking_s_reservation(logged_in, owner, profile, template, jpeg_bytes):
    booking = make_booking(owner, profile)
    r = logged_in.post(reverse("job-new"), start_form(template, jpeg_bytes, booking.id))
    job = Job.objects.get()
    assert r.status_code == 302 and job.booking == booking
    script = render_script(sbatch_spec(job, n_tasks=1))
    assert "#SBATCH --reservation=ffp-deadline\n" in script and "#SBATCH --requeue\n" in script


def test_a_job_without_a_booking_goes_to_the_open_queue(logged_in, template, jpeg_bytes):
    logged_in.post(reverse("job-new"), start_form(template, jpeg_bytes))
    job = Job.objects.get()
    assert job.booking is None and "--reservation" not in render_script(sbatch_spec(job, n_tasks=1))


@pytest.mark.parametrize("case, words", [
    ("colleague", "Choose one of your own GPU bookings, or run the job without one."),
    ("requested", "The booking “Deadline” cannot take jobs: it is requested."),
    ("over", "The booking “Deadline” cannot take jobs: it is over."),
    ("not-an-id", "Choose one of your own GPU bookings, or run the job without one."),
])
def test_start_refuses_a_booking_it_cannot_use(logged_in, owner, colleague, profile, template, jpeg_bytes, case, words):
    booking = {
        "colleague": lambda: make_booking(colleague, profile).id,
        "requested": lambda: make_booking(owner, profile, state=BookingState.REQUESTED, made=False).id,
        "over": lambda: make_booking(owner, profile, starts_in=timedelta(hours=-2)).id,
        "not-an-id": lambda: "../../etc",
    }[case]()
    r = logged_in.post(reverse("job-new"), start_form(template, jpeg_bytes, booking))
    assert r.status_code == 200 and words in r.content.decode()
    assert not Job.objects.exists()


def test_start_refuses_a_booking_on_another_cluster(logged_in, owner, other_cluster, template, jpeg_bytes):
    booking = make_booking(owner, other_cluster)
    r = logged_in.post(reverse("job-new"), start_form(template, jpeg_bytes, booking.id))
    assert "holds GPUs on Second, but this template runs on Local" in r.content.decode()
    assert not Job.objects.exists()


def test_it_warns_when_the_work_outlasts_the_booking_but_starts_it(logged_in, owner, profile, jpeg_bytes):
    slow = Template.objects.create(name="Slow", slug="slow", cluster=profile, partition="gpu", gpu_type="h200",
                                   gpu_count=1, time_limit="04:00:00", chunk_size=10, seconds_per_image=600,
                                   array_limit=1)
    booking = make_booking(owner, profile, starts_in=timedelta(minutes=-50), lasts=timedelta(hours=1))
    r = logged_in.post(reverse("job-new"), start_form(slow, jpeg_bytes, booking.id, n=3), follow=True)
    page = r.content.decode()
    job = Job.objects.get()
    assert job.booking == booking  # a warning, not a refusal
    # 3 photos x 600 s + 30 s loading (30.5 minutes): about 30; the booking has 10 minutes left.
    assert "This work needs about 30 minutes; your booking ends in 10 minutes." in page
    assert "holds what has not started: then cancel the job and use “Process the rest”" in page


def test_the_api_takes_a_booking_and_refuses_another_users(owner, colleague, profile, template, jpeg_bytes):
    api, _token = token_client(owner)
    mine, theirs = make_booking(owner, profile), make_booking(colleague, profile, name="Bobs")
    data = {"template": template.slug, "consent": "true", "source": photo(jpeg_bytes),
            "targets": photo(jpeg_bytes, "t.jpg"), "booking": str(theirs.id)}
    r = api.post("/api/v1/jobs", data)
    assert r.status_code == 400 and r.json()["field"] == "booking"
    data.update(source=photo(jpeg_bytes), targets=photo(jpeg_bytes, "t.jpg"), booking=str(mine.id))
    r = api.post("/api/v1/jobs", data)
    assert r.status_code == 201 and "warning" not in r.json()  # one photo fits in the hour left
    assert Job.objects.get(pk=r.json()["id"]).booking == mine


def test_the_api_warns_when_the_work_outlasts_the_booking(owner, profile, jpeg_bytes):
    Template.objects.create(name="Slow", slug="slow", cluster=profile, partition="gpu", gpu_type="h200",
                            gpu_count=1, time_limit="04:00:00", chunk_size=10, seconds_per_image=600)
    booking = make_booking(owner, profile, starts_in=timedelta(minutes=-50), lasts=timedelta(hours=1))
    api, _token = token_client(owner)
    r = api.post("/api/v1/jobs", {"template": "slow", "consent": "true", "source": photo(jpeg_bytes),
                                  "targets": [photo(jpeg_bytes, f"t{i}.jpg") for i in range(3)],
                                  "booking": str(booking.id)})
    assert r.status_code == 201
    assert r.json()["warning"].startswith("This work needs about 30 minutes; your booking ends in 10 minutes.")


def test_a_batch_held_because_the_booking_ended_says_what_to_do():
    # Seen on Slurm 22.05: a task of a job in a reservation, not started when the reservation
    # ended, is held for good (squeue: RESV_DEL_HOLD, "Reservation <name> was deleted").
    from datetime import datetime
    from datetime import timezone as tz

    from cluster.slurm import parse_squeue_tasks
    from jobs.watcher.decide import JobRow, SlurmAnswer, TaskChange, TaskRow, decide

    [held] = parse_squeue_tasks("4876|2|RESV_DEL_HOLD|Reservation ffp-3f2a was deleted||"
                                "cpu=1,mem=10847M,node=1,billing=1,gres/gpu=1|N/A|0|\n")
    now = datetime(2026, 12, 1, 4, 44, 47, tzinfo=tz.utc)
    row = JobRow(id="j", status="running", slurm_job_id="4876", submitted_at=now, tasks=(TaskRow(index=2),))
    [change] = decide(row, SlurmAnswer(queued={2: held}, asked_accounting=False), [], {}, now).of(TaskChange)
    assert change.fields["state"] == "RESV_DEL_HOLD"
    assert change.fields["reason"] == ("held: the GPU booking ended before this batch could start; cancel the job "
                                       "and use “Process the rest” to run what is left")
