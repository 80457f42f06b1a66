"""Placing bookings: the smallest card that fits, on any active cluster; never beyond the inventory;
the admin's share kept free; booked-GPU-hour quotas; manual approval; waiting when nothing fits."""
import pytest

from jobs import bookings
from jobs.bookings import BookingError, parse_request
from jobs.models import Approval, AuditEntry, Booking, BookingState, Quota

from .booking_helpers import NOW, at, events, gpu_type, h200, policy, second_profile, seed_json  # noqa: F401

pytestmark = pytest.mark.django_db


def book(user, **changes):
    return bookings.book(user, parse_request(seed_json(**changes), now=NOW), now=NOW)


def test_the_smallest_card_that_fits_wins_across_clusters(owner, profile, second_profile, h200, policy, events):
    a100 = gpu_type(second_profile, gres="a100", memory=80, cc="8.0", gpus=4)
    gpu_type(profile, gres="t4", memory=16, cc="7.5", gpus=8)  # too small for the seed's 24 GB
    booking = book(owner)
    assert (booking.gpu_type, booking.cluster, booking.state) == (a100, second_profile, BookingState.CONFIRMED)
    assert (booking.starts_at, booking.ends_at) == (at(0), at(2))
    assert booking.reservation_name == f"ffp-{booking.id.hex[:12]}"
    assert events == [("film_scene_swap_episode5", "confirmed")]
    assert book(owner, gpu_requirement={"min_memory_gb": 100, "count": 1}).gpu_type == h200
    assert book(owner, gpu_requirement={"compute_capability": "9.0", "count": 1}).gpu_type == h200


def test_a_requirement_no_cluster_meets_is_refused_and_nothing_is_kept(owner, h200, policy):
    with pytest.raises(BookingError) as caught:
        book(owner, gpu_requirement={"min_memory_gb": 200, "count": 1})
    assert caught.value.problems["gpu_requirement"].startswith("No cluster has 1 GPU with at least 200 GB to book.")
    with pytest.raises(BookingError):
        book(owner, gpu_requirement={"count": 3})  # only 2 h200 exist
    assert not Booking.objects.exists()


def test_a_full_window_refuses_an_exact_start_and_moves_asap_after_it(owner, colleague, h200, policy, events):
    first = book(owner, gpu_requirement={"count": 2}, start="2026-12-01T12:00:00Z")
    assert first.state == BookingState.CONFIRMED
    clash = book(colleague, start="2026-12-01T13:00:00Z")
    assert clash.state == BookingState.REFUSED
    assert clash.reason.startswith("All bookable GPUs that meet the requirement are booked from 2026-12-01 13:00")
    early = book(colleague)  # asap: 09:00-11:00 is free
    late = book(colleague, duration_hours=4)  # 4 h from 09:00 would run into 12:00: after the first ends
    assert (early.starts_at, late.starts_at) == (at(0), at(5))
    assert ("film_scene_swap_episode5", "refused") in events


def test_back_to_back_bookings_share_the_gpus_but_never_overlap(owner, h200, policy):
    for start in ("09:00", "11:00", "13:00"):
        assert book(owner, gpu_requirement={"count": 2}, start=f"2026-12-01T{start}:00Z").state == "confirmed"
    assert bookings.free_gpus(h200, at(0), at(6)) == 0
    assert bookings.free_gpus(h200, at(6), at(8)) == 2


def test_the_share_kept_for_unbooked_work_is_never_booked(owner, h200, policy):
    policy.free_percent = 50  # 2 GPUs: 1 kept free
    policy.save()
    assert book(owner).state == BookingState.CONFIRMED
    assert book(owner, start="2026-12-01T09:00:00Z").state == BookingState.REFUSED
    with pytest.raises(BookingError):
        book(owner, gpu_requirement={"count": 2})


def test_the_booked_gpu_hour_quota_is_pooled_by_group(owner, colleague, team, h200, policy):
    Quota.objects.create(group=team, booking_gpu_hours_per_month=5)
    book(owner, gpu_requirement={"count": 2})  # 4 GPU-hours
    with pytest.raises(BookingError) as caught:
        book(colleague)  # 2 more: 6 > 5
    assert caught.value.problems["__all__"] == (
        "This booking needs 2 GPU-hours; group vfx allows 5 booked GPU-hours in 2026-12 and 4 are booked "
        "already. Book less, or ask an admin.")
    assert Booking.objects.count() == 1


def test_with_manual_approval_a_booking_holds_its_gpus_until_an_admin_decides(owner, staff, h200, policy, events,
                                                                               inline_rq, monkeypatch,
                                                                               django_capture_on_commit_callbacks):
    monkeypatch.setattr("jobs.bookings.reservations.make_reservation", lambda booking_id: None)
    policy.approval = Approval.MANUAL
    policy.save()
    booking = book(owner, gpu_requirement={"count": 2})
    assert booking.state == BookingState.REQUESTED and not inline_rq.enqueued
    assert book(owner, start="2026-12-01T09:00:00Z").state == BookingState.REFUSED  # held while requested
    with django_capture_on_commit_callbacks(execute=True):
        assert bookings.confirm(booking, actor=staff)
    assert not bookings.confirm(booking, actor=staff)  # once
    booking.refresh_from_db()
    assert (booking.state, booking.decided_by) == (BookingState.CONFIRMED, staff)
    assert [f for f, _args in inline_rq.enqueued] == ["jobs.bookings.reservations.make_reservation"]
    assert AuditEntry.objects.filter(action="booking.confirm", actor=staff).count() == 1


def test_asap_with_no_room_in_the_horizon_waits_and_is_placed_when_gpus_free_up(owner, colleague, h200, policy,
                                                                                events):
    policy.max_days_ahead = 1
    policy.save()
    blockers = [book(owner, gpu_requirement={"count": 2}, duration_hours=24, start=s)
                for s in ("2026-12-01T09:00:00Z", "2026-12-02T09:00:00Z")]
    waiting = book(colleague)
    assert waiting.state == BookingState.WAITING and waiting.starts_at is None
    assert "waits and is placed as soon as GPUs free up" in waiting.reason
    assert not bookings.place_waiting(waiting, now=NOW)
    bookings.cancel(blockers[0], by_user=owner)
    assert bookings.place_waiting(waiting, now=NOW)
    waiting.refresh_from_db()
    assert (waiting.state, waiting.starts_at, waiting.gpu_type) == (BookingState.CONFIRMED, at(0), h200)
    assert events[-1] == ("film_scene_swap_episode5", "confirmed")


def test_cancel_is_once_and_frees_the_gpus(owner, h200, policy):
    booking = book(owner, gpu_requirement={"count": 2})
    assert bookings.cancel(booking, by_user=owner)
    assert not bookings.cancel(booking, by_user=owner)
    assert bookings.free_gpus(h200, at(0), at(2)) == 2


def test_off_peak_takes_the_first_quiet_window_with_free_gpus(owner, h200, policy, monkeypatch, settings):
    settings.TIME_ZONE = "UTC"  # the hours of the week below are the site's
    busy = [[0.9] * 24 for _day in range(7)]
    for hour in (14, 15, 16, 17):
        busy[NOW.weekday()][hour] = 0.0  # this afternoon is quiet
    monkeypatch.setattr("jobs.bookings.offpeak.share_by_hour", lambda profile, now=None: busy)
    booking = book(owner, start="off-peak")
    assert (booking.state, booking.starts_at, booking.ends_at) == (BookingState.CONFIRMED, at(5), at(7))
