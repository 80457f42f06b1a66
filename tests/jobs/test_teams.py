"""Teams as Slurm accounts (jobs.models.team, jobs.clusters.team_accounts): a job runs for one of
its owner's teams, chosen at Start (the default: the team of their last job, else the first), is
submitted with that team's `--account`, and the account is made on the cluster before the team's
first job there, once. Only the SSH seam is faked; the real cluster's side is tests/e2e/test_teams_cluster.py."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from cluster import render_script
from cluster.slurm.accounts import (
    account_state_argv,
    add_account_argv,
    add_user_argv,
    checked_account,
    parse_account_state,
)
from jobs.job.submit import sbatch_spec, submit_job
from jobs.models import Job, JobStatus, Team

from .api_helpers import image, token_client
from .test_uploads_tus import send

STATE = ("#cluster|ffportal\n#default|ffportal\n"
         "ffportal|ffportal|ffportal|high,normal,urgent|normal\n")


@pytest.fixture
def alice(client, owner):
    client.force_login(owner)
    return client


@pytest.fixture
def vfx(team):
    return Team.objects.create(group=team, slurm_account="vfx")


@pytest.fixture
def post(owner):
    group = Group.objects.create(name="post")
    owner.groups.add(group)
    return Team.objects.create(group=group, slurm_account="post")


def start(alice, template, jpeg_bytes, **more) -> Job:
    face = send(alice, jpeg_bytes, "face.jpg", "source")
    photo = send(alice, jpeg_bytes, "p.jpg", "target")
    r = alice.post(reverse("job-new"), {"template": template.pk, "consent": "on", "source_uploads": [face.id],
                                        "target_uploads": [photo.id], **more})
    assert r.status_code == 302, r.content.decode()[-2000:]
    return Job.objects.latest("created_at")


# ---- the cluster's words, pure ----------------------------------------------------------------------

def test_the_state_of_the_service_users_accounts_is_read_as_slurm_prints_it():
    state = parse_account_state(STATE, "vfx")
    assert (state.cluster, state.exists, state.qos, state.default_qos) == ("ffportal", False, "high,normal,urgent",
                                                                          "normal")
    assert parse_account_state(STATE + "ffportal|vfx|ffportal|normal|normal\n", "vfx").exists
    with pytest.raises(ValueError):
        parse_account_state("", "vfx")  # no ClusterName: not a state to act on
    assert account_state_argv("ffportal")[-1] == "ffportal"


def test_account_commands_are_argument_lists_that_take_no_stray_words():
    assert add_account_argv("vfx", "ffportal", "VFX team") == [
        "sacctmgr", "-i", "add", "account", "vfx", "cluster=ffportal", "description=VFX team", "organization=ffportal"]
    assert add_user_argv("ffportal", "vfx", "ffportal", "high,normal", "normal") == [
        "sacctmgr", "-i", "add", "user", "ffportal", "account=vfx", "cluster=ffportal", "qos=high,normal",
        "defaultqos=normal"]
    for bad in ("VFX", "vfx team", "vfx;rm", "a" * 31, "x,y", ""):
        with pytest.raises(ValueError):
            checked_account(bad)
    with pytest.raises(ValueError):
        add_user_argv("ffportal", "vfx", "ffportal", "normal,evil qos")


# ---- which team a job runs for ----------------------------------------------------------------------

def test_a_job_runs_for_the_default_team_and_carries_its_account(alice, owner, template, jpeg_bytes, vfx, post):
    job = start(alice, template, jpeg_bytes)
    assert (job.team, job.slurm_account) == (post, "post")  # no job yet: the first team by name
    job = start(alice, template, jpeg_bytes, team=vfx.pk)
    assert (job.team, job.slurm_account) == (vfx, "vfx")
    assert "#SBATCH --account=vfx" in render_script(sbatch_spec(job, n_tasks=1))
    assert start(alice, template, jpeg_bytes).team == vfx  # then the team of the last job
    page = alice.get(reverse("job-new")).content.decode()
    assert 'name="team"' in page and "For which team" in page


def test_another_teams_id_is_refused_and_a_user_in_no_team_has_no_account(alice, owner, template, jpeg_bytes,
                                                                          stranger):
    theirs = Group.objects.create(name="theirs")
    stranger.groups.add(theirs)
    other = Team.objects.create(group=theirs, slurm_account="theirs")
    face = send(alice, jpeg_bytes, "face.jpg", "source")
    photo = send(alice, jpeg_bytes, "p.jpg", "target")
    r = alice.post(reverse("job-new"), {"template": template.pk, "consent": "on", "source_uploads": [face.id],
                                        "target_uploads": [photo.id], "team": other.pk}, HTTP_ACCEPT_LANGUAGE="en")
    assert r.status_code == 200 and not Job.objects.exists()
    assert "Select a valid choice" in r.content.decode() or "Choose one of your teams." in r.content.decode()
    job = start(alice, template, jpeg_bytes)
    assert (job.team, job.slurm_account) == (None, "")  # alice's group "vfx" is not a team here
    assert "--account" not in render_script(sbatch_spec(job, n_tasks=1))
    assert 'name="team"' not in alice.get(reverse("job-new")).content.decode()


def test_the_api_takes_a_team_by_its_account(owner, template, jpeg_bytes, vfx, post):
    api, _key = token_client(owner)
    files = {"consent": "true", "template": template.slug, "source": image("face.jpg", jpeg_bytes)}
    r = api.post("/api/v1/jobs", {**files, "targets": image("p.jpg", jpeg_bytes), "team": "vfx"})
    assert r.status_code == 201, r.content
    assert Job.objects.get(pk=r.json()["id"]).team == vfx
    assert api.get(r.json()["url"]).json()["team"] == "vfx"
    r = api.post("/api/v1/jobs", {**files, "source": image("face.jpg", jpeg_bytes),
                                  "targets": image("p.jpg", jpeg_bytes), "team": "nobodys"})
    assert r.status_code == 400 and r.json()["field"] == "team"


# ---- the account, made on the cluster once ------------------------------------------------------------

class Cluster:
    """The cluster's accounting as the state script and sacctmgr see it."""

    def __init__(self, refuse: bool = False):
        self.accounts: set[str] = set()
        self.refuse = refuse
        self.asked = 0

    def answer(self, argv):
        if argv[0] == "sh" and "ClusterName" in argv[2]:
            self.asked += 1
            return STATE + "".join(f"ffportal|{a}|ffportal|high,normal,urgent|normal\n" for a in self.accounts)
        if argv[0] == "sacctmgr":
            if self.refuse:
                return (1, "", " Access/permission denied\n")
            if argv[3] == "user":
                self.accounts.add(argv[5].removeprefix("account="))
            return ""
        if argv[0] == "sbatch":
            return "4242\n"
        return None


