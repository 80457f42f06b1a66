"""The Django admin: profiles never show their private key back; jobs and tokens are read-only."""
import pytest
from django.urls import reverse

from jobs.models import ApiToken, ClusterProfile, Job, Target, Task

from .admin_helpers import profile_form

KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAASECRETSECRET\n-----END OPENSSH PRIVATE KEY-----\n"


@pytest.fixture
def admin_client(client, staff):
    client.force_login(staff)
    return client


@pytest.fixture
def job(owner, template):
    job = Job.objects.create(owner=owner, template=template, template_snapshot=template.snapshot().to_json(),
                             cluster=template.cluster, name="Admin view", slurm_job_id="777")
    Task.objects.create(job=job, index=0, state="RUNNING", node="gpu-node-1")
    Target.objects.create(job=job, index=0, name="a.jpg", output_name="a.jpg")
    return job


@pytest.mark.parametrize("model", ["clusterprofile", "template", "job", "apitoken"])
def test_it_lists_every_model_for_staff(admin_client, job, model):
    assert admin_client.get(reverse(f"admin:jobs_{model}_changelist")).status_code == 200


@pytest.mark.parametrize("who", ["owner", "colleague", "stranger"])
def test_it_keeps_non_staff_out_of_the_admin(client, request, who):
    client.force_login(request.getfixturevalue(who))
    r = client.get(reverse("admin:jobs_job_changelist"))
    assert r.status_code == 302 and "/admin/login/" in r["Location"]


def test_it_never_shows_the_private_key(admin_client, profile):
    profile.private_key = KEY
    profile.save()
    for url in (reverse("admin:jobs_clusterprofile_changelist"),
                reverse("admin:jobs_clusterprofile_change", args=[profile.pk])):
        body = admin_client.get(url).content.decode()
        assert "SECRETSECRET" not in body
    body = admin_client.get(reverse("admin:jobs_clusterprofile_changelist")).content.decode()
    assert "127.0.0.1" in body and "2222" in body and "/srv/ffportal/work" in body


def change_data(profile, **overrides) -> dict:
    return profile_form(profile, **overrides)


def test_it_keeps_the_key_when_the_field_is_left_empty(admin_client, profile):
    profile.private_key = KEY
    profile.save()
    r = admin_client.post(reverse("admin:jobs_clusterprofile_change", args=[profile.pk]),
                          change_data(profile, host="login.example.org"))
    assert r.status_code == 302, r.content.decode()[:2000]
    profile.refresh_from_db()
    assert profile.host == "login.example.org" and profile.private_key == KEY


def test_it_replaces_the_key_when_a_new_one_is_pasted(admin_client, profile):
    new_key = KEY.replace("SECRETSECRET", "NEWKEYNEWKEY")
    r = admin_client.post(reverse("admin:jobs_clusterprofile_change", args=[profile.pk]),
                          change_data(profile, private_key=new_key))
    assert r.status_code == 302
    profile.refresh_from_db()
    assert profile.private_key == new_key


def test_it_requires_a_key_for_a_new_profile(admin_client, profile):
    data = change_data(profile, name="Other", slug="other")
    r = admin_client.post(reverse("admin:jobs_clusterprofile_add"), data)
    assert r.status_code == 200 and "needs the SSH private key" in r.content.decode()
    assert not ClusterProfile.objects.filter(slug="other").exists()


def test_it_lists_templates_with_their_slurm_settings(admin_client, template):
    body = admin_client.get(reverse("admin:jobs_template_changelist")).content.decode()
    assert "Quick GPU" in body and "quick-gpu" in body and "gpu:h200:1" in body and "00:10:00" in body
    assert admin_client.get(reverse("admin:jobs_template_changelist") + f"?cluster__id__exact={template.cluster_id}").status_code == 200


def test_it_shows_jobs_read_only_with_tasks_and_targets(admin_client, job):
    assert admin_client.get(reverse("admin:jobs_job_add")).status_code == 403
    body = admin_client.get(reverse("admin:jobs_job_change", args=[job.pk])).content.decode()
    assert "gpu-node-1" in body and "a.jpg" in body
    assert 'name="name"' not in body  # no editable job fields
    assert 'name="tasks-0-state"' not in body


def test_it_finds_a_job_by_id_name_or_owner(admin_client, job, colleague, template):
    other = Job.objects.create(owner=colleague, template=template, cluster=template.cluster, name="Other")
    url = reverse("admin:jobs_job_changelist")
    for term in (str(job.id), "Admin view", "alice"):
        r = admin_client.get(url, {"q": term})
        assert list(r.context["cl"].result_list) == [job], term
    assert other not in admin_client.get(url, {"q": str(job.id)}).context["cl"].result_list


def test_it_lists_tokens_by_prefix_never_the_key(admin_client, owner):
    token, key = ApiToken.issue(owner)
    body = admin_client.get(reverse("admin:jobs_apitoken_changelist")).content.decode()
    assert token.prefix in body and "alice" in body
    assert key not in body and token.key_hash not in body
    detail = admin_client.get(reverse("admin:jobs_apitoken_change", args=[token.pk])).content.decode()
    assert key not in detail and token.key_hash not in detail
    assert admin_client.get(reverse("admin:jobs_apitoken_add")).status_code == 403
