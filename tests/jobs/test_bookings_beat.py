"""A booking over time: its Slurm reservation made and deleted (through the SSH seam), confirmed ->
active -> ended by the watcher's beat, the "ending" notice once, refusals in plain words."""
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cluster import ClusterUnreachable
from jobs import bookings
from jobs.api.bookings import booking_shape
from jobs.bookings import parse_request, tick
from jobs.bookings.reservations import delete_reservation, make_reservation
from jobs.models import Booking, BookingState

from .booking_helpers import (  # noqa: F401 - fixtures
    NOW,
    SAMPLES,
    at,
    clock,
    down,
    events,
    gpu_type,
    h200,
    policy,
    scontrol,
    scontrol_answers,
    seed_json,
)

pytestmark = pytest.mark.django_db


def confirmed(user, **changes) -> Booking:
    return bookings.book(user, parse_request(seed_json(**changes), now=NOW), now=NOW)


def test_the_reservation_holds_the_cores_of_the_booked_gpus_for_the_profiles_user(owner, h200, policy, scontrol):
    booking = confirmed(owner, start="2026-12-01T12:00:00Z")
    make_reservation(str(booking.id))
    assert scontrol.commands == [[
        "env", "TZ=UTC", "scontrol", "create", "reservation", f"reservationname=ffp-{booking.id.hex[:12]}",
        "starttime=2026-12-01T12:00:00", "duration=120", "users=ffportal", "nodes=node1", "corecnt=1"]]
    booking.refresh_from_db()
    assert booking.reservation_made and booking_shape(booking)["reason"] == ""
    make_reservation(str(booking.id))  # a second run (a retry whose first answer was lost) does nothing
    assert len(scontrol.commands) == 1


@pytest.mark.parametrize("release, held", [("", "corecnt=1"), ("22.05.8", "corecnt=1"),
                                           ("24.11.5", "tres=cpu=1,gres/gpu=1"), ("26.05.5", "tres=cpu=1,gres/gpu=1")])
def test_from_slurm_23_02_the_reservation_holds_the_gpus_themselves(owner, h200, policy, scontrol, release, held):
    # The profile's release as its last GPU count read it from sinfo (tests/e2e/test_booking_holds_gpus.py
    # shows on 24.11 and 26.05 that a job outside the reservation then cannot take them).
    type(h200.cluster).objects.filter(pk=h200.cluster.pk).update(slurm_release=release)
    booking = confirmed(owner, start="2026-12-01T12:00:00Z")
    make_reservation(str(booking.id))
    assert scontrol.commands[0][-2:] == ["nodes=node1", held]


def test_counting_the_gpus_records_the_clusters_slurm_release(h200, scontrol):
    bookings.refresh_inventory(h200.cluster)
    h200.cluster.refresh_from_db()
    assert h200.cluster.slurm_release == "22.05.8"  # sinfo's meta (tests/cluster/samples/22.05/sinfo_gpus_vm.json)


def test_a_booking_over_several_nodes_reserves_cores_on_each(owner, profile, policy, scontrol):
    small = gpu_type(profile, gres="a100", memory=80, cc="8.0", gpus=1, cpus=8, node="n1")
    small.nodes = [{"name": "n1", "gpus": 1, "cpus": 8}, {"name": "n2", "gpus": 2, "cpus": 8}]
    small.inventory = 3
    small.save()
    booking = confirmed(owner, gpu_requirement={"count": 3})
    make_reservation(str(booking.id))
    assert scontrol.commands[0][-2:] == ["nodes=n2,n1", "corecnt=8,8"]


def test_while_the_cluster_is_unreachable_the_booking_says_its_reservation_is_being_made(owner, h200, policy,
                                                                                          scontrol):
    booking = confirmed(owner)
    scontrol.on_run = down
    with pytest.raises(ClusterUnreachable):  # RQ retries it (tasks.RESERVATION_RETRY)
        make_reservation(str(booking.id))
    booking.refresh_from_db()
    assert booking.state == BookingState.CONFIRMED
    assert booking_shape(booking)["reason"] == "Confirmed; the reservation is being made on the cluster."


def test_slurm_refusing_the_reservation_refuses_the_booking_in_plain_words(owner, h200, policy, scontrol, events):
    booking = confirmed(owner)
    scontrol.on_run = scontrol_answers(refuse=(SAMPLES / "scontrol_res_error_busy.txt").read_text())
    make_reservation(str(booking.id))
    booking.refresh_from_db()
    assert booking.state == BookingState.REFUSED
    assert booking.reason == ("The cluster would not hold the GPUs for this time: its nodes are busy or already "
                              "reserved. Book another time.")
    assert events[-1] == ("film_scene_swap_episode5", "refused")
    assert bookings.free_gpus(h200, at(0), at(2)) == 2


def test_cancel_deletes_the_reservation(owner, h200, policy, scontrol, django_capture_on_commit_callbacks):
    booking = confirmed(owner)
    make_reservation(str(booking.id))
    with django_capture_on_commit_callbacks(execute=True):
        assert bookings.cancel(booking, by_user=owner)
    assert scontrol.commands[-1] == ["scontrol", "delete", f"reservationname={booking.reservation_name}"]
    booking.refresh_from_db()
    assert (booking.state, booking.reservation_made) == (BookingState.CANCELLED, False)
    delete_reservation(str(booking.id))  # once is enough
    assert len(scontrol.commands) == 2


def test_the_beat_starts_warns_once_and_ends_a_booking(owner, h200, policy, scontrol, events):
    booking = confirmed(owner)
    make_reservation(str(booking.id))
    events.clear()
    tick(at(0) + timedelta(seconds=1))
    tick(at(1.75))  # 15 minutes left
    tick(at(1.8))
    tick(at(2))
    booking.refresh_from_db()
    assert booking.state == BookingState.ENDED
    assert [e for _n, e in events] == ["started", "ending", "ended"]


def test_the_beat_is_one_query_when_nothing_is_due(owner, h200, policy, scontrol):
    booking = confirmed(owner, start="2026-12-01T12:00:00Z")
    make_reservation(str(booking.id))
    with CaptureQueriesContext(connection) as queries:
        assert tick(at(1)) == 0
    assert len(queries) == 1


def test_the_beat_makes_a_reservation_that_every_try_missed(owner, h200, policy, scontrol):
    booking = confirmed(owner, start="2026-12-01T12:00:00Z")
    Booking.objects.filter(pk=booking.pk).update(updated_at=NOW)
    tick(at(0.5))
    booking.refresh_from_db()
    assert booking.reservation_made and scontrol.commands[0][3] == "create"


def test_a_booking_no_admin_approved_in_time_is_refused(owner, h200, policy, events):
    policy.approval = "manual"
    policy.save()
    booking = confirmed(owner)
    tick(at(2))
    booking.refresh_from_db()
    assert booking.state == BookingState.REFUSED
    assert booking.reason == "No admin approved this booking before its time was over."
