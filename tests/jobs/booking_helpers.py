"""Helpers shared by the bookings' tests (tests/jobs/test_bookings_*.py): GPU types with a known
inventory, the seed's JSON, scontrol's answers to the fake SSH runner, and the events a booking sent."""
from __future__ import annotations

from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from pathlib import Path

import pytest

from cluster import ClusterUnreachable
from jobs.models import BookingPolicy, ClusterProfile, GpuType

SAMPLES = Path(__file__).parents[1] / "cluster" / "samples" / "22.05"
#: a fixed "now", on a unit boundary, so starts are predictable
NOW = datetime(2026, 12, 1, 9, 0, tzinfo=dt_timezone.utc)


def seed_json(**changes) -> dict:
    """The seed's booking JSON as written (seeds/001), with changes."""
    data = {"task_name": "film_scene_swap_episode5", "image_resolution": "1920x1080",
            "gpu_requirement": {"min_memory_gb": 24, "compute_capability": "8.0", "count": 1},
            "duration_hours": 2, "priority": 10, "callback_url": "https://myserver.com/hook/facefusion-done"}
    data.update(changes)
    return data


def gpu_type(profile, gres="h200", memory=141, cc="9.0", gpus=2, cpus=2, node="node1") -> GpuType:
    return GpuType.objects.create(cluster=profile, gres_type=gres, memory_gb=memory, compute_capability=cc,
                                  inventory=gpus, nodes=[{"name": node, "gpus": gpus, "cpus": cpus}])


def at(hours: float = 0) -> datetime:
    return NOW + timedelta(hours=hours)


@pytest.fixture
def policy(db):
    return BookingPolicy.current()


@pytest.fixture
def h200(profile):
    return gpu_type(profile)


@pytest.fixture
def second_profile(db):
    return ClusterProfile.objects.create(
        name="Second", slug="second", host="127.0.0.1", port=2223, username="ffportal",
        private_key="not-a-real-key", known_hosts="[127.0.0.1]:2223 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFake",
        work_root="/srv/ffportal/work", target_roots=["/srv/ffportal/storage"], worker_python="/usr/bin/python3")


@pytest.fixture
def events(monkeypatch):
    """(booking task_name, event) of every notice sent, in order (the seam to jobs.webhooks)."""
    sent: list[tuple[str, str]] = []
    monkeypatch.setattr("jobs.bookings.lifecycle.notify", lambda booking, event: sent.append((booking.task_name, event)))
    return sent


def scontrol_answers(refuse: str = ""):
    """How the cluster answers scontrol and sinfo, like Slurm 22.05 does (real captures in
    tests/cluster/samples): a responder for tests/fake_ssh.py. `refuse` (scontrol's error text)
    makes create fail."""
    def answer(argv):
        if "create" in argv and refuse:
            return 1, "", refuse
        if "sinfo" in argv:
            return (SAMPLES / "sinfo_gpus_vm.json").read_text()
        if "create" in argv:
            return "Reservation created: x\n"
        return ""
    return answer


def down(argv):
    """A responder for an outage: the cluster does not answer."""
    raise ClusterUnreachable("cannot reach 127.0.0.1:2222: connection refused")


@pytest.fixture
def clock(monkeypatch):
    """Django's clock stopped at NOW, the moment the tests' bookings are made at: the RQ tasks
    (making a reservation, the beat's retries) read the clock themselves, and a booking made for
    09:00-11:00 on 2026-12-01 must not be "over" because the tests run later that day (seen: four
    tests failed after 11:00) or on another day."""
    from django.utils import timezone

    monkeypatch.setattr(timezone, "now", lambda: NOW)
    return NOW


@pytest.fixture
def scontrol(fake_ssh, inline_rq, clock):
    """The SSH seam answered by `scontrol_answers()`; a test sets the runner's `on_run` to refuse
    (`scontrol_answers(refuse=...)`) or to `down`."""
    return fake_ssh(on_run=scontrol_answers())
