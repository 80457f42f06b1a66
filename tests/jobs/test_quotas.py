"""Quota rules (jobs.quotas): which limit binds (user vs group, stricter wins, source named), what
counts as this month's usage (month rollover, time zone, active jobs at their estimate, a group's
members together), the estimate, and the refusal messages. Start-level tests: test_quotas_start.py;
folders: test_quotas_submit.py; the race: test_quotas_race.py; the admin: test_quotas_admin.py."""
from datetime import date, datetime
from datetime import timezone as dt_timezone

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from jobs import quotas
from jobs.errors import QuotaExceeded, StartError
from jobs.models import Job, JobStatus, Quota, Template, TemplateSnapshot, UsageRecord
from jobs.quotas import check_quota, effective_limits, estimate_gpu_hours, gpu_budgets, quota_status

NOV_20 = datetime(2026, 11, 20, 12, 0, tzinfo=dt_timezone.utc)
DEC_1 = datetime(2026, 12, 1, 0, 30, tzinfo=dt_timezone.utc)


def charged(user, template, hours: float, period: date) -> UsageRecord:
    """A finished job of `user` charged `hours` GPU-hours in the month starting `period`."""
    job = Job.objects.create(owner=user, template=template, template_snapshot=template.snapshot().to_json(),
                             cluster=template.cluster, status=JobStatus.COMPLETED)
    return UsageRecord.objects.create(job=job, user=user, period=period, gpu_seconds=hours * 3600)


def active(user, template, status=JobStatus.RUNNING, total=0, folder="") -> Job:
    return Job.objects.create(owner=user, template=template, template_snapshot=template.snapshot().to_json(),
                              cluster=template.cluster, status=status, total=total, target_folder=folder)


@pytest.fixture
def big(profile):
    """10 images per task at 6 minutes each, 2 GPUs, 1 hour limit: one full task = 2 GPU-hours."""
    return Template.objects.create(name="Big", slug="big", cluster=profile, partition="gpu", gpu_count=2,
                                   time_limit="01:00:00", chunk_size=10, seconds_per_image=360)


def check(user, template, n_targets, uploads=(), now=NOV_20):
    with transaction.atomic():
        check_quota(user, template, n_targets, uploads, now=now)


# ---- which limit binds ----

def test_it_has_no_limits_without_a_quota(owner, staff):
    assert not effective_limits(owner).any and not effective_limits(staff).any
    assert quota_status(owner).gpu is None and not quota_status(owner).blocked


def test_it_takes_the_stricter_of_user_and_group_and_names_the_source(owner, team):
    Quota.objects.create(user=owner, gpu_hours_per_month=10, max_targets_per_job=100)
    Quota.objects.create(group=team, gpu_hours_per_month=5, max_targets_per_job=1000, max_upload_mb=50)
    limits = effective_limits(owner)
    assert (limits.gpu_hours_per_month.value, limits.gpu_hours_per_month.source) == (5.0, "group vfx")
    assert (limits.max_targets_per_job.value, limits.max_targets_per_job.source) == (100, "your own quota")
    assert (limits.max_upload_mb.value, limits.max_upload_mb.source) == (50, "group vfx")
    assert not limits.max_concurrent_jobs.is_set and limits.max_concurrent_jobs.source == ""


def test_it_takes_the_smallest_of_several_groups(owner, team):
    other = Group.objects.create(name="night-shift")
    owner.groups.add(other)
    Quota.objects.create(group=team, max_concurrent_jobs=4)
    Quota.objects.create(group=other, max_concurrent_jobs=2)
    limit = effective_limits(owner).max_concurrent_jobs
    assert (limit.value, limit.source) == (2, "group night-shift")


def test_it_names_the_users_own_quota_on_a_tie(owner, team):
    Quota.objects.create(group=team, max_targets_per_job=100)
    Quota.objects.create(user=owner, max_targets_per_job=100)
    assert effective_limits(owner).max_targets_per_job.source == "your own quota"


def test_it_binds_staff_too_when_a_quota_applies(staff, team, template):
    staff.groups.add(team)
    Quota.objects.create(group=team, max_targets_per_job=2)
    with pytest.raises(QuotaExceeded):
        check(staff, template, 3)


def test_it_ignores_quotas_of_groups_the_user_is_not_in(owner, stranger, team):
    Quota.objects.create(group=team, max_targets_per_job=2)
    assert effective_limits(owner).max_targets_per_job.value == 2
    assert not effective_limits(stranger).any


# ---- usage this month ----

