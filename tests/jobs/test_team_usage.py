"""Usage by team from Slurm's own accounting (jobs/usage/team_usage.py): the refresh through the one
fake SSH runner (the sacct parsing itself is tests/cluster/test_account_usage.py), what the admin
report, the team's usage table and /metrics show of it. Every test runs at a fixed moment: 23:00 on
the last day of a month in Asia/Shanghai, where UTC is still 15:00 of that day."""
from __future__ import annotations

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.management import CommandError, call_command
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone, translation
from prometheus_client.parser import text_string_to_metric_families

from cluster.slurm.account_usage import account_usage_argv
from jobs.models import ClusterProfile, Team, TeamUsage
from jobs.usage import team_usage
from tests.fake_ssh import FakeSSH

SHANGHAI = ZoneInfo("Asia/Shanghai")
NOW = datetime(2026, 11, 30, 23, 0, tzinfo=SHANGHAI)
NOVEMBER, OCTOBER = date(2026, 11, 1), date(2026, 10, 1)
NOVEMBER_STARTS = datetime(2026, 11, 1, tzinfo=SHANGHAI)
OCTOBER_STARTS = datetime(2026, 10, 1, tzinfo=SHANGHAI)
REPORT = "admin:jobs_usagerecord_report"
READ_AGAIN = "admin:jobs_usagerecord_read_again"


@pytest.fixture(autouse=True)
def at_a_month_end(settings, monkeypatch):
    settings.TIME_ZONE = "Asia/Shanghai"
    monkeypatch.setattr(timezone, "now", lambda: NOW)
    monkeypatch.setattr(team_usage, "_last_try", {})


@pytest.fixture
def vfx(team, owner, colleague):
    return Team.objects.create(group=team, slurm_account="vfx")


@pytest.fixture
def post(db):
    return Team.objects.create(group=Group.objects.create(name="Post"), slurm_account="post")


def slurm_says(november: str, october: str = ""):
    """A cluster whose sacct answers each month's window with the given lines."""
    def answer(argv):
        return november if "--starttime=2026-10-31T16:00:00" in argv else october
    return FakeSSH(on_run=answer)


def figures(profile=None) -> dict[tuple, float]:
    rows = TeamUsage.objects.all() if profile is None else TeamUsage.objects.filter(cluster=profile)
    return {(r.team.slurm_account, r.month): round(r.gpu_hours, 3) for r in rows}


def test_it_reads_this_and_last_month_of_every_team_in_one_round_trip(fake_ssh, profile, vfx, post):
    runner = fake_ssh(slurm_says(november="vfx|3600|cpu=2,gres/gpu=2,node=1\npost|1800|cpu=1,gres/gpu=1\n"
                                          "post|7200|cpu=1,mem=2G,node=1\n",
                                 october="vfx|7200|cpu=1,gres/gpu=1\n"))
    assert team_usage.refresh_due() == ["local"]
    assert runner.batches == [[account_usage_argv(["post", "vfx"], OCTOBER_STARTS, NOVEMBER_STARTS),
                               account_usage_argv(["post", "vfx"], NOVEMBER_STARTS, NOW)]]
    assert runner.batches[0][1][-6:-3] == ["--accounts=post,vfx", "--starttime=2026-10-31T16:00:00",
                                          "--endtime=2026-11-30T15:00:00"]  # the site's month, in UTC, up to now
    # read, and none used: a zero, because the cluster said so
    assert figures() == {("vfx", NOVEMBER): 2.0, ("post", NOVEMBER): 0.5, ("vfx", OCTOBER): 2.0, ("post", OCTOBER): 0}
    assert set(TeamUsage.objects.values_list("read_at", flat=True)) == {NOW}


def test_an_hour_later_the_new_month_has_begun_in_the_sites_time_zone(fake_ssh, monkeypatch, profile, vfx):
    later = NOW + timedelta(hours=1, minutes=30)  # 00:30 on 1 December in Shanghai, still 30 November in UTC
    monkeypatch.setattr(timezone, "now", lambda: later)
    runner = fake_ssh(on_run="vfx|60|gres/gpu=1\n")
    team_usage.refresh_profile(profile)
    december_starts = datetime(2026, 12, 1, tzinfo=SHANGHAI)
    assert runner.batches == [[account_usage_argv(["vfx"], NOVEMBER_STARTS, december_starts),
                               account_usage_argv(["vfx"], december_starts, later)]]
    assert set(TeamUsage.objects.values_list("month", flat=True)) == {NOVEMBER, date(2026, 12, 1)}


