"""The admins' view of the clusters (issue 29): GPUs per cluster, type and state, the Clusters page
in both languages and only with its permission, `ffportal_gpus` in /metrics, and the email to the
admins when a node is drained or goes down, once per change. The cluster answers through the one
fake SSH seam with the real `sinfo --json` captured on 26.05."""
from __future__ import annotations

import json
from datetime import datetime
from datetime import timezone as dt_timezone
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission, User
from django.core import mail
from django.urls import reverse

from cluster import ClusterError
from jobs.clusters import node_states
from jobs.models import ClusterProfile, EmailNotice, NoticeKind
from jobs.models.preferences import LanguagePreference

from .test_metrics import metrics_settings, scrape, value  # noqa: F401 - fixture

SAMPLES = Path(__file__).parent.parent / "cluster" / "samples" / "26.05"
SINFO = (SAMPLES / "sinfo.json").read_text()
DRAINED = (SAMPLES / "sinfo_drained.json").read_text()  # ffp2605-n2 drained by root: "maintenance"
NOW = datetime(2026, 11, 20, 10, 0, tzinfo=dt_timezone.utc)
PAGE = "admin:jobs_clusterprofile_gpus"
ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-Hans"}


def counts(profile) -> dict:
    profile.refresh_from_db()
    return node_states.cluster_gpus(profile).by_type


def test_it_counts_each_types_gpus_by_state_in_one_round_trip(fake_ssh, profile):
    ssh = fake_ssh(on_run=DRAINED)
    node_states.read_nodes(profile, NOW)
    assert len(ssh.commands) == 1 and ssh.commands[0][:2] == ["sinfo", "--json"]
    assert counts(profile) == {
        "a100": {"free": 0, "busy": 0, "booked": 0, "draining": 2, "down": 0, "asleep": 0},
        "h200": {"free": 2, "busy": 0, "booked": 0, "draining": 0, "down": 0, "asleep": 0}}
    assert node_states.cluster_gpus(profile).reasons == {"a100": ["ffp2605-n2: maintenance (root)"]}


def test_a_cluster_that_does_not_answer_keeps_its_last_figures_and_says_since_when(fake_ssh, profile):
    fake_ssh(on_run=SINFO)
    node_states.read_nodes(profile, NOW)
    fake_ssh.unreachable("connection refused")
    with pytest.raises(ClusterError):
        node_states.read_nodes(profile, NOW.replace(hour=11))
    profile.refresh_from_db()
    reading = node_states.cluster_gpus(profile)
    assert reading.failed_since == NOW.replace(hour=11) and reading.read_at == NOW
    assert reading.by_type["h200"]["free"] == 2


# ---- the page ---------------------------------------------------------------------------------

@pytest.fixture
def clerk(db):
    return User.objects.create_user("clerk", "clerk@example.org", "clerk-pass-123", is_staff=True)


def test_the_page_needs_its_permission_not_only_the_staff_flag(client, clerk, profile):
    client.force_login(clerk)
    assert client.get(reverse(PAGE)).status_code == 403
    client.logout()
    assert client.get(reverse(PAGE)).status_code == 302  # the admin's login page


def test_the_page_shows_gpus_by_state_and_the_drained_node_in_plain_words(client, clerk, fake_ssh, profile):
    clerk.user_permissions.add(Permission.objects.get(codename="view_clusterprofile"))
    client.force_login(clerk)
    fake_ssh(on_run=DRAINED)
    body = client.get(reverse(PAGE)).content.decode()  # never read: read on opening
    assert "drained by root: maintenance" in body and "ffp2605-n2: maintenance (root)" in body
    assert "Read again now" not in body  # reading every cluster now needs change_clusterprofile
    zh = client.get(reverse(PAGE), **ZH).content.decode()
    assert "集群：节点与 GPU" in zh and "已被 root 排空：maintenance" in zh and "排空中或已排空" in zh
    listing = client.get(reverse("admin:jobs_clusterprofile_changelist")).content.decode()
    assert reverse(PAGE) in listing


def test_a_silent_cluster_is_shown_as_not_answering(client, staff, fake_ssh, profile):
    ClusterProfile.objects.filter(pk=profile.pk).update(unreachable_since=NOW)
    client.force_login(staff)
    body = client.get(reverse(PAGE)).content.decode()
    assert "Not answering since 2026-11-20" in body


def test_reading_again_needs_change_permission(client, clerk, fake_ssh, profile):
    clerk.user_permissions.add(Permission.objects.get(codename="view_clusterprofile"))
    client.force_login(clerk)
    read_again = reverse("admin:jobs_clusterprofile_gpus_read_again")
    assert client.post(read_again).status_code == 403
    clerk.user_permissions.add(Permission.objects.get(codename="change_clusterprofile"))
    fake_ssh(on_run=SINFO)
    r = client.post(read_again, follow=True)
    assert "The clusters&#x27; nodes were read again." in r.content.decode()
    assert counts(profile)["a100"]["free"] == 2


# ---- /metrics -----------------------------------------------------------------------------------

def test_metrics_count_the_gpus_of_the_stored_reading_without_ssh(client, fake_ssh, profile, metrics_settings):
    fake_ssh(on_run=DRAINED)
    node_states.read_nodes(profile, NOW)
    fake_ssh(on_run=AssertionError("/metrics must never ask the cluster"))
    figures = scrape(client)
    assert value(figures, "ffportal_gpus", cluster="local", type="a100", state="draining") == 2
    assert value(figures, "ffportal_gpus", cluster="local", type="h200", state="free") == 2
    assert ("ffportal_gpus", (("cluster", "local"), ("state", "down"), ("type", "h200"))) in figures
    assert value(figures, "ffportal_scrape_error", collector="cluster_gpus") == 0


