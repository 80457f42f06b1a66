"""The usage page (/usage), its CSV, the email settings form (on the account page), and the admin usage report."""
import csv
import io
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse
from django.utils import timezone

from jobs.models import Job, JobStatus, NotificationPreference, Quota, UsageRecord
from jobs.usage.accounting import last_months, month_of


@pytest.fixture(autouse=True)
def _utc(settings):
    settings.TIME_ZONE = "UTC"


def charged(owner, template, gpu_seconds, name="", when=None, cpu_seconds=0.0) -> UsageRecord:
    when = when or timezone.now()
    job = Job.objects.create(owner=owner, template=template, template_snapshot=template.snapshot().to_json(), name=name,
                             cluster=template.cluster, status=JobStatus.COMPLETED, finished_at=when, total=2, done=2)
    return UsageRecord.objects.create(job=job, user=owner, period=month_of(when), gpu_seconds=gpu_seconds,
                                      cpu_seconds=cpu_seconds)


def months_ago(n: int):
    return timezone.now().replace(day=15) - timedelta(days=31 * n)


def bars(body: str) -> dict[str, str]:
    return dict(re.findall(r'class="usage-bar" data-month="([\d-]+)" data-gpu-hours="([\d.]+)"', body))


def test_it_needs_a_login(client):
    r = client.get(reverse("usage"))
    assert r.status_code == 302 and "/login/" in r["Location"]
    assert client.get(reverse("usage-csv")).status_code == 302


def test_it_shows_this_months_gpu_hours_the_chart_and_the_jobs(client, owner, stranger, template):
    charged(owner, template, 5400, name="Holiday photos")  # 1.5 GPU-hours
    charged(owner, template, 1800, name="Wedding")  # 0.5
    charged(owner, template, 7200, name="Old job", when=months_ago(2))  # 2.0, two months back
    charged(stranger, template, 36000, name="Not yours")
    client.force_login(owner)
    body = client.get(reverse("usage")).content.decode()
    assert 'data-usage="gpu-hours">2<' in body
    chart = bars(body)
    assert len(chart) == 12
    this, two_back = last_months(12)[-1], last_months(12)[-3]
    assert chart[this.strftime("%Y-%m")] == "2.00" and chart[two_back.strftime("%Y-%m")] == "2.00"
    assert sum(float(v) for v in chart.values()) == 4.0  # the stranger's 10 hours are not there
    assert body.count("<rect") == 2  # a bar for each month with usage, none for empty months
    assert "Holiday photos" in body and "Wedding" in body and "Old job" not in body  # this month's jobs
    assert "Not yours" not in body
    assert re.search(r'data-usage="job-gpu-hours">1.5<', body)


def test_an_empty_month_says_so(client, owner):
    client.force_login(owner)
    body = client.get(reverse("usage")).content.decode()
    assert 'data-usage="gpu-hours">0<' in body and "No job has ended this month yet." in body
    assert "No GPU time used in these months." in body


def test_it_shows_the_quota_as_the_new_job_page_counts_it(client, owner, template):
    Quota.objects.create(user=owner, gpu_hours_per_month=10)
    charged(owner, template, 4 * 3600)
    client.force_login(owner)
    body = client.get(reverse("usage")).content.decode()
    assert 'data-usage="gpu-left">6<' in body and "of 10 GPU-hours left" in body


def test_the_nav_links_to_it(client, owner):
    client.force_login(owner)
    body = client.get(reverse("job-list")).content.decode()
    assert f'href="{reverse("usage")}"' in body


