"""A booking wakes its asleep nodes before it starts (power saving, jobs.bookings.wake): the beat asks
once, the cluster's wake-up time plus a minute ahead; the RQ task reads the reservation and the
nodes, and submits the warm-up job on the asleep ones only. The admin's Clusters page lists what
wakes next. Through the one fake SSH seam, answered as Slurm answers."""
import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from jobs import bookings
from jobs.bookings import parse_request, tick, wake
from jobs.bookings.reservations import make_reservation
from jobs.clusters import node_states
from jobs.models import Booking

from .booking_helpers import (  # noqa: F401 - fixtures
    NOW,
    SAMPLES,
    clock,
    h200,
    policy,
    scontrol,
    scontrol_answers,
    seed_json,
)

pytestmark = pytest.mark.django_db
START = NOW.replace(hour=12)


def sinfo(*flags: str) -> str:
    data = json.loads((SAMPLES / "sinfo_gpus_vm.json").read_text())
    data["nodes"][0].update(state="idle", state_flags=list(flags), gres_used="gpu:h200:0(IDX:N/A)")
    return json.dumps(data)


def cluster_answers(*flags: str):
    """scontrol and sinfo as Slurm answers them, the node "vm" with `flags`, the reservation on it."""
    plain = scontrol_answers()

    def answer(argv):
        if "sinfo" in argv:
            return sinfo(*flags)
        if "show" in argv and "reservation" in argv:
            return (f"ReservationName={argv[-2]} StartTime=2026-12-01T12:00:00 EndTime=2026-12-01T14:00:00 "
                    "Duration=02:00:00 Nodes=vm NodeCnt=1 CoreCnt=1 Features=(null) PartitionName=gpu "
                    "Flags=SPEC_NODES TRES=cpu=1 Users=ffportal Groups=(null) Accounts=(null) Licenses=(null) "
                    "State=INACTIVE BurstBuffer=(null) Watts=n/a\n")
        if argv[0] == "sbatch":
            return "4242\n"
        return plain(argv)
    return answer


@pytest.fixture
def booking(owner, h200, policy, scontrol):
    h200.cluster.node_boot_seconds = 120
    h200.cluster.save(update_fields=["node_boot_seconds"])
    made = bookings.book(owner, parse_request(seed_json(start="2026-12-01T12:00:00Z"), now=NOW), now=NOW)
    make_reservation(str(made.id))
    return made


def beat_at(monkeypatch, when):
    monkeypatch.setattr(timezone, "now", lambda: when)
    tick(when)


def sbatches(ssh) -> list[list[str]]:
    return [c for c in ssh.commands if c[0] == "sbatch"]


def test_a_booking_wakes_its_asleep_nodes_once_its_wake_up_time_and_a_minute_before_it_starts(
        booking, scontrol, monkeypatch):
    scontrol.on_run = cluster_answers("POWERED_DOWN")
    beat_at(monkeypatch, START - timedelta(minutes=10))
    assert not sbatches(scontrol)  # not yet: 120 s to wake + 60 s
    beat_at(monkeypatch, START - timedelta(seconds=170))
    [argv] = sbatches(scontrol)
    assert "--nodelist=vm" in argv and "--time=2" in argv and "--partition=gpu" in argv
    assert str(int(START.timestamp()) - 10) in argv[-1]  # the warm-up job is gone 10 s before the start
    beat_at(monkeypatch, START - timedelta(seconds=100))
    assert len(sbatches(scontrol)) == 1  # asked once
    booking.refresh_from_db()
    assert booking.wake_asked_at == START - timedelta(seconds=170)


def test_nodes_that_are_awake_need_no_warm_up_job(booking, scontrol, monkeypatch):
    scontrol.on_run = cluster_answers()
    beat_at(monkeypatch, START - timedelta(seconds=100))
    assert not sbatches(scontrol)
    assert Booking.objects.get(pk=booking.pk).wake_asked_at is not None  # looked at: not asked again


def test_too_close_to_the_start_for_a_job_to_fit_it_leaves_the_waking_to_slurm(booking, scontrol, monkeypatch):
    scontrol.on_run = cluster_answers("POWERED_DOWN")
    assert wake.wake_nodes(str(booking.id), now=START - timedelta(seconds=40)) == []
    assert not sbatches(scontrol)


def test_the_clusters_page_says_what_wakes_next(booking, scontrol, monkeypatch, client):
    scontrol.on_run = cluster_answers("POWERED_DOWN")
    monkeypatch.setattr(timezone, "now", lambda: START - timedelta(hours=1))
    profile = booking.cluster
    node_states.read_nodes(profile)
    admin = User.objects.create_superuser("wake-admin", "w@example.org", "pass-1234-wake")
    client.force_login(admin)
    body = client.get(reverse("admin:jobs_clusterprofile_gpus")).content.decode()
    assert "What wakes next" in body and "its asleep nodes are woken at" in body
    assert booking.task_name in body


def test_a_node_seen_waking_keeps_the_time_it_was_first_seen(h200, fake_ssh, monkeypatch):
    profile = h200.cluster
    fake_ssh(on_run=sinfo("POWERING_UP"))
    node_states.read_nodes(profile, NOW)
    node_states.read_nodes(profile, NOW + timedelta(seconds=30))
    profile.refresh_from_db()
    [node] = profile.node_states["nodes"]
    assert (node["condition"], node["waking_since"]) == ("waking", NOW.isoformat())
    [item] = wake.upcoming(profile, profile.node_states["nodes"], NOW + timedelta(seconds=30))
    assert item == {"node": "vm", "when": NOW + timedelta(seconds=profile.node_boot_seconds)}
