"""The booking state machine (jobs/bookings/lifecycle.py): one table of moves, each made by one
conditional update (jobs/transitions.py), audited and told only by the call that made it."""
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.bookings import lifecycle
from jobs.bookings.lifecycle import TRANSITIONS, move
from jobs.models import AuditEntry, Booking, BookingState
from jobs.models.booking import FINAL_BOOKING_STATES


def test_every_state_has_its_row_in_the_table():
    """Every state is in the table; every state not final has a way out, and a final one none."""
    sources = {s for tr in TRANSITIONS.values() for s in tr.sources}
    targets = {t for tr in TRANSITIONS.values() for t in tr.targets}
    assert set(BookingState.values) == sources | targets
    assert sources == set(BookingState.values) - set(FINAL_BOOKING_STATES)
    assert set(FINAL_BOOKING_STATES) <= targets


def booking(user, state) -> Booking:
    start = timezone.now() + timedelta(hours=1)
    return Booking.objects.create(user=user, task_name="night run", gpu_count=1, duration_minutes=60,
                                  starts_at=start, ends_at=start + timedelta(hours=1), state=state)


@pytest.fixture
def events(monkeypatch):
    sent = []
    monkeypatch.setattr(lifecycle, "notify", lambda b, event: sent.append(event))
    return sent


@pytest.mark.django_db
def test_a_move_is_made_once_audited_and_told(owner, events):
    b = booking(owner, BookingState.CONFIRMED)
    stale = Booking.objects.get(pk=b.pk)  # a second process holding the same row
    assert move(b, "start", event="started")
    assert not move(stale, "start", event="started")
    assert Booking.objects.get(pk=b.pk).state == b.state == BookingState.ACTIVE
    assert events == ["started"]
    assert list(AuditEntry.objects.values_list("action", flat=True)) == ["booking.start"]


@pytest.mark.django_db
def test_an_illegal_move_is_refused(owner, events):
    ended = booking(owner, BookingState.ENDED)
    assert not move(ended, "start", event="started")  # not from a state the table allows: nothing written
    assert not move(ended, "cancel", event="cancelled")
    assert Booking.objects.get(pk=ended.pk).state == BookingState.ENDED
    with pytest.raises(ValueError):
        move(booking(owner, BookingState.REQUESTED), "confirm", BookingState.ACTIVE, event=None)
    with pytest.raises(ValueError):  # the move has two ends: which one must be said
        move(booking(owner, BookingState.WAITING), "place", event=None)
    with pytest.raises(KeyError):
        move(booking(owner, BookingState.ACTIVE), "fly", event=None)
    assert events == [] and not AuditEntry.objects.exists()
