"""Usage by team on the REAL clusters (22.05, 24.11, 26.05): a team's job runs, then the portal
reads the team's GPU-hours from Slurm's own accounting (sacct over SSH, jobs.usage.team_usage) and
the admin usage report shows them. The team's account is new, so Slurm's figure is this one job's:
the same GPU-seconds the portal charged it from the same accounting, task by task."""
import pytest
from django.contrib.auth.models import User
from django.db.models import F, Sum
from django.test import Client
from django.urls import reverse

from jobs.models import JobStatus, Task, TeamUsage
from jobs.usage.team_usage import refresh_profile
from tests.e2e import sites
from tests.e2e.conftest import SAMPLES, fill, run_rq, watch_until
from tests.e2e.test_end_to_end import start
from tests.e2e.test_teams_cluster import forget, new_team


@pytest.mark.parametrize("site", sites.VERSIONS, indirect=True, ids=sites.site_id)
def test_a_teams_gpu_hours_come_from_slurms_accounting_into_the_report(api, site, folder, redis_queue):
    team = new_team()
    account, group = team.slurm_account, team.group
    try:
        fill(folder, {"a.jpg": SAMPLES / "t1.jpg", "b.png": SAMPLES / "astronaut.png"})
        job = start(api, folder, template=site.gpu, team=account)
        run_rq(redis_queue)
        job = watch_until(job, {JobStatus.COMPLETED, JobStatus.PARTIALLY_FAILED, JobStatus.FAILED})
        assert job.status == JobStatus.COMPLETED, job.error

        assert refresh_profile(site.profile) >= 2  # this month and last, for every team
        # summed over both months: a job that ran across a month's end counts a part in each
        read = TeamUsage.objects.filter(team=team, cluster=site.profile).aggregate(s=Sum("gpu_seconds"))["s"]
        charged = Task.objects.filter(job=job).aggregate(s=Sum(F("elapsed_seconds") * F("gpus")))["s"]
        assert read > 0 and read == charged, (read, charged)

        admin = Client()
        admin.force_login(User.objects.create_superuser(f"admin-{account}", "a@example.org", "admin-pass-123"))
        report = admin.get(reverse("admin:jobs_usagerecord_report"))
        rows = [r for r in report.context["by_team"] if r["account"] == account and r["cluster"] == site.profile]
        assert [round(sum(h or 0 for h in r["hours"]) * 3600) for r in rows] == [round(read)]
        assert account in report.content.decode()
    finally:  # slurmdbd outlives the test: the account goes
        group.delete()
        forget(site, site.profile.username, account)