def test_the_teams_account_is_made_before_its_first_job_and_asked_once(fake_ssh, alice, template, jpeg_bytes,
                                                                       vfx):
    slurm = Cluster()
    runner = fake_ssh(on_run=slurm.answer, on_batch={"squeue": "", "*": (1, "", "")})
    job = start(alice, template, jpeg_bytes, team=vfx.pk)
    assert submit_job(str(job.id)) == "4242"
    made = [c for c in runner.commands if c[0] == "sacctmgr"]
    assert made[0][:5] == ["sacctmgr", "-i", "add", "account", "vfx"]
    assert "qos=high,normal,urgent" in made[1] and "defaultqos=normal" in made[1]
    vfx.refresh_from_db()
    assert list(vfx.accounts_made) == [template.cluster.slug]
    asked = slurm.asked
    second = start(alice, template, jpeg_bytes, team=vfx.pk)
    submit_job(str(second.id))
    assert slurm.asked == asked  # once per team and cluster


@pytest.mark.parametrize("language, words", [
    ("en", "The cluster does not let the portal set up your team vfx there. Nothing ran"),
    ("zh-hans", "集群不允许门户在那里为您的团队 vfx 做好设置。任务没有运行"),
])
def test_a_cluster_that_refuses_the_account_fails_the_job_in_plain_words(fake_ssh, alice, template, jpeg_bytes,
                                                                         vfx, language, words):
    fake_ssh(on_run=Cluster(refuse=True).answer, on_batch={"squeue": "", "*": (1, "", "")})
    alice.cookies["django_language"] = language
    job = start(alice, template, jpeg_bytes, team=vfx.pk)
    assert submit_job(str(job.id)) is None
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and words in job.error
