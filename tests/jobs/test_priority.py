"""Priorities: admin-set QOS levels and group priorities decide a job's Slurm QOS at Start
(jobs.job.priority.qos_for), frozen in its snapshot and written into its batch script; the admin pages."""
import pytest
from django.contrib.auth.models import Group

from jobs.job.priority import qos_for, qos_words
from jobs.job.start import start_job
from jobs.job.submit import sbatch_spec
from jobs.models import GroupPriority, QosLevel

from .api_helpers import image


@pytest.fixture
def admin_client(client, staff):
    client.force_login(staff)
    return client


@pytest.fixture
def levels(db):
    return {name: QosLevel.objects.create(name=name, label=label, rank=rank)
            for name, label, rank in (("normal", "normal", 10), ("high", "high", 20), ("urgent", "urgent", 30))}


def test_it_runs_at_the_templates_qos_when_no_group_has_a_priority(owner, template, levels):
    template.qos = "high"
    assert qos_for(owner, template) == "high"
    template.qos = ""
    assert qos_for(owner, template) == ""  # the cluster's default


def test_a_groups_higher_level_wins_over_the_templates(owner, team, template, levels):
    GroupPriority.objects.create(group=team, qos=levels["urgent"])
    template.qos = "high"
    assert qos_for(owner, template) == "urgent"


def test_the_template_wins_when_it_ranks_higher_than_the_group(owner, team, template, levels):
    GroupPriority.objects.create(group=team, qos=levels["normal"])
    template.qos = "urgent"
    assert qos_for(owner, template) == "urgent"
    template.qos = ""
    assert qos_for(owner, template) == "normal"  # no template QOS: the group's


def test_the_best_of_several_groups_counts_and_other_users_are_not_affected(owner, stranger, team, template, levels):
    night = Group.objects.create(name="night-shift")
    owner.groups.add(night)
    GroupPriority.objects.create(group=team, qos=levels["high"])
    GroupPriority.objects.create(group=night, qos=levels["urgent"])
    template.qos = "normal"
    assert qos_for(owner, template) == "urgent"
    assert qos_for(stranger, template) == "normal"


def test_an_unlisted_template_qos_ranks_below_every_listed_level(owner, team, template, levels):
    GroupPriority.objects.create(group=team, qos=levels["normal"])
    template.qos = "scavenger"
    assert qos_for(owner, template) == "normal"


def test_plain_words_for_a_qos(levels):
    assert qos_words("urgent") == "urgent"
    assert qos_words("") == "normal"
    assert qos_words("scavenger") == "scavenger"


def test_start_freezes_the_qos_in_the_job_and_its_batch_script(owner, team, template, levels, jpeg_bytes):
    GroupPriority.objects.create(group=team, qos=levels["urgent"])
    job = start_job(user=owner, template=template, sources=[image("face.jpg", jpeg_bytes)], consent=True,
                    target_files=[image("a.jpg", jpeg_bytes)])
    # The admin lowers the group afterwards: the job already started keeps its QOS.
    GroupPriority.objects.filter(group=team).update(qos=levels["normal"])
    job.refresh_from_db()
    assert job.snapshot.qos == "urgent"
    spec = sbatch_spec(job, n_tasks=1)
    assert (spec.qos, spec.requeue, spec.reservation) == ("urgent", True, "")


def test_admins_list_and_add_levels_with_the_rule_explained(admin_client, team):
    r = admin_client.get("/admin/jobs/qoslevel/add/")
    assert r.status_code == 200
    assert "higher-ranked of its template" in r.content.decode()
    r = admin_client.post("/admin/jobs/qoslevel/add/", {
        "name": "urgent", "label": "urgent", "rank": "30",
        "groups-TOTAL_FORMS": "1", "groups-INITIAL_FORMS": "0", "groups-MIN_NUM_FORMS": "0",
        "groups-MAX_NUM_FORMS": "1000", "groups-0-group": str(team.pk)})
    assert r.status_code == 302, r.content.decode()[:2000]
    assert GroupPriority.objects.get(group=team).qos.name == "urgent"
    assert "urgent" in admin_client.get("/admin/jobs/qoslevel/").content.decode()


def test_a_qos_name_slurm_could_not_read_is_refused(admin_client):
    r = admin_client.post("/admin/jobs/qoslevel/add/", {
        "name": "urgent; rm", "label": "urgent", "rank": "30",
        "groups-TOTAL_FORMS": "0", "groups-INITIAL_FORMS": "0", "groups-MIN_NUM_FORMS": "0",
        "groups-MAX_NUM_FORMS": "1000"})
    assert r.status_code == 200 and "is not a Slurm QOS name" in r.content.decode()
    assert not QosLevel.objects.exists()