# ---- the email ----------------------------------------------------------------------------------

def test_admins_are_emailed_once_when_a_node_is_drained_each_in_their_language(fake_ssh, inline_rq, profile, staff,
                                                                               clerk, settings):
    clerk.user_permissions.add(Permission.objects.get(codename="change_clusterprofile"))
    LanguagePreference.objects.create(user=clerk, language="zh-hans")
    fake_ssh(on_run=SINFO)
    node_states.read_nodes(profile, NOW)  # the first reading: nothing to compare with, nothing sent
    assert mail.outbox == []
    fake_ssh(on_run=DRAINED)
    node_states.read_nodes(profile, NOW.replace(minute=1))
    node_states.read_nodes(profile, NOW.replace(minute=2))  # still drained: no second email
    by_address = {m.to[0]: m for m in mail.outbox}
    assert sorted(by_address) == ["admin@example.org", "clerk@example.org"]
    english, chinese = by_address["admin@example.org"], by_address["clerk@example.org"]
    assert "Node ffp2605-n2 of cluster Local was drained" in english.subject
    assert "drained by root: maintenance" in english.body and "2 × a100" in english.body
    assert "集群 Local 的节点 ffp2605-n2 已被排空" in chinese.subject and "已被 root 排空：maintenance" in chinese.body
    assert EmailNotice.objects.filter(kind=NoticeKind.NODE_DOWN).count() == 2

    fake_ssh(on_run=SINFO)  # resumed, then drained again: a new change, a new email
    node_states.read_nodes(profile, NOW.replace(minute=3))
    fake_ssh(on_run=DRAINED)
    node_states.read_nodes(profile, NOW.replace(minute=4))
    assert len(mail.outbox) == 4


def test_without_anyone_holding_the_permission_settings_admins_are_told(fake_ssh, inline_rq, profile, settings):
    settings.ADMINS = [("Ops", "ops@example.org")]
    fake_ssh(on_run=SINFO)
    node_states.read_nodes(profile, NOW)
    fake_ssh(on_run=DRAINED)
    node_states.read_nodes(profile, NOW.replace(minute=1))
    assert [m.to for m in mail.outbox] == [["ops@example.org"]]
    assert "ffp2605-n2" in mail.outbox[0].subject


def test_the_watchers_sweep_reads_each_reachable_cluster_once_a_minute(fake_ssh, profile, monkeypatch):
    monkeypatch.setattr(node_states, "_last_read", {})
    ssh = fake_ssh(on_run=SINFO)
    assert node_states.read_due(NOW) == ["local"]
    assert node_states.read_due(NOW) == []  # read again only after READ_EVERY
    assert len(ssh.commands) == 1
    stored = ClusterProfile.objects.get(pk=profile.pk).node_states
    assert json.loads(json.dumps(stored))["nodes"][0]["condition"] == "free"


def _reading(n2_states: list[str], reason: str = "") -> str:
    """The real 26.05 reading (tests/cluster/samples/26.05/sinfo_asleep_and_health_drained.json) with
    ffp2605-n2 in `n2_states` and `reason`."""
    data = json.loads((SAMPLES / "sinfo_asleep_and_health_drained.json").read_text())
    for group in data["sinfo"]:
        if group["nodes"]["nodes"] == ["ffp2605-n2"]:
            group["node"]["state"] = n2_states
            group["reason"]["description"] = reason
    return json.dumps(data)


def test_a_node_that_fails_to_wake_is_emailed_to_the_admins_in_plain_words(fake_ssh, inline_rq, profile, staff):
    fake_ssh(on_run=_reading(["IDLE", "POWERING_UP"]))
    node_states.read_nodes(profile, NOW)
    assert mail.outbox == []  # waking is no news
    fake_ssh(on_run=_reading(["DOWN", "POWERED_DOWN"], "ResumeTimeout reached"))
    node_states.read_nodes(profile, NOW.replace(minute=2))
    [email] = mail.outbox
    assert "Node ffp2605-n2 of cluster Local failed to wake up" in email.subject
    assert "failed to wake up: it did not answer within the time Slurm allows (ResumeTimeout)" in email.body


def test_a_node_going_to_sleep_or_waking_up_sends_nothing(fake_ssh, inline_rq, profile, staff):
    for states in (["IDLE"], ["IDLE", "POWERING_DOWN"], ["IDLE", "POWERED_DOWN"], ["IDLE", "POWERING_UP"], ["IDLE"]):
        fake_ssh(on_run=_reading(states))
        node_states.read_nodes(profile, NOW)
    assert mail.outbox == []


def test_the_health_checks_drain_is_said_in_each_readers_words(client, staff, fake_ssh, profile):
    fake_ssh(on_run=(SAMPLES / "sinfo_asleep_and_health_drained.json").read_text())
    client.force_login(staff)
    body = client.get(reverse(PAGE)).content.decode()
    assert "taken out of service by the GPU health check: GPU 1 is too hot (97 °C)" in body
    assert "ffp2605-n2: GPU 1 is too hot (97 °C)" in body  # why its GPUs are draining
    zh = client.get(reverse(PAGE), **ZH).content.decode()
    assert "已被 GPU 健康检查停用：GPU 1 温度过高（97 °C）" in zh and "休眠" in zh
