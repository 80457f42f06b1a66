"""Teams on the REAL clusters (22.05, 24.11, 26.05): a team's first job makes its Slurm account
there (sacctmgr, as the portal's service user with AdminLevel Operator), every job of the team is
charged to it, and Slurm's own accounting says so (`sacct -o Account`). The account is removed
afterwards: slurmdbd outlives the test."""
import uuid

import pytest
from django.contrib.auth.models import Group, User

from jobs.models import JobStatus, Team
from tests.e2e import sites
from tests.e2e.conftest import SAMPLES, fill, run_rq, watch_until
from tests.e2e.test_cluster_qos import SECOND_CONF, config
from tests.e2e.test_end_to_end import start


@pytest.mark.parametrize("site", sites.VERSIONS, indirect=True, ids=sites.site_id)
def test_a_teams_jobs_are_charged_to_its_own_account_made_on_first_use(api, site, folder, redis_queue):
    team = new_team()
    account, group = team.slurm_account, team.group
    user = site.profile.username
    try:
        fill(folder, {"a.jpg": SAMPLES / "t1.jpg", "b.png": SAMPLES / "astronaut.png"})
        job = start(api, folder, template=site.gpu, team=account)
        assert (job.team, job.slurm_account) == (team, account)
        run_rq(redis_queue)
        job.refresh_from_db()
        assert job.slurm_job_id, job.error
        team.refresh_from_db()
        assert site.profile.slug in team.accounts_made
        assocs = site.slurm("sacctmgr", "-n", "-P", "show", "assoc", f"account={account}", f"user={user}",
                            "format=account,user,qos")
        assert assocs.split("|")[:2] == [account, user], assocs
        job = watch_until(job, {JobStatus.COMPLETED, JobStatus.PARTIALLY_FAILED, JobStatus.FAILED})
        assert job.status == JobStatus.COMPLETED, (job.error, [(t.name, t.status, t.message) for t in job.targets.all()])
        out = site.slurm("sacct", "-n", "-X", "-P", "-j", job.slurm_job_id, "-o", "JobID,Account,State")
        rows = [line.split("|") for line in out.splitlines() if line.strip()]
        assert rows and all(r[1] == account for r in rows), out
    finally:  # the other tests' jobs run for no team again; slurmdbd forgets the account
        group.delete()
        forget(site, user, account)


def new_team() -> Team:
    """A team with an account of its own, never seen by slurmdbd; the `api` fixture's user in it."""
    account = f"e2e-{uuid.uuid4().hex[:8]}"
    group = Group.objects.create(name=f"Team {account}")
    User.objects.get(username="demo").groups.add(group)
    return Team.objects.create(group=group, slurm_account=account)


def forget(site, user: str, account: str) -> None:
    """Remove the test's account (its jobs cancelled first: Slurm keeps an account with running jobs)."""
    try:
        site.slurm("scancel", f"--account={account}")
        site.slurm("sacctmgr", "-i", "delete", "user", user, f"account={account}")
        site.slurm("sacctmgr", "-i", "delete", "account", account)
    except AssertionError as exc:  # reported, without hiding why the test failed
        print(f"could not remove the test account {account}: {exc}")


@pytest.mark.parametrize("conf", [None, SECOND_CONF], ids=["first", "second"])
def test_both_clusters_weigh_teams_by_fair_share_within_a_qos(conf):
    """Fair share between accounts counts more than a job's age, less than its QOS (deploy/slurm/slurm.conf.in)."""
    c = config(conf)
    assert int(c["PriorityWeightQOS"]) > int(c["PriorityWeightFairShare"]) > int(c["PriorityWeightAge"])