def test_the_csv_lists_every_charged_job_of_the_user(client, owner, stranger, template):
    a = charged(owner, template, 5400, name="Holiday, 2026", cpu_seconds=7200)
    b = charged(owner, template, 900, name="Old", when=months_ago(1))
    charged(stranger, template, 36000, name="Not yours")
    client.force_login(owner)
    r = client.get(reverse("usage-csv"))
    assert r.status_code == 200 and r["Content-Type"].startswith("text/csv")
    assert 'filename="usage-alice.csv"' in r["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(b"".join(r.streaming_content).decode())))
    assert rows[0] == ["month", "job_id", "job_name", "template", "status", "finished_at", "gpu_hours", "cpu_hours",
                       "gpu_seconds", "cpu_seconds"]
    assert [r[1] for r in rows[1:]] == [str(a.job_id), str(b.job_id)]  # newest month first
    assert rows[1][0] == a.period.strftime("%Y-%m") and rows[1][2] == "Holiday, 2026" and rows[1][3] == "quick-gpu"
    assert rows[1][4:5] == ["completed"] and rows[1][6:] == ["1.5000", "2.0000", "5400", "7200"]
    assert rows[2][6] == "0.2500"


def test_the_email_settings_form_saves_the_opt_out(client, owner):
    client.force_login(owner)
    assert f'href="{reverse("account")}#notifications"' in client.get(reverse("usage")).content.decode()
    body = client.get(reverse("account")).content.decode()
    assert 'name="job_emails"' in body and "alice@example.org" in body
    r = client.post(reverse("notification-settings"), {"quota_emails": "on"})
    assert r.status_code == 302 and r["Location"].endswith(reverse("account") + "#notifications")
    pref = NotificationPreference.objects.get(user=owner)
    assert (pref.job_emails, pref.quota_emails) == (False, True)
    client.post("/usage/email", {"job_emails": "on", "quota_emails": "on"})  # the old address still saves
    pref.refresh_from_db()
    assert (pref.job_emails, pref.quota_emails) == (True, True)
    assert NotificationPreference.objects.count() == 1


def test_the_text_and_the_chart_round_alike(client, owner, template):
    charged(owner, template, 180)  # 0.05 GPU-hours: the chart once said 0.1 next to a text saying 0.05
    client.force_login(owner)
    body = client.get(reverse("usage")).content.decode()
    assert 'data-usage="gpu-hours">0.05<' in body
    label = re.search(r'<text [^>]*fill="#414a5c">([^<]+)</text>', body).group(1)
    assert label == "0.05"
    assert re.search(r'data-usage="job-gpu-hours">0.05<', body)


def test_the_month_line_reads_as_a_sentence(client, owner, template):
    charged(owner, template, 3600, cpu_seconds=5400)
    client.force_login(owner)
    body = client.get(reverse("usage")).content.decode()
    assert "1 job ended · 1.5 CPU-hours" in re.sub(r"\s+", " ", body)


def test_the_email_settings_form_takes_post_only(client, owner):
    client.force_login(owner)
    assert client.get(reverse("notification-settings")).status_code == 405


# ---- the admin report -------------------------------------------------------------------------

REPORT = "admin:jobs_usagerecord_report"
REPORT_CSV = "admin:jobs_usagerecord_report_csv"


@pytest.fixture
def usage(owner, colleague, stranger, template):
    charged(owner, template, 3600)
    charged(owner, template, 7200, when=months_ago(1))
    charged(colleague, template, 1800)
    charged(stranger, template, 900)


def test_the_report_shows_users_groups_months_and_a_chart(client, staff, usage):
    client.force_login(staff)
    r = client.get(reverse(REPORT))
    assert r.status_code == 200
    by_user = {row["name"]: round(row["total"], 2) for row in r.context["by_user"]}
    assert by_user == {"alice": 3.0, "bob": 0.5, "mallory": 0.25}
    by_group = {row["name"]: (round(row["total"], 2), row["users"]) for row in r.context["by_group"]}
    assert by_group == {"vfx": (3.5, 2), "(no group)": (0.25, 1)}
    assert [round(h, 2) for h in r.context["by_user"][0]["hours"][-2:]] == [2.0, 1.0]  # alice: last month, this month
    body = r.content.decode()
    assert len(bars(body)) == 12 and body.count("<rect") == 2
    assert bars(body)[last_months(1)[0].strftime("%Y-%m")] == "1.75"


def test_the_report_filters_by_group_and_period(client, staff, team, usage):
    client.force_login(staff)
    r = client.get(reverse(REPORT), {"group": team.pk, "months": 3})
    assert [row["name"] for row in r.context["by_user"]] == ["alice", "bob"]
    assert [row["name"] for row in r.context["by_group"]] == ["vfx"]
    assert len(bars(r.content.decode())) == 3


def test_the_report_csv(client, staff, usage):
    client.force_login(staff)
    r = client.get(reverse(REPORT_CSV), {"months": 3})
    assert r.status_code == 200 and r["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(r.content.decode())))
    assert rows[0] == ["month", "user", "email", "groups", "jobs", "gpu_hours", "cpu_hours"]
    this, last = last_months(2)[1].strftime("%Y-%m"), last_months(2)[0].strftime("%Y-%m")
    assert sorted(rows[1:]) == sorted([
        [last, "alice", "alice@example.org", "vfx", "1", "2.0000", "0.0000"],
        [this, "alice", "alice@example.org", "vfx", "1", "1.0000", "0.0000"],
        [this, "bob", "bob@example.org", "vfx", "1", "0.5000", "0.0000"],
        [this, "mallory", "mallory@example.org", "", "1", "0.2500", "0.0000"],
    ])


def test_the_usage_records_list_links_to_the_report(client, staff, usage):
    client.force_login(staff)
    body = client.get(reverse("admin:jobs_usagerecord_changelist")).content.decode()
    assert reverse(REPORT) in body


@pytest.mark.parametrize("who", ["owner", "colleague", "stranger"])
@pytest.mark.parametrize("url", [REPORT, REPORT_CSV, "admin:jobs_usagerecord_changelist"])
def test_non_staff_cannot_reach_the_report(client, request, usage, who, url):
    client.force_login(request.getfixturevalue(who))
    r = client.get(reverse(url))
    assert r.status_code == 302 and "/admin/login/" in r["Location"]


def test_staff_without_the_view_permission_are_refused(client, usage):
    clerk = User.objects.create_user("clerk", "clerk@example.org", "clerk-pass-123", is_staff=True)
    client.force_login(clerk)
    assert client.get(reverse(REPORT)).status_code == 403
    clerk.user_permissions.add(Permission.objects.get(codename="view_usagerecord"))
    assert client.get(reverse(REPORT)).status_code == 200