def test_it_counts_only_this_months_usage(owner, template):
    Quota.objects.create(user=owner, gpu_hours_per_month=10)
    charged(owner, template, 7, date(2026, 10, 1))  # last month: no longer counts
    charged(owner, template, 2, date(2026, 11, 1))
    (budget,) = gpu_budgets(owner, now=NOV_20)
    assert budget.used == pytest.approx(2) and budget.left == pytest.approx(8)


def test_it_starts_afresh_when_the_month_rolls_over(owner, template, big):
    Quota.objects.create(user=owner, gpu_hours_per_month=10)
    charged(owner, template, 9.5, date(2026, 11, 1))
    with pytest.raises(QuotaExceeded):
        check(owner, big, 10, now=NOV_20)  # needs 2, 0.5 left
    assert gpu_budgets(owner, now=DEC_1)[0].used == 0
    check(owner, big, 10, now=DEC_1)  # November no longer counts: allowed


def test_it_reads_the_month_in_the_portals_time_zone(owner, template, settings):
    settings.TIME_ZONE = "Asia/Shanghai"
    Quota.objects.create(user=owner, gpu_hours_per_month=10)
    charged(owner, template, 4, date(2026, 11, 1))
    late_november_utc = datetime(2026, 11, 30, 17, 0, tzinfo=dt_timezone.utc)  # 1 December, 01:00 in Shanghai
    assert gpu_budgets(owner, now=late_november_utc)[0].used == 0
    assert quotas.resets_on(late_november_utc) == date(2027, 1, 1)


def test_it_counts_active_jobs_at_their_estimate_until_charged(owner, template, big):
    Quota.objects.create(user=owner, gpu_hours_per_month=100)
    active(owner, big, JobStatus.QUEUED, total=25)  # 2 x 2 GPU-hours + 5 images (0.5 h + 30 s) x 2 GPUs
    active(owner, big, JobStatus.PENDING, folder="/srv/ffportal/storage/x")  # folder not listed yet: one task
    active(owner, big, JobStatus.COMPLETED, total=100)  # ended: only a UsageRecord would count
    done_but_charged = active(owner, big, JobStatus.RUNNING, total=10)
    UsageRecord.objects.create(job=done_but_charged, user=owner, period=date(2026, 11, 1), gpu_seconds=3600)
    expected = estimate_gpu_hours(big, 25) + estimate_gpu_hours(big, 10) + 1.0
    assert gpu_budgets(owner, now=NOV_20)[0].used == pytest.approx(expected)


def test_it_pools_a_groups_usage_but_not_a_users(owner, colleague, team, template):
    Quota.objects.create(group=team, gpu_hours_per_month=10)
    Quota.objects.create(user=owner, gpu_hours_per_month=8)
    charged(colleague, template, 6, date(2026, 11, 1))
    charged(owner, template, 1, date(2026, 11, 1))
    budgets = {b.source: b for b in gpu_budgets(owner, now=NOV_20)}
    assert budgets["group vfx"].used == pytest.approx(7)  # bob's 6 + alice's 1
    assert budgets["your own quota"].used == pytest.approx(1)
    # The group has less left (3) than alice's own quota (7): it is the one that binds and is shown.
    assert quota_status(owner, now=NOV_20).gpu.source == "group vfx"


def test_it_pools_a_groups_jobs_at_once(owner, colleague, team, template):
    Quota.objects.create(group=team, max_concurrent_jobs=2)
    active(colleague, template)
    active(colleague, template, JobStatus.QUEUED)
    with pytest.raises(QuotaExceeded) as exc:
        check(owner, template, 1)
    assert exc.value.message == ("Your group already has 2 jobs waiting or running; its limit is 2 at a time "
                                 "(group vfx). Wait for one to finish, or cancel one.")


# ---- the estimate ----

def test_it_estimates_tasks_times_gpus_capped_by_the_time_limit(big):
    # 25 images in tasks of 10: two full tasks (10 x 360 s + 30 s, capped at the 1 h limit) and one
    # of 5 (5 x 360 s + 30 s); each on 2 GPUs.
    assert estimate_gpu_hours(big, 25) == pytest.approx((3600 + 3600 + 1830) * 2 / 3600)
    assert estimate_gpu_hours(big, 0) == 0


def test_it_estimates_from_a_snapshot_as_from_the_template(template, big):
    assert estimate_gpu_hours(big.snapshot(), 25) == pytest.approx(estimate_gpu_hours(big, 25))
    # quick-gpu: 2 images per task at the default 3 s, + 30 s model load, 1 GPU
    assert estimate_gpu_hours(template, 10) == pytest.approx(5 * 36 / 3600)
    old = {k: v for k, v in template.snapshot().to_json().items() if k != "seconds_per_image"}  # before the field existed
    assert estimate_gpu_hours(TemplateSnapshot.from_json(old), 10) == pytest.approx(5 * 36 / 3600)


