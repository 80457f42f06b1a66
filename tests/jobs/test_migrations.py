"""Data migrations keep what jobs already hold: the attempt history moved from a JSON list on the
job (before 0005) to JobAttempt rows, and back on a rollback."""
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("jobs", "0004_watcher_log_wait_fetch")]
AFTER = [("jobs", "0005_attempts_and_choices")]

HISTORY = [
    {"attempt": 1, "slurm_job_id": "500", "indexes": [0, 1, 2], "array": "0-2", "mem": "2G", "why": "", "auto": False,
     "by": "", "at": "2026-11-01T10:00:00+00:00", "ended": {"2": "OUT_OF_MEMORY"}},
    {"attempt": 2, "slurm_job_id": "501", "indexes": [2], "array": "2", "mem": "4G",
     "why": "Ran out of memory; retried automatically with 4G.", "auto": True, "by": "", "kinds": ["oom"],
     "at": "2026-11-01T10:05:00+00:00", "ended": {}},
]


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_the_attempt_history_becomes_rows_and_back():
    old = migrate(BEFORE)
    User = old.get_model("auth", "User")
    Profile, Job = old.get_model("jobs", "ClusterProfile"), old.get_model("jobs", "Job")
    owner = User.objects.create(username="alice")
    profile = Profile.objects.create(name="P", slug="p", host="h", username="u", private_key="k", known_hosts="k",
                                     work_root="/w")
    job = Job.objects.create(owner=owner, cluster=profile, attempt=2, attempts=HISTORY)
    plain = Job.objects.create(owner=owner, cluster=profile)

    new = migrate(AFTER)
    rows = list(new.get_model("jobs", "JobAttempt").objects.filter(job_id=job.pk).order_by("number"))
    assert [(r.number, r.slurm_job_id, r.indexes, r.mem, r.auto, r.kinds, r.ended) for r in rows] == [
        (1, "500", [0, 1, 2], "2G", False, [], {"2": "OUT_OF_MEMORY"}),
        (2, "501", [2], "4G", True, ["oom"], {})]
    assert rows[1].why == HISTORY[1]["why"] and rows[1].at.isoformat() == HISTORY[1]["at"]
    assert not new.get_model("jobs", "JobAttempt").objects.filter(job_id=plain.pk).exists()

    back = migrate(BEFORE)
    restored = back.get_model("jobs", "Job").objects.get(pk=job.pk).attempts
    assert [(r["attempt"], r["slurm_job_id"], r["mem"], r["kinds"]) for r in restored] == [
        (1, "500", "2G", []), (2, "501", "4G", ["oom"])]
    migrate(executor_leaf())


def executor_leaf():
    executor = MigrationExecutor(connection)
    return executor.loader.graph.leaf_nodes()


@pytest.mark.django_db(transaction=True)
def test_a_team_job_made_before_team_folders_keeps_its_folder_and_a_new_one_gets_the_prefix():
    old = migrate([("jobs", "0031_team_usage")])
    User, Group = old.get_model("auth", "User"), old.get_model("auth", "Group")
    Profile, Job, Team = (old.get_model("jobs", name) for name in ("ClusterProfile", "Job", "Team"))
    owner = User.objects.create(username="alice")
    profile = Profile.objects.create(name="P", slug="p", host="h", username="u", private_key="k", known_hosts="k",
                                     work_root="/w")
    team = Team.objects.create(group=Group.objects.create(name="VFX"), slurm_account="vfx")
    before = Job.objects.create(owner=owner, cluster=profile, team=team, slurm_account="vfx")
    migrate(executor_leaf())
    from jobs.models import Job as NewJob  # the model as the code reads it, after the migration
    assert NewJob.objects.get(pk=before.pk).folder.root == "/w/jobs/" + str(before.pk)
    made = NewJob.objects.create(owner_id=owner.pk, cluster_id=profile.pk, team_id=team.pk, slurm_account="vfx")
    assert made.folder.root == f"/w/teams/vfx/jobs/{made.pk}"


@pytest.mark.django_db(transaction=True)
def test_a_job_made_before_video_counts_gets_its_videos_counted_once():
    old = migrate([("jobs", "0034_power_saving")])
    User = old.get_model("auth", "User")
    Profile, Job, Target = (old.get_model("jobs", name) for name in ("ClusterProfile", "Job", "Target"))
    owner = User.objects.create(username="alice")
    profile = Profile.objects.create(name="P", slug="p", host="h", username="u", private_key="k", known_hosts="k",
                                     work_root="/w")
    mixed = Job.objects.create(owner=owner, cluster=profile, total=4)
    for i, name in enumerate(["a.jpg", "b.MP4", "c.webm", "d.png"]):
        Target.objects.create(job=mixed, index=i, name=name, output_name=name, task_index=0)
    photos = Job.objects.create(owner=owner, cluster=profile, total=1)
    Target.objects.create(job=photos, index=0, name="x.jpg", output_name="x.jpg", task_index=0)
    migrate(executor_leaf())
    from jobs.models import Job as NewJob
    from jobs.web.views.pages import media_words
    assert (NewJob.objects.get(pk=mixed.pk).videos, NewJob.objects.get(pk=photos.pk).videos) == (2, 0)
    assert media_words(NewJob.objects.get(pk=mixed.pk)) == "4 (2 photos and 2 videos)"
