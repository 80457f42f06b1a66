"""`/api/v1/bookings`: the seed's JSON in, the booking out; owner-only like jobs; cancel by DELETE."""
import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from jobs.models import Booking, BookingState

from .api_helpers import session_client, token_client
from .booking_helpers import h200, policy, seed_json  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db

KEYS = {"id", "state", "task_name", "image_resolution", "gpu_requirement", "gpu_type", "cluster", "start", "end",
        "duration_hours", "priority", "reservation", "reservation_ready", "reason", "callback_url", "url"}


def post(client, data):
    return client.post("/api/v1/bookings", data=json.dumps(data), content_type="application/json")


def test_it_books_the_seeds_json_and_answers_the_booking(owner, h200, policy):
    client, _ = token_client(owner)
    r = post(client, seed_json(start=(timezone.now() + timedelta(days=40)).isoformat()))
    assert r.status_code == 400 and r.json()["field"] == "start"  # too far ahead: 30 days
    r = post(client, seed_json())
    assert r.status_code == 201, r.content
    body = r.json()
    assert set(body) == KEYS
    assert (body["state"], body["gpu_type"], body["cluster"], body["duration_hours"]) == (
        "confirmed", {"slurm": "h200", "label": "h200"}, "local", 2)
    assert body["gpu_requirement"] == {"min_memory_gb": 24, "compute_capability": "8.0", "count": 1}
    assert body["reservation"] == f"ffp-{body['id'].replace('-', '')[:12]}"
    assert body["reason"] == "Confirmed; the reservation is being made on the cluster."
    assert body["start"].endswith("+00:00") and r["Location"] == body["url"]
    assert client.get(body["url"]).json() == body


def test_every_problem_is_answered_at_once(owner, h200, policy):
    client, _ = token_client(owner)
    r = post(client, seed_json(duration_hours=100, gpu_requirement={"count": "two"}))
    assert r.status_code == 400
    assert {e["field"] for e in r.json()["errors"]} == {"duration_hours", "gpu_requirement.count"}
    r = client.post("/api/v1/bookings", data="{broken", content_type="application/json")
    assert r.status_code == 400 and "JSON" in r.json()["error"]


def test_others_bookings_are_404_and_the_list_is_ones_own(owner, stranger, staff, h200, policy):
    mine = post(token_client(owner)[0], seed_json()).json()
    theirs, _ = token_client(stranger)
    assert theirs.get(mine["url"]).status_code == 404
    assert theirs.delete(mine["url"]).status_code == 404
    assert theirs.get("/api/v1/bookings").json()["count"] == 0
    assert token_client(staff)[0].get("/api/v1/bookings?state=confirmed").json()["count"] == 0  # superuser too
    assert token_client(staff)[0].delete(mine["url"]).status_code == 404
    assert token_client(owner)[0].get("/api/v1/bookings?state=nonsense").status_code == 400
    assert Booking.objects.get().state == BookingState.CONFIRMED


def test_delete_cancels_once(owner, h200, policy):
    client, _ = token_client(owner)
    url = post(client, seed_json()).json()["url"]
    r = client.delete(url)
    assert r.status_code == 200 and r.json()["state"] == "cancelled"
    r = client.delete(url)
    assert r.status_code == 409 and r.json()["error"] == "This booking is already cancelled; there is nothing to cancel."


def test_a_session_must_pass_the_csrf_check_and_anonymous_callers_are_refused(owner, h200, policy):
    assert post(Client(), seed_json()).status_code == 401
    assert post(session_client(owner, enforce_csrf_checks=True), seed_json()).status_code == 403
    assert not Booking.objects.exists()


def test_the_callback_is_called_when_the_booking_is_confirmed(owner, h200, policy):
    from jobs.models import WebhookDelivery

    r = post(token_client(owner)[0], seed_json(callback_url="https://93.184.216.34/hook"))
    assert r.status_code == 201
    (delivery,) = WebhookDelivery.objects.all()
    assert (delivery.event, delivery.url) == ("booking.confirmed", "https://93.184.216.34/hook")


@pytest.mark.parametrize("start, far", [("9999-12-31T23:59:59Z", True), ("9999-12-31T23:59:59-05:00", True),
                                        ("0001-01-01T00:00:00+05:00", False), ("0001-01-01T00:00:00Z", False)])
def test_a_start_at_the_ends_of_the_calendar_is_a_plain_400_in_both_languages(owner, h200, policy, start, far):
    """Not a 500 page: the start is refused like any other, before its time is rounded to the unit
    (which went past year 9999, or before year 1, and raised)."""
    client, key = token_client(owner)
    r = post(client, seed_json(start=start))
    assert r.status_code == 400 and r["Content-Type"] == "application/json"
    assert r.json()["field"] == "start"
    assert r.json()["error"] == ("Bookings can be made at most 30 days ahead." if far
                                 else f'The start {start} has passed; choose a later time or "asap".')
    zh = post(Client(HTTP_AUTHORIZATION=f"Token {key}", HTTP_ACCEPT_LANGUAGE="zh-hans"), seed_json(start=start))
    assert zh.status_code == 400 and zh.json()["field"] == "start"
    assert zh.json()["error"] == ("最多只能提前 30 天预约。" if far
                                  else f'开始时间 {start} 已经过去；请选择更晚的时间，或使用 "asap"。')
    assert not Booking.objects.exists()


def test_the_list_pages_by_cursor_like_the_jobs(owner, h200, policy):
    client, _ = token_client(owner)
    made = [post(client, seed_json(start=(timezone.now() + timedelta(days=day)).isoformat())).json()["id"]
            for day in (1, 2, 3)]
    ids, url = [], "/api/v1/bookings?limit=1"
    while url:
        body = client.get(url).json()
        ids += [b["id"] for b in body["results"]]
        url = body["next"]
        assert url is None or "after=" in url
    assert ids == made[::-1]  # newest first, each once