def test_it_charges_no_gpu_hours_for_a_cpu_template(owner, profile):
    cpu = Template.objects.create(name="CPU", slug="cpu", cluster=profile, partition="cpu", gpu_count=0)
    Quota.objects.create(user=owner, gpu_hours_per_month=0)
    assert estimate_gpu_hours(cpu, 1000) == 0
    check(owner, cpu, 1000)  # a zero GPU-hour quota still lets CPU jobs run


# ---- refusals, in words ----

def test_it_says_how_much_is_used_and_left_and_when_it_resets(owner, template, big):
    Quota.objects.create(user=owner, gpu_hours_per_month=10)
    charged(owner, template, 9.5, date(2026, 11, 1))
    with pytest.raises(QuotaExceeded) as exc:
        check(owner, big, 10)
    assert isinstance(exc.value, StartError) and exc.value.field is None
    assert exc.value.message == ("You have used 9.5 of your 10 GPU-hours this month (your own quota), 0.5 left; "
                                 "this job needs about 2. The limit resets on 1 December.")


def test_it_names_the_group_whose_gpu_hours_ran_out(owner, colleague, team, template, big):
    Quota.objects.create(group=team, gpu_hours_per_month=10)
    charged(colleague, template, 9.5, date(2026, 12, 1))
    with pytest.raises(QuotaExceeded) as exc:
        check(owner, big, 6, now=datetime(2026, 12, 24, tzinfo=dt_timezone.utc))  # 6 x 360 s + 30 s, x 2 GPUs
    assert exc.value.message == ("Your group has used 9.5 of its 10 GPU-hours this month (group vfx), 0.5 left; "
                                 "this job needs about 1.2. The limit resets on 1 January.")


def test_it_lets_a_start_use_exactly_what_is_left(owner, template, big):
    Quota.objects.create(user=owner, gpu_hours_per_month=10)
    charged(owner, template, 8, date(2026, 11, 1))
    check(owner, big, 10)  # needs exactly 2


def test_it_refuses_too_many_targets_with_the_count_and_limit(owner, team, template):
    Quota.objects.create(group=team, max_targets_per_job=1000)
    with pytest.raises(QuotaExceeded) as exc:
        check(owner, template, 1200)
    assert exc.value.field == "targets"
    assert exc.value.message == ("This job has 1,200 images and videos; your limit is 1,000 per job (group vfx). "
                                 "Split them into several jobs or ask an admin.")
    check(owner, template, None)  # a folder: counted when it is listed (test_quotas_submit.py)


def test_it_refuses_a_big_upload_naming_the_file(owner, template):
    Quota.objects.create(user=owner, max_upload_mb=100)
    with pytest.raises(QuotaExceeded) as exc:
        check(owner, template, 2, [("face.jpg", 2_000_000, "source"), ("shoot.mp4", 120 * 2**20, "targets")])
    assert exc.value.field == "targets"
    assert exc.value.message == ("shoot.mp4 is 120 MB; your limit is 100 MB per file (your own quota). "
                                 "Make it smaller or ask an admin.")
    check(owner, template, 1, [("ok.mp4", 100 * 2**20, "targets")])  # exactly the limit is allowed


def test_it_refuses_a_start_past_the_users_jobs_at_once(owner, template):
    Quota.objects.create(user=owner, max_concurrent_jobs=1)
    active(owner, template, JobStatus.SUBMITTING)
    with pytest.raises(QuotaExceeded) as exc:
        check(owner, template, 1)
    assert exc.value.message == ("You already have 1 job waiting or running; your limit is 1 at a time "
                                 "(your own quota). Wait for one to finish, or cancel one.")


@pytest.mark.django_db(transaction=True)
def test_it_refuses_to_lock_outside_a_transaction(owner):
    # The lock is only worth anything inside the transaction that then creates the job.
    with pytest.raises(RuntimeError):
        quotas.lock_quota_subjects(owner)


# ---- the Quota row itself ----

def test_it_wants_exactly_one_of_user_or_group(owner, team):
    with pytest.raises(ValidationError) as exc:
        Quota(user=owner, group=team).full_clean()
    assert "one user OR one group, not both" in str(exc.value)
    with pytest.raises(ValidationError) as exc:
        Quota().full_clean()
    assert "Choose the user or the group" in str(exc.value)
    with pytest.raises(IntegrityError), transaction.atomic():
        Quota.objects.create()  # the database refuses it too


def test_it_formats_hours_for_people():
    assert [quotas.format_hours(h) for h in (10, 9.5, 0.04, 0, 1234.56)] == ["10", "9.5", "0.04", "0", "1,234.6"]
