"""The admin in words an admin reads: the audit log's actions, not their codes (in both languages),
and the usage report's per-user GPU-hours precise enough to add up to its total."""
from __future__ import annotations

import re
from datetime import datetime
from datetime import timezone as dt_timezone

import pytest
from django.urls import reverse
from django.utils import timezone

from jobs import audit
from jobs.admin.usage import hours_text
from jobs.models import AuditEntry, Job, JobStatus, UsageRecord
from jobs.usage.accounting import month_of

NOW = datetime(2026, 11, 18, 9, 30, tzinfo=dt_timezone.utc)


def admin_page(client, staff, url, language, **params) -> str:
    client.force_login(staff)
    client.cookies["django_language"] = language
    r = client.get(url, params)
    assert r.status_code == 200
    return r.content.decode()


@pytest.mark.parametrize("language, retried, changed", [
    ("en", "Ran a job&#x27;s failed photos and videos again", "Changed template"),
    ("zh-hans", "重新处理了任务中失败的照片和视频", "修改了模板"),
])
def test_the_audit_log_says_what_happened_in_words(client, staff, owner, template, language, retried, changed):
    audit.record(owner, "job.retry", target=template)
    audit.record(staff, "template.change", target=template, details={"changed": {"mem": {"from": "2G", "to": "4G"}}})
    body = admin_page(client, staff, reverse("admin:jobs_auditentry_changelist"), language)
    rows = re.search(r'<table id="result_list">(.*?)</table>', body, re.S).group(1)
    assert retried in rows and changed in rows
    assert "job.retry" not in rows and "template.change" not in rows
    filters = re.search(r'<nav id="changelist-filter".*?</nav>', body, re.S).group(0)
    assert retried in filters and "?action=job.retry" in filters  # filtered by words, on the code


def test_the_code_stays_in_the_database_and_on_the_entrys_page(client, staff, owner, template):
    entry = audit.record(owner, "job.retry", target=template)
    assert AuditEntry.objects.get(pk=entry.pk).action == "job.retry"
    body = admin_page(client, staff, reverse("admin:jobs_auditentry_change", args=[entry.pk]), "en")
    assert "job.retry" in body and "Ran a job&#x27;s failed photos and videos again" in body


def test_every_action_the_portal_writes_has_its_words():
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    found = subprocess.run(["grep", "-rhoE", r"audit\.record\([^,]+, \"[a-z_]+\.[a-z_]+\"", "jobs", "portal"],
                           cwd=root, capture_output=True, text=True).stdout
    codes = set(re.findall(r"\"([a-z_]+\.[a-z_]+)\"", found))
    assert codes and codes <= set(audit.ACTION_WORDS), codes - set(audit.ACTION_WORDS)
    assert audit.action_words("something.new") == "something.new"  # an action without words still shows


def test_report_hours_have_two_decimals_and_show_a_little_use():
    assert [hours_text(h) for h in (0, 0.001, 0.04, 0.08, 1234.5)] == ["0", "<0.01", "0.04", "0.08", "1,234.50"]


def test_the_usage_report_per_user_adds_up_to_its_total(client, staff, owner, colleague, template, monkeypatch):
    monkeypatch.setattr(timezone, "now", lambda: NOW)
    for user in (owner, colleague):
        job = Job.objects.create(owner=user, template=template, template_snapshot=template.snapshot().to_json(),
                                 cluster=template.cluster, status=JobStatus.COMPLETED, finished_at=NOW)
        UsageRecord.objects.create(job=job, user=user, period=month_of(NOW), gpu_seconds=0.04 * 3600)
    body = admin_page(client, staff, reverse("admin:jobs_usagerecord_report"), "en")
    assert "0.08 GPU-hours in the last 12 months" in body
    by_user = re.search(r'<div class="module" id="by-user">(.*?)</table>', body, re.S).group(1)
    assert by_user.count("<strong>0.04</strong>") == 2 and "0.0<" not in by_user