def test_a_cluster_that_does_not_answer_keeps_its_last_figures(fake_ssh, monkeypatch, profile, vfx):
    earlier = NOW - timedelta(hours=3)
    monkeypatch.setattr(timezone, "now", lambda: earlier)
    fake_ssh(slurm_says(november="vfx|3600|gres/gpu=1\n"))
    team_usage.refresh_profile(profile)
    monkeypatch.setattr(timezone, "now", lambda: NOW)

    fake_ssh.unreachable("connection refused")
    assert team_usage.refresh_all() == {"local": "connection refused"}
    fake_ssh(on_run=(1, "", "sacct: error: Problem talking to the database: Connection refused"))
    assert "Problem talking to the database" in team_usage.refresh_all()["local"]
    fake_ssh(on_run="vfx|soon|gres/gpu=1\n")  # an answer it cannot read is no answer
    assert team_usage.refresh_all()["local"]

    assert figures() == {("vfx", NOVEMBER): 1.0, ("vfx", OCTOBER): 0}
    assert set(TeamUsage.objects.values_list("read_at", flat=True)) == {earlier}
    shown = team_usage.team_usage_rows(vfx)
    assert (shown["months"][0]["gpu_hours"], shown["read_at"]) == (1.0, earlier)


def test_the_watchers_sweep_reads_again_after_ten_minutes_and_skips_unreachable_clusters(
        fake_ssh, monkeypatch, profile, vfx):
    runner = fake_ssh(slurm_says(november="vfx|3600|gres/gpu=1\n"))
    assert team_usage.refresh_due() == ["local"]
    assert team_usage.refresh_due() == []
    monkeypatch.setattr(team_usage, "_last_try", {})
    monkeypatch.setattr(timezone, "now", lambda: NOW + timedelta(minutes=11))
    runner.on_run = slurm_says(november="vfx|7200|gres/gpu=1\n").on_run
    assert team_usage.refresh_due() == ["local"]
    assert figures()[("vfx", NOVEMBER)] == 2.0

    monkeypatch.setattr(team_usage, "_last_try", {})
    monkeypatch.setattr(timezone, "now", lambda: NOW + timedelta(minutes=30))
    ClusterProfile.objects.filter(pk=profile.pk).update(unreachable_since=NOW)
    assert team_usage.refresh_due() == [] and len(runner.batches) == 2


def test_without_teams_no_cluster_is_asked(fake_ssh, profile):
    runner = fake_ssh()
    assert team_usage.refresh_due() == [] and team_usage.refresh_profile(profile) == 0
    assert runner.batches == []


def test_the_command_reads_every_cluster_and_fails_when_one_does_not_answer(fake_ssh, profile, vfx, capsys):
    fake_ssh(slurm_says(november="vfx|1800|gres/gpu=2\n"))
    call_command("read_team_usage")
    assert "local: read" in capsys.readouterr().out and figures()[("vfx", NOVEMBER)] == 1.0
    fake_ssh.unreachable()
    with pytest.raises(CommandError, match="not read from local"):
        call_command("read_team_usage")


# ---- the admin usage report --------------------------------------------------------------------

def stored(team: Team, profile: ClusterProfile, month: date, hours: float, read_at: datetime = NOW) -> TeamUsage:
    return TeamUsage.objects.create(team=team, cluster=profile, month=month, gpu_seconds=hours * 3600, read_at=read_at)


@pytest.fixture
def second_cluster(db):
    return ClusterProfile.objects.create(name="Second", name_zh="第二集群", slug="second", host="127.0.0.1", port=2223,
                                         username="ffportal", private_key="x", known_hosts="x", work_root="/w",
                                         target_roots=["/srv"], worker_python="python3")


