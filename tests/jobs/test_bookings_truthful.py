"""Bookings out of the box and truthful (issue 27, item 2): GPU types the cluster reports are
bookable without an admin, "as soon as possible" means now, a job waiting in a booking says why,
cancelling moves waiting jobs out before the reservation goes and never claims more than Slurm did,
and booking times are in the user's zone, in one format."""
from __future__ import annotations

from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

import pytest
from django.urls import reverse
from django.utils import timezone

from jobs import bookings
from jobs.bookings import reservations
from jobs.bookings.inventory import count_due, gpu_facts, refresh_inventory
from jobs.models import Booking, BookingState, GpuType, JobStatus

from .api_helpers import make_job
from .booking_helpers import NOW, events, gpu_type, policy, scontrol_answers, second_profile, seed_json  # noqa: F401 - fixtures

ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-CN,zh;q=0.9"}


@pytest.fixture
def logged_in(client, owner):
    client.force_login(owner)
    return client


@pytest.fixture(autouse=True)
def _fresh_count_memory(monkeypatch):
    monkeypatch.setattr("jobs.bookings.inventory._last_try", {})


# ---- GPU types found on the cluster -----------------------------------------------------------------

def test_the_gpus_the_cluster_reports_become_bookable_without_an_admin(fake_ssh, owner, profile, policy):
    fake_ssh(on_run=scontrol_answers())
    with pytest.raises(bookings.BookingError):  # a fresh portal: no GPU type known
        bookings.book(owner, bookings.parse_request(seed_json(), now=NOW), now=NOW)
    assert count_due(NOW) == ["local"]
    h200 = GpuType.objects.get(cluster=profile)
    assert (h200.gres_type, h200.display_name, h200.memory_gb, h200.compute_capability, h200.inventory, h200.is_active) \
        == ("h200", "H200", 141, "9.0", 2, True)
    booking = bookings.book(owner, bookings.parse_request(seed_json(), now=NOW), now=NOW)  # the seed's own JSON
    assert booking.state == BookingState.CONFIRMED and booking.gpu_type == h200
    assert count_due(NOW + timedelta(minutes=5)) == []  # counted again only every 10 minutes


def test_counting_again_keeps_what_an_admin_changed(fake_ssh, profile):
    fake_ssh(on_run=scontrol_answers())
    refresh_inventory(profile)
    GpuType.objects.filter(gres_type="h200").update(label="NVIDIA H200 141 GB", is_active=False)
    refresh_inventory(profile)
    h200 = GpuType.objects.get(cluster=profile)
    assert (h200.display_name, h200.is_active, h200.inventory) == ("NVIDIA H200 141 GB", False, 2)


@pytest.mark.parametrize("gres, facts", [
    ("h200", ("H200", 141, "9.0")), ("a100_80g", ("A100", 80, "8.0")), ("a100", ("A100", 40, "8.0")),
    ("nvidia_h100_80gb_hbm3", ("H100", 80, "9.0")), ("mystery9", ("MYSTERY9", 0, "0.0")),
])
def test_a_gpu_type_is_named_and_described_from_its_slurm_name(gres, facts):
    assert gpu_facts(gres) == facts


def test_the_pages_no_longer_send_users_to_an_admin(fake_ssh, logged_in, profile):
    fake_ssh(on_run=scontrol_answers())
    page = logged_in.get(reverse("booking-calendar")).content.decode()
    assert "It looks again every 10 minutes" in page and "an admin has to name" not in page
    assert "它每 10 分钟会再查找一次" in logged_in.get(reverse("booking-calendar"), **ZH).content.decode()
    refresh_inventory(profile)
    page = logged_in.get(reverse("booking-calendar")).content.decode()
    assert "H200" in page and "No GPUs can be booked yet" not in page


# ---- as soon as possible --------------------------------------------------------------------------

def test_as_soon_as_possible_starts_within_a_minute_not_at_the_next_half_hour(owner, profile, policy):
    gpu_type(profile)
    now = datetime(2026, 12, 1, 9, 1, 20, tzinfo=dt_timezone.utc)  # 29 minutes before the next unit
    booking = bookings.book(owner, bookings.parse_request(seed_json(), now=now), now=now)
    assert booking.starts_at == datetime(2026, 12, 1, 9, 2, tzinfo=dt_timezone.utc)
    assert booking.ends_at - booking.starts_at == timedelta(hours=2)


def test_as_soon_as_possible_starts_the_moment_the_gpus_free_up(owner, colleague, profile, policy):
    gpu_type(profile, gpus=1)
    now = datetime(2026, 12, 1, 9, 1, 20, tzinfo=dt_timezone.utc)
    first = bookings.book(colleague, bookings.parse_request(seed_json(duration_hours=1), now=now), now=now)
    second = bookings.book(owner, bookings.parse_request(seed_json(), now=now), now=now)
    assert second.starts_at == first.ends_at == datetime(2026, 12, 1, 10, 2, tzinfo=dt_timezone.utc)


