"""Bookings in the admin: GPU types counted on the cluster (and checked against it), the booking
rules as one row, Approve / Refuse with a reason, all audited."""
import pytest

from jobs import bookings
from jobs.bookings import parse_request
from jobs.models import AuditEntry, Booking, BookingPolicy, BookingState, GpuType

from .api_helpers import session_client
from .booking_helpers import NOW, clock, down, events, h200, policy, scontrol, seed_json  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db


def gpu_type_form(profile, gres):
    return {"cluster": profile.pk, "gres_type": gres, "label": "", "memory_gb": 141, "compute_capability": "9.0",
            "is_active": "on"}


def test_a_gpu_type_is_checked_and_counted_on_the_cluster(staff, profile, scontrol):
    admin = session_client(staff)
    r = admin.post("/admin/jobs/gputype/add/", gpu_type_form(profile, "a100"))
    assert r.status_code == 200
    assert "The cluster Local has no a100 GPUs; its GPU types: h200." in r.content.decode()
    r = admin.post("/admin/jobs/gputype/add/", gpu_type_form(profile, "h200"), follow=True)
    assert "Local: GPUs counted (h200: 2)." in r.content.decode()
    h200 = GpuType.objects.get()
    assert (h200.inventory, h200.nodes) == (2, [{"name": "vm", "gpus": 2, "cpus": 2, "cores_per_gpu": 1}])
    assert AuditEntry.objects.filter(action="gpu_type.add").count() == 1


def test_the_count_action_says_when_the_cluster_does_not_answer(staff, h200, scontrol):
    scontrol.on_run = down
    r = session_client(staff).post("/admin/jobs/gputype/", {"action": "count_gpus", "_selected_action": [h200.pk]},
                                   follow=True)
    assert "Local: GPUs not counted: Cluster unreachable" in r.content.decode()


def test_the_booking_rules_are_one_row(staff, policy):
    admin = session_client(staff)
    assert admin.get("/admin/jobs/bookingpolicy/add/").status_code == 403
    assert BookingPolicy.objects.count() == 1


def test_approve_and_refuse_with_a_reason(staff, owner, h200, policy, events, monkeypatch):
    monkeypatch.setattr("jobs.background.enqueue.enqueue_reservation", lambda booking: None)
    policy.approval = "manual"
    policy.save()
    first, second = (bookings.book(owner, parse_request(seed_json(task_name=n), now=NOW), now=NOW)
                     for n in ("first", "second"))
    admin = session_client(staff)
    admin.post("/admin/jobs/booking/", {"action": "approve_bookings", "_selected_action": [first.pk]})
    r = admin.post("/admin/jobs/booking/", {"action": "refuse_bookings", "_selected_action": [second.pk]})
    assert "Reason, for the owner" in r.content.decode()  # the intermediate form
    admin.post("/admin/jobs/booking/", {"action": "refuse_bookings", "_selected_action": [second.pk],
                                        "confirm": "yes", "reason": "The farm is closed for maintenance."})
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.state, first.decided_by) == (BookingState.CONFIRMED, staff)
    assert (second.state, second.reason) == (BookingState.REFUSED, "The farm is closed for maintenance.")
    assert ("second", "refused") in events and ("first", "confirmed") in events
    assert set(AuditEntry.objects.filter(actor=staff, action__startswith="booking.").values_list("action", flat=True)) == {
        "booking.confirm", "booking.refuse"}
    assert session_client(staff).get(f"/admin/jobs/booking/{first.pk}/change/").status_code == 200
    assert Booking.objects.count() == 2


def test_the_booking_rules_refuse_a_horizon_or_length_past_a_year(staff, owner, h200, policy):
    """Millions of days ahead took every booking's dates past year 9999: each request then failed
    with a server error. The admin hears the bound, in both languages; the rules stay as they were."""
    admin = session_client(staff)
    url = f"/admin/jobs/bookingpolicy/{policy.pk}/change/"
    form = {"unit_minutes": 30, "min_minutes": 30, "max_hours": 24, "max_days_ahead": 3_000_000, "free_percent": 0,
            "approval": "automatic"}
    r = admin.post(url, form)
    assert r.status_code == 200 and "At most 366 days ahead." in r.content.decode()
    r = admin.post(url, {**form, "max_days_ahead": 30, "max_hours": 10_000_000}, HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert r.status_code == 200 and "最多 8784 小时。" in r.content.decode()
    policy.refresh_from_db()
    assert (policy.max_days_ahead, policy.max_hours) == (30, 24)
    assert admin.post(url, {**form, "max_days_ahead": 366, "max_hours": 8784}).status_code == 302
    booking = bookings.book(owner, parse_request(seed_json(start="2027-11-30T09:00:00Z"), now=NOW), now=NOW)
    assert booking.state == BookingState.CONFIRMED
