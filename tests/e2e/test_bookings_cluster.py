"""Bookings on the REAL local cluster: a booking made through the API becomes a real Slurm
reservation (read back with `scontrol show reservation`), cancelling it deletes it, a booking that
would oversell the GPUs is refused, and bookings sent at the same moment never exceed the inventory.

The GPU inventory is counted on the cluster (jobs.bookings.refresh_inventory: 2 fake h200 GPUs).
Reservations are weeks ahead so they block nobody's jobs, and are deleted whatever happens.
"""
import json
import threading
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

import pytest
from django.db import connection
from django.test import Client

import cluster
from jobs import bookings
from jobs.models import Booking, GpuType

from .conftest import run_rq

THREADS = 4


def seed(start: datetime, count: int = 1, name: str = "film_scene_swap_episode5") -> str:
    return json.dumps({"task_name": name, "image_resolution": "1920x1080",
                       "gpu_requirement": {"min_memory_gb": 24, "compute_capability": "8.0", "count": count},
                       "duration_hours": 2, "priority": 10, "start": start.isoformat()})


def weeks_ahead(days: int = 20) -> datetime:
    return (datetime.now(dt_timezone.utc) + timedelta(days=days)).replace(minute=0, second=0, microsecond=0)


def reservations(profile, name=None):
    runner = cluster.runner_for(profile)
    found = cluster.parse_reservations(runner.run(cluster.reservations_show_argv(name), timeout=30).stdout)
    ours = set(Booking.objects.exclude(reservation_name="").values_list("reservation_name", flat=True))
    return [r for r in found if r.name in ours]  # other tests may hold reservations of their own


@pytest.fixture
def h200(local):
    gpu_type = GpuType.objects.create(cluster=local, gres_type="h200", memory_gb=141, compute_capability="9.0")
    assert bookings.refresh_inventory(local)["h200"] == 2
    gpu_type.refresh_from_db()
    assert gpu_type.inventory == 2 and gpu_type.nodes
    yield gpu_type
    runner = cluster.runner_for(local)
    for name in Booking.objects.exclude(reservation_name="").values_list("reservation_name", flat=True):
        runner.run(cluster.reservation_delete_argv(name), timeout=30)


def post(client, body):
    return client.post("/api/v1/bookings", data=body, content_type="application/json")


def test_a_booking_becomes_a_slurm_reservation_and_cancel_deletes_it(api, local, h200, redis_queue):
    start = weeks_ahead()
    r = post(api, seed(start))
    assert r.status_code == 201, r.content
    booking = r.json()
    assert (booking["state"], booking["gpu_type"]["slurm"], booking["cluster"]) == ("confirmed", "h200", "local")
    run_rq(redis_queue)  # the reservation task, as the RQ worker runs it
    (made,) = reservations(local, booking["reservation"])
    assert (made.start, made.end) == (start, start + timedelta(hours=2))
    assert (made.users, made.core_count, made.nodes) == (["ffportal"], 1, [h200.nodes[0]["name"]])
    again = api.get(booking["url"]).json()
    assert (again["reservation_ready"], again["reason"]) == (True, "")

    assert api.delete(booking["url"]).json()["state"] == "cancelled"
    run_rq(redis_queue)
    assert reservations(local, booking["reservation"]) == []
    assert Booking.objects.get().reservation_made is False


def test_a_booking_that_would_oversell_the_gpus_is_refused(api, local, h200, redis_queue):
    start = weeks_ahead(21)
    assert post(api, seed(start, count=2)).json()["state"] == "confirmed"
    clash = post(api, seed(start + timedelta(hours=1), name="second")).json()
    assert clash["state"] == "refused"
    assert clash["reason"].startswith("All bookable GPUs that meet the requirement are booked from ")
    run_rq(redis_queue)
    assert len(reservations(local)) == 1


@pytest.mark.django_db(transaction=True)
def test_bookings_sent_at_the_same_moment_never_exceed_the_inventory(api, local, h200, redis_queue):
    start, header = weeks_ahead(22), api.defaults["HTTP_AUTHORIZATION"]
    go = threading.Barrier(THREADS)
    answers: list = [None] * THREADS

    def one(i):
        try:
            go.wait(timeout=10)
            answers[i] = post(Client(HTTP_AUTHORIZATION=header), seed(start, name=f"at once {i}")).json()
        except Exception as exc:  # noqa: BLE001 - the test looks at what each got
            answers[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    states = sorted(a["state"] if isinstance(a, dict) else repr(a) for a in answers)
    assert states == ["confirmed", "confirmed", "refused", "refused"], answers
    run_rq(redis_queue)
    assert len(reservations(local)) == 2