def test_the_form_says_what_as_soon_as_possible_means(fake_ssh, logged_in, profile):
    fake_ssh(on_run=scontrol_answers())
    assert "starts within a minute when the GPUs are free now" in logged_in.get(reverse("booking-new")).content.decode()
    assert "GPU 现在空闲时，预约在一分钟内开始" in logged_in.get(reverse("booking-new"), **ZH).content.decode()


# ---- a job waiting in a booking ---------------------------------------------------------------------

def booking_of(user, profile, *, starts_at, gpus=1, state=BookingState.CONFIRMED, name="Deadline") -> Booking:
    h200 = GpuType.objects.filter(cluster=profile).first() or gpu_type(profile)
    return Booking.objects.create(user=user, task_name=name, gpu_count=gpus, duration_minutes=120, cluster=profile,
                                  gpu_type=h200, starts_at=starts_at, ends_at=starts_at + timedelta(hours=2),
                                  state=state, reservation_name="ffp-deadline", reservation_made=True)


def test_a_job_waiting_for_its_booking_says_when_it_starts(logged_in, owner, profile, template, monkeypatch, settings):
    settings.TIME_ZONE = "Asia/Shanghai"
    monkeypatch.setattr(timezone, "now", lambda: NOW)  # 17:00 in Shanghai
    booking = booking_of(owner, profile, starts_at=NOW + timedelta(minutes=90))
    job = make_job(owner, template, status=JobStatus.PENDING, name="Album")
    job.booking = booking
    job.save()
    page = logged_in.get(reverse("job-detail", args=[job.pk])).content.decode()
    assert "Waiting for your GPU booking “Deadline” to start at 18:30." in page
    page = logged_in.get(reverse("job-detail", args=[job.pk]), **ZH).content.decode()
    assert "正在等待您的 GPU 预约“Deadline”在 18:30 开始。" in page


def test_a_job_waiting_for_a_gpu_its_other_jobs_use_says_so(logged_in, owner, profile, template, monkeypatch):
    monkeypatch.setattr(timezone, "now", lambda: NOW)
    booking = booking_of(owner, profile, starts_at=NOW - timedelta(minutes=10), gpus=2,
                         state=BookingState.ACTIVE)
    running = make_job(owner, template, status=JobStatus.RUNNING, name="Big run")
    waiting = make_job(owner, template, status=JobStatus.PENDING, name="Small run")
    for job in (running, waiting):
        job.booking = booking
        job.save()
    page = logged_in.get(reverse("job-detail", args=[waiting.pk])).content.decode()
    assert "Waiting for a GPU in your booking “Deadline”: its 2 GPUs are in use by your other jobs “Big run”" in page


# ---- cancelling -----------------------------------------------------------------------------------

class Slurm:
    """scontrol as the cluster answers it: the delete refused while a job runs in the reservation."""

    def __init__(self, in_use: bool):
        self.in_use = in_use

    def __call__(self, argv):
        if "delete" in argv and self.in_use:
            return 1, "", "delete_reservation ffp-deadline: Requested reservation is in use"
        return 0, "", ""


def test_cancel_moves_waiting_jobs_out_before_the_reservation_goes(fake_ssh, logged_in, owner, profile, template,
                                                                   events):
    booking = booking_of(owner, profile, starts_at=timezone.now() - timedelta(minutes=5), state=BookingState.ACTIVE)
    waiting = make_job(owner, template, status=JobStatus.PENDING, name="Album")
    running = make_job(owner, template, status=JobStatus.RUNNING, name="Film")
    for job, slurm_id in ((waiting, "501"), (running, "502")):
        job.booking, job.slurm_job_id = booking, slurm_id
        job.save()
    detail = logged_in.get(reverse("booking-detail", args=[booking.pk])).content.decode()
    assert "1 job waiting inside it will join the normal queue." in detail and "Album" in detail
    assert "1 job running inside it keeps running; the GPUs are released when it ends." in detail

    slurm = fake_ssh(on_run=Slurm(in_use=True))
    page = logged_in.post(reverse("booking-cancel", args=[booking.pk]), follow=True).content.decode()
    assert "free for others" not in page and "1 job waiting inside it will join the normal queue." in page
    reservations.delete_reservation(str(booking.pk))  # the RQ task enqueued on commit
    assert slurm.batches == [[["scontrol", "update", "jobid=501", "reservation="]]]
    assert slurm.commands == [["scontrol", "delete", "reservationname=ffp-deadline"]]
    waiting.refresh_from_db()
    running.refresh_from_db()
    assert waiting.booking is None and running.booking_id == booking.pk
    booking.refresh_from_db()
    assert booking.state == BookingState.CANCELLED and booking.reservation_made  # Slurm still holds it
    page = logged_in.get(reverse("booking-detail", args=[booking.pk])).content.decode()
    assert "Cancelling: 1 job still runs inside this booking" in page and 'data-booking-state="cancelled"' in page
    assert "正在取消" in logged_in.get(reverse("booking-detail", args=[booking.pk]), **ZH).content.decode()

    slurm.on_run = Slurm(in_use=False)  # the film ended: the beat's next try succeeds
    reservations.delete_reservation(str(booking.pk))
    booking.refresh_from_db()
    assert not booking.reservation_made
    page = logged_in.get(reverse("booking-detail", args=[booking.pk])).content.decode()
    assert "Cancelled: the cluster has released its GPUs." in page and "Cancelling" not in page


