"""Quotas in the Django admin: the list (who it applies to, limits, this month's use), filters,
search, validation errors in plain words, and only staff get in."""
from datetime import date

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse
from django.utils import timezone

from jobs.models import Quota

from .test_quotas import active, charged

LIST = reverse("admin:jobs_quota_changelist")
ADD = reverse("admin:jobs_quota_add")


def quota_form(**fields) -> dict:
    data = {"user": "", "group": "", "note": "", "gpu_hours_per_month": "", "max_concurrent_jobs": "",
            "max_targets_per_job": "", "max_upload_mb": ""}
    data.update(fields)
    return data


@pytest.fixture
def admin_client(client, staff):
    client.force_login(staff)
    return client


@pytest.fixture
def quotas_set(owner, team, template):
    Group.objects.create(name="interns")
    group_quota = Quota.objects.create(group=team, gpu_hours_per_month=10, max_concurrent_jobs=4, note="film A")
    user_quota = Quota.objects.create(user=owner, max_targets_per_job=500, max_upload_mb=100)
    charged(owner, template, 2.5, timezone.localdate().replace(day=1))
    charged(owner, template, 9, date(2001, 1, 1))  # long ago: not this month
    active(owner, template)
    return group_quota, user_quota


def listed(response) -> list[str]:
    return [str(q) for q in response.context["cl"].result_list]


@pytest.mark.parametrize("who", ["owner", "stranger"])
def test_it_keeps_non_staff_out(client, request, who):
    client.force_login(request.getfixturevalue(who))
    r = client.get(LIST)
    assert r.status_code == 302 and reverse("admin:login") in r["Location"]


def test_it_lists_quotas_with_their_limits_and_this_months_use(admin_client, quotas_set):
    r = admin_client.get(LIST)
    body = r.content.decode()
    assert r.status_code == 200 and listed(r) == ["group vfx", "user alice"]
    assert "2.5 of 10" in body  # the group's use this month (alice is a member), of its limit
    assert "film A" in body and "500" in body


@pytest.mark.parametrize("query, expected", [
    ({"applies_to": "group"}, ["group vfx"]),
    ({"applies_to": "user"}, ["user alice"]),
    ({"limit": "gpu"}, ["group vfx"]),
    ({"limit": "upload"}, ["user alice"]),
    ({"q": "alice"}, ["group vfx", "user alice"]),  # her own quota and her group's: both bind her
    ({"q": "vfx"}, ["group vfx"]),
])
def test_it_filters_and_searches(admin_client, quotas_set, query, expected):
    assert sorted(listed(admin_client.get(LIST, query))) == expected


def test_it_adds_a_group_quota(admin_client, team):
    r = admin_client.post(ADD, quota_form(group=team.pk, gpu_hours_per_month="12.5", max_concurrent_jobs=3))
    assert r.status_code == 302
    quota = Quota.objects.get()
    assert quota.group == team and float(quota.gpu_hours_per_month) == 12.5 and quota.max_targets_per_job is None


@pytest.mark.parametrize("fields, message", [
    ({"user": "owner", "group": "team"}, "A quota is for one user OR one group, not both"),
    ({}, "Choose the user or the group this quota applies to."),
    ({"group": "team", "gpu_hours_per_month": "-1"}, "Ensure this value is greater than or equal to 0."),
])
def test_it_explains_what_is_wrong(admin_client, request, fields, message):
    data = quota_form(**{k: request.getfixturevalue(v).pk for k, v in fields.items() if k in ("user", "group")})
    data.update({k: v for k, v in fields.items() if k not in ("user", "group")})
    r = admin_client.post(ADD, data)
    assert r.status_code == 200 and message in r.content.decode()
    assert "Constraint" not in r.content.decode()  # never the database's wording
    assert not Quota.objects.exists()


def test_it_refuses_a_second_quota_for_the_same_group(admin_client, team):
    Quota.objects.create(group=team, max_concurrent_jobs=1)
    r = admin_client.post(ADD, quota_form(group=team.pk, max_concurrent_jobs=2))
    assert r.status_code == 200 and "This group already has a quota: edit that one." in r.content.decode()
    assert Quota.objects.count() == 1