@pytest.mark.parametrize("language, words", [
    ("en", ["By team (Slurm accounting)", "All clusters", "read 3\xa0hours ago", "Read again from the clusters"]),
    ("zh-hans", ["按团队（集群记账）", "所有集群", "3\xa0小时前读取", "重新从集群读取"]),
])
def test_the_report_shows_each_teams_hours_per_cluster_and_month_and_when_read(
        client, staff, profile, second_cluster, vfx, post, language, words):
    stored(vfx, profile, NOVEMBER, 2.5, read_at=NOW - timedelta(hours=3))
    stored(vfx, profile, OCTOBER, 1, read_at=NOW - timedelta(hours=3))
    stored(vfx, second_cluster, NOVEMBER, 0.25)
    stored(post, profile, NOVEMBER, 0)
    client.force_login(staff)
    client.cookies["django_language"] = language
    r = client.get(reverse(REPORT))
    rows = [(row["account"], row["cluster"].slug if row["cluster"] else None, row["total_text"], row["cells"][-2:])
            for row in r.context["by_team"]]
    assert rows == [("post", "local", "0", [(None, "–"), (0.0, "0")]),
                    ("vfx", "local", "3.50", [(1.0, "1.00"), (2.5, "2.50")]),
                    ("vfx", "second", "0.25", [(None, "–"), (0.25, "0.25")]),
                    ("vfx", None, "3.75", [(1.0, "1.00"), (2.75, "2.75")])]
    body = r.content.decode()
    for word in words:
        assert word in body
    only_post = client.get(reverse(REPORT), {"group": post.group.pk}).context["by_team"]
    assert [row["account"] for row in only_post] == ["post"]


def test_reading_again_needs_its_own_permission_and_queues_the_read(client, fake_ssh, inline_rq, profile, vfx):
    clerk = User.objects.create_user("clerk", "clerk@example.org", "clerk-pass-123", is_staff=True)
    clerk.user_permissions.add(Permission.objects.get(codename="view_usagerecord"))
    client.force_login(clerk)
    assert "Read again from the clusters" not in client.get(reverse(REPORT)).content.decode()
    assert client.post(reverse(READ_AGAIN)).status_code == 403
    assert client.get(reverse(READ_AGAIN)).status_code == 405

    clerk.user_permissions.add(Permission.objects.get(codename="change_teamusage"))
    fake_ssh(slurm_says(november="vfx|900|gres/gpu=4\n"))
    r = client.post(reverse(READ_AGAIN), follow=True)
    assert inline_rq.enqueued == [("jobs.usage.team_usage.read_again", ())]
    assert "Reading usage by team again from the clusters" in r.content.decode()
    assert figures()[("vfx", NOVEMBER)] == 1.0


# ---- the team's own table (the lead's team page includes it) -----------------------------------

def test_the_team_table_shows_slurms_months_per_cluster(profile, second_cluster, vfx, post):
    stored(vfx, profile, NOVEMBER, 2, read_at=NOW - timedelta(minutes=5))
    stored(vfx, second_cluster, NOVEMBER, 1, read_at=NOW - timedelta(hours=2))
    stored(post, profile, NOVEMBER, 9)  # another team's: not shown
    shown = team_usage.team_usage_rows(vfx, months=3)
    assert [(m["month"], m["gpu_hours"]) for m in shown["months"]] == [(NOVEMBER, 3.0), (OCTOBER, None),
                                                                       (date(2026, 9, 1), None)]
    assert shown["read_at"] == NOW - timedelta(hours=2)  # the older of the two clusters' readings
    with translation.override("en"):
        html = render_to_string("jobs/_team_usage.html", {"team_usage": shown})
    assert "Read 2\xa0hours ago." in html and "November 2026" in html and "Local: 2" in html
    with translation.override("zh-hans"):
        html = render_to_string("jobs/_team_usage.html", {"team_usage": shown})
    assert "2\xa0小时前读取。" in html and "团队用量" in html


# ---- /metrics ----------------------------------------------------------------------------------

def test_metrics_give_each_teams_gpu_hours_per_cluster_this_and_last_month(client, settings, monkeypatch,
                                                                           profile, second_cluster, vfx, post):
    settings.METRICS_TOKEN = token = "metrics-token-" + "y" * 32
    settings.METRICS_ALLOWED_NETWORKS = []
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    stored(vfx, profile, NOVEMBER, 2.5)
    stored(vfx, profile, OCTOBER, 1)
    stored(vfx, profile, date(2026, 9, 1), 7)  # older: not a series
    stored(post, second_cluster, NOVEMBER, 0.5)
    text = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}").content.decode()
    assert "# TYPE ffportal_team_gpu_hours gauge" in text and "# HELP ffportal_team_gpu_hours " in text
    samples = {tuple(sorted(s.labels.items())): s.value for family in text_string_to_metric_families(text)
               for s in family.samples if s.name == "ffportal_team_gpu_hours"}
    assert samples == {(("cluster", "local"), ("month", "this"), ("team", "vfx")): 2.5,
                       (("cluster", "local"), ("month", "last"), ("team", "vfx")): 1.0,
                       (("cluster", "second"), ("month", "this"), ("team", "post")): 0.5}