def test_a_booking_with_no_job_inside_says_its_gpus_are_released_in_a_moment(fake_ssh, logged_in, owner, profile,
                                                                              events):
    booking = booking_of(owner, profile, starts_at=timezone.now() + timedelta(hours=1))
    page = logged_in.post(reverse("booking-cancel", args=[booking.pk]), follow=True).content.decode()
    assert "Booking cancelled. The cluster releases its GPUs in a moment" in page


# ---- the user's time zone ---------------------------------------------------------------------------

def test_booking_times_are_in_the_browsers_zone_in_one_format(logged_in, owner, profile, settings):
    settings.TIME_ZONE = "UTC"
    booking = booking_of(owner, profile, starts_at=datetime(2026, 12, 1, 23, 48, tzinfo=dt_timezone.utc))
    page = logged_in.get(reverse("booking-detail", args=[booking.pk])).content.decode()
    assert "2026-12-01 23:48" in page and "Times are in the time zone UTC." in page
    logged_in.cookies["ffp_tz"] = "Asia/Shanghai"
    for name in ("booking-detail", "booking-list"):
        url = reverse(name, args=[booking.pk]) if name == "booking-detail" else reverse(name)
        page = logged_in.get(url).content.decode()
        assert "2026-12-02 07:48" in page and "23:48" not in page and "Times are in the time zone UTC+8." in page
    assert "时间按 UTC+8 时区显示。" in logged_in.get(reverse("booking-list"), **ZH).content.decode()
    logged_in.cookies["ffp_tz"] = "../../etc/passwd"  # not a zone: the site's
    assert "2026-12-01 23:48" in logged_in.get(reverse("booking-list")).content.decode()


@pytest.mark.parametrize("zone, moment, words", [
    ("Asia/Shanghai", datetime(2026, 12, 2, 10, 0, tzinfo=dt_timezone.utc), "UTC+8"),
    ("Europe/Berlin", datetime(2026, 12, 2, 10, 0, tzinfo=dt_timezone.utc), "UTC+1"),
    ("Europe/Berlin", datetime(2026, 7, 2, 10, 0, tzinfo=dt_timezone.utc), "UTC+2"),  # summer time
    ("Asia/Kolkata", datetime(2026, 12, 2, 10, 0, tzinfo=dt_timezone.utc), "UTC+5:30"),
    ("America/St_Johns", datetime(2026, 12, 2, 10, 0, tzinfo=dt_timezone.utc), "UTC-3:30"),
    ("UTC", datetime(2026, 12, 2, 10, 0, tzinfo=dt_timezone.utc), "UTC"),
])
def test_a_zone_is_said_as_its_offset_at_that_moment_in_any_language(zone, moment, words):
    """Pages and emails name a zone by its offset: "Asia/Shanghai" is English to a Chinese reader,
    and "CST" is China's and Chicago's."""
    from zoneinfo import ZoneInfo

    from jobs.moments import moment_with_zone, zone_words
    assert zone_words(moment, ZoneInfo(zone)) == words
    with timezone.override(ZoneInfo(zone)):
        assert moment_with_zone(moment).endswith(" " + words)


def test_start_a_job_in_this_booking_offers_a_template_on_the_bookings_cluster(logged_in, owner, template,
                                                                               second_profile):
    """From a booking's "Start a job in this booking", New job must not start on another cluster's
    template: the booking could not be used, and the job would run in the open queue instead."""
    from jobs.models import Template
    there = Template.objects.create(name="Second A100", slug="a100", cluster=second_profile, partition="gpu",
                                    gpu_type="a100", gpu_count=1, mem="2G", time_limit="00:10:00", chunk_size=2)
    booking = booking_of(owner, second_profile, starts_at=timezone.now() + timedelta(minutes=5))
    page = logged_in.get(reverse("job-new") + f"?booking={booking.pk}")
    assert page.context["form"].initial["template"] == there.pk
    assert logged_in.get(reverse("job-new")).context["form"].initial["template"] == template.pk
    assert logged_in.get(reverse("job-new") + "?booking=nonsense").status_code == 200
