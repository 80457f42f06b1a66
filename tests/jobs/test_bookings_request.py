"""The booking request: the seed's JSON as written, every problem at once, in plain words."""
from datetime import datetime
from datetime import timezone as dt_timezone

import pytest

from jobs.bookings import BookingError, parse_request
from jobs.models import StartChoice

from .booking_helpers import NOW, policy, seed_json  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db


def test_it_reads_the_seeds_json_as_written(policy):
    req = parse_request(seed_json(), now=NOW)
    assert (req.task_name, req.image_resolution, req.min_memory_gb, req.compute_capability, req.gpu_count) == (
        "film_scene_swap_episode5", "1920x1080", 24, "8.0", 1)
    assert (req.duration_minutes, req.priority, req.start_choice) == (120, 10, StartChoice.ASAP)
    assert req.callback_url == "https://myserver.com/hook/facefusion-done"


def test_it_names_every_problem_at_once(policy):
    with pytest.raises(BookingError) as caught:
        parse_request({"task_name": " ", "gpu_requirement": {"min_memory_gb": -1, "compute_capability": "eight",
                                                             "count": 0},
                       "duration_hours": 30, "priority": -1, "callback_url": "ftp://x", "start": "tomorrow"},
                      now=NOW)
    problems = caught.value.problems
    assert set(problems) == {"task_name", "gpu_requirement.min_memory_gb", "gpu_requirement.compute_capability",
                             "gpu_requirement.count", "duration_hours", "priority", "callback_url", "start"}
    assert problems["duration_hours"] == ("duration_hours must be between 0.5 and 24 hours: the site books in "
                                          "30-minute units.")


def test_a_length_is_rounded_up_to_the_sites_unit(policy):
    assert parse_request(seed_json(duration_hours=0.6), now=NOW).duration_minutes == 60
    policy.unit_minutes = 60
    policy.save()
    assert parse_request(seed_json(duration_hours=1.25), now=NOW).duration_minutes == 120


def test_a_start_without_offset_is_utc_and_one_with_an_offset_is_kept(policy):
    naive = parse_request(seed_json(start="2026-12-02T10:00:00"), now=NOW)
    assert naive.start_choice == StartChoice.AT
    assert naive.requested_start == datetime(2026, 12, 2, 10, 0, tzinfo=dt_timezone.utc)
    paris = parse_request(seed_json(start="2026-12-02T10:00:00+01:00"), now=NOW)
    assert paris.requested_start == datetime(2026, 12, 2, 9, 0, tzinfo=dt_timezone.utc)
    assert parse_request(seed_json(start="off-peak"), now=NOW).start_choice == StartChoice.OFF_PEAK


def test_a_start_in_the_past_or_too_far_ahead_is_refused(policy):
    with pytest.raises(BookingError) as past:
        parse_request(seed_json(start="2026-11-30T10:00:00Z"), now=NOW)
    assert "has passed" in past.value.problems["start"]
    with pytest.raises(BookingError) as far:
        parse_request(seed_json(start="2027-03-01T10:00:00Z"), now=NOW)
    assert far.value.problems["start"] == "Bookings can be made at most 30 days ahead."


def test_a_body_that_is_not_an_object_is_refused(policy):
    with pytest.raises(BookingError) as caught:
        parse_request(["not", "an", "object"], now=NOW)
    assert caught.value.problems == {"__all__": "Send the booking as a JSON object."}


def test_a_callback_to_a_private_address_is_refused(policy):
    with pytest.raises(BookingError) as caught:
        parse_request(seed_json(callback_url="http://127.0.0.1:9000/hook"), now=NOW)
    assert "private, loopback or link-local address" in caught.value.problems["callback_url"]
