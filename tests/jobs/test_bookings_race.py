"""THE RACE: many bookings of one GPU type at the same moment, on real database connections, never
book more GPUs than the cluster has.

Each thread books one GPU of the same window. Each waits on a barrier right after it has counted
what is held, so that WITHOUT serialisation they would all count "nothing held yet" and all be
confirmed. With it (book() locks the GpuType rows before counting; on SQLite the IMMEDIATE
transaction holds the write lock from BEGIN), a booking waits for the one before it to commit and
then counts it: exactly `inventory` confirmed, the rest refused.
"""
import threading

import pytest
from django.db import connection

from jobs import bookings
from jobs.bookings import capacity, parse_request
from jobs.models import Booking, BookingState

from .booking_helpers import NOW, gpu_type, seed_json

THREADS = 5
#: how long a booking that counted waits for others that (rightly) cannot count yet
RACE_WINDOW_S = 1.0


@pytest.mark.django_db(transaction=True)
def test_simultaneous_bookings_never_exceed_the_inventory(monkeypatch, owner, colleague, stranger, profile):
    h200 = gpu_type(profile, gpus=2)
    original = capacity._holding
    counted = threading.Barrier(THREADS)

    def count_then_wait(*args, **kwargs):
        rows = original(*args, **kwargs)
        try:
            counted.wait(timeout=RACE_WINDOW_S)
        except threading.BrokenBarrierError:
            pass  # the others are (rightly) waiting for our lock
        return rows

    monkeypatch.setattr(capacity, "_holding", count_then_wait)
    users = [owner, colleague, stranger, owner, colleague]
    go = threading.Barrier(THREADS)
    results: list = [None] * THREADS

    def one(i, user):
        try:
            go.wait(timeout=10)
            req = parse_request(seed_json(start="2026-12-01T12:00:00Z"), now=NOW)
            results[i] = bookings.book(user, req, now=NOW)
        except Exception as exc:  # noqa: BLE001 - the test looks at what each got
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=one, args=(i, u)) for i, u in enumerate(users)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    states = sorted(r.state for r in results if isinstance(r, Booking))
    assert states == ["confirmed", "confirmed", "refused", "refused", "refused"], results
    assert Booking.objects.filter(state=BookingState.CONFIRMED, gpu_type=h200).count() == 2
