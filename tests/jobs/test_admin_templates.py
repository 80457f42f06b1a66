"""Templates in the admin: validation on save, the cluster check (a warning when the cluster does
not answer), the "Preview sbatch script" page, and job snapshots that later edits never touch.

The cluster check's seam is `jobs.clusters.survey.survey_profile`; here it is either the fixture
profile's (its key is not a real key, so the check fails at once, without any network) or a survey
read from a real `sinfo --json` capture. The real cluster is in test_admin_cluster.py.
"""
import html
import json
import re
import socket
from pathlib import Path

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

import cluster
from cluster import ClusterUnreachable, parse_scontrol_partitions, parse_sinfo
from jobs.admin.templates import preview_script
from jobs.clusters.survey import ClusterSurvey, survey
from jobs.models import ClusterProfile, Job, QosLevel, Template

from .admin_helpers import template_form
from .api_helpers import make_job, token_client

SAMPLES = Path(__file__).parents[1] / "cluster" / "samples" / "22.05"


@pytest.fixture
def admin_client(client, staff):
    client.force_login(staff)
    return client


@pytest.fixture
def real_survey(monkeypatch):
    """The cluster as the local one answered: partitions gpu and cpu on node vm with 2 h200 GPUs."""
    found = ClusterSurvey(nodes=parse_sinfo((SAMPLES / "sinfo.json").read_text()),
                          partitions=parse_scontrol_partitions((SAMPLES / "scontrol_partitions.txt").read_text()))
    monkeypatch.setattr("jobs.admin.templates.survey_profile", lambda profile, fresh=False: found)
    return found


def errors_of(response) -> dict:
    assert response.status_code == 200, "expected the form back with errors"
    return response.context["adminform"].form.errors


def save(admin_client, template, **changes):
    return admin_client.post(reverse("admin:jobs_template_change", args=[template.pk]), template_form(template, **changes))


# ---- Template.clean(): what Slurm would refuse ----

@pytest.mark.parametrize("field, value, message", [
    ("time_limit", "ninety minutes", "Write the time limit in words, such as “20 minutes”"),
    ("time_limit", "0", "It must be longer than zero"),
    ("time_limit", "0 minutes", "It must be longer than zero"),
    ("mem", "4 gigs", "must be a positive amount like 4G"),
    ("mem", "0G", "must be a positive amount"),
    ("gpu_type", "h200:x", "must look like gpu:h200:1"),
    ("gpu_type", "h200 x", "must look like gpu:h200:1"),
    ("chunk_size", 0, "at least one image"),
    ("array_limit", 0, "at least 1 task at once"),
    ("partition", "gpu;rm", "is not a Slurm partition name"),
    ("qos", "high prio", "is not a Slurm QOS name"),
])
def test_it_refuses_what_slurm_would_refuse(admin_client, template, field, value, message):
    errors = errors_of(save(admin_client, template, **{field: value}))
    assert any(message in e for e in errors[field]), errors
    template.refresh_from_db()
    assert template.time_limit == "00:10:00" and template.mem == "2G" and template.chunk_size == 2


def test_it_validates_the_model_outside_the_admin_too(profile):
    from django.core.exceptions import ValidationError

    bad = Template(name="Bad", slug="bad", cluster=profile, partition="gpu", gpu_type="h200:x", gpu_count=1,
                   time_limit="90 minutes or so", mem="4 gigs", chunk_size=1)
    with pytest.raises(ValidationError) as caught:
        bad.full_clean()
    assert {"time_limit", "mem", "gpu_type"} <= set(caught.value.message_dict)


def test_it_accepts_every_slurm_time_and_memory_form(admin_client, template, real_survey):
    for time_limit, mem in (("30", "500M"), ("1-12:00:00", "4G"), ("2-00", "1024"), ("45:00", "1T")):
        r = save(admin_client, template, time_limit=time_limit, mem=mem)
        assert r.status_code == 302, r.context["adminform"].form.errors
        template.refresh_from_db()
        assert (template.time_limit, template.mem) == (time_limit, mem)


# ---- the cluster check ----

def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # free once closed: connecting to it is refused


def well_formed_keys() -> tuple[str, str]:
    """(private key text, public key "type base64") of a fresh ed25519 key."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    return private, public


def test_it_saves_with_a_warning_when_the_cluster_does_not_answer(admin_client, template, profile):
    port = closed_port()
    private, public = well_formed_keys()
    ClusterProfile.objects.filter(pk=profile.pk).update(port=port, private_key=private,
                                                        known_hosts=f"[127.0.0.1]:{port} {public}")
    r = save(admin_client, template, partition="no-such-partition")
    assert r.status_code == 302
    template.refresh_from_db()
    assert template.partition == "no-such-partition"
    (message,) = [str(m) for m in get_messages(r.wsgi_request) if m.level_tag == "warning"]
    assert message.startswith("Saved without checking the partition and GPU type on the cluster Local: "
                              "Cluster unreachable: ")
    assert f"127.0.0.1:{port}: connection refused" in message


def test_it_saves_with_a_warning_when_the_profile_cannot_log_in(admin_client, template):
    # The fixture profile's key and host key are not real ones: refused before any packet is sent.
    r = save(admin_client, template, time_limit="00:20:00")
    assert r.status_code == 302
    (message,) = [str(m) for m in get_messages(r.wsgi_request) if m.level_tag == "warning"]
    assert "Saved without checking" in message and "Host key rejected" in message


def test_it_saves_with_a_warning_when_the_check_itself_breaks(admin_client, template, monkeypatch):
    def broken(profile, fresh=False):
        raise RuntimeError("paramiko had a bad day")

    monkeypatch.setattr("jobs.admin.templates.survey_profile", broken)
    r = save(admin_client, template, time_limit="00:20:00")
    assert r.status_code == 302
    (message,) = [str(m) for m in get_messages(r.wsgi_request) if m.level_tag == "warning"]
    assert "Unexpected error: RuntimeError: paramiko had a bad day" in message


def test_it_refuses_a_partition_the_cluster_does_not_have(admin_client, template, real_survey):
    errors = errors_of(save(admin_client, template, partition="a100-big"))
    assert errors["partition"] == ["The cluster has no partition a100-big; it has: gpu, cpu."]


def test_it_refuses_a_gpu_type_the_partition_does_not_have(admin_client, template, real_survey):
    errors = errors_of(save(admin_client, template, gpu_type="a100"))
    assert errors["gpu_type"] == ["No node of partition gpu has a100 GPUs; its GPU types: h200."]


def test_it_refuses_more_gpus_per_task_than_a_node_has(admin_client, template, real_survey):
    errors = errors_of(save(admin_client, template, gpu_count=4))
    assert "4 GPUs per task, but the nodes of partition gpu have at most 2 each" in errors["gpu_count"][0]


def test_it_says_the_cluster_check_passed(admin_client, template, real_survey):
    r = save(admin_client, template, partition="cpu", gpu_type="", gpu_count=0)
    assert r.status_code == 302
    messages = [str(m) for m in get_messages(r.wsgi_request)]
    assert any("partition cpu exists" in m for m in messages), messages


# ---- preview ----

def test_it_previews_the_batch_script_of_a_sample_job(admin_client, template):
    Template.objects.filter(pk=template.pk).update(chunk_size=10, array_limit=4, qos="normal")
    change = admin_client.get(reverse("admin:jobs_template_change", args=[template.pk])).content.decode()
    preview_url = reverse("admin:jobs_template_preview", args=[template.pk])
    assert f'href="{preview_url}"' in change and "Preview sbatch script" in change
    r = admin_client.get(preview_url)
    assert r.status_code == 200
    body = r.content.decode()
    script = r.context["script"]
    assert "<pre" in body and "#SBATCH --array=0-9%4" in body
    for line in ("#SBATCH --partition=gpu", "#SBATCH --time=00:10:00", "#SBATCH --mem=2G",
                 "#SBATCH --gres=gpu:h200:1", "#SBATCH --array=0-9%4", "#SBATCH --qos=normal",
                 "#SBATCH --cpus-per-task=1"):
        assert line in script.splitlines(), script
    assert "100 targets" in body and "10 tasks" in body
    assert Job.objects.count() == 0  # the sample job is never saved


def test_it_previews_exactly_what_a_submission_renders(template, owner):
    """The preview goes through jobs.job.submit.sbatch_spec: the same directives as a real job's script."""
    from cluster import render_script
    from jobs.job.submit import sbatch_spec

    job = make_job(owner, template)
    real = render_script(sbatch_spec(job, 50))
    sample = preview_script(template)  # chunk size 2: 100 targets, 50 tasks
    strip_id = lambda text, job_id: text.replace(str(job_id), "<id>")  # noqa: E731
    assert strip_id(sample, "00000000-0000-0000-0000-000000000000") == strip_id(real, job.id)


def test_it_previews_the_saved_values_not_the_unsaved_form(admin_client, template):
    errors_of(save(admin_client, template, time_limit="not a time"))
    script = admin_client.get(reverse("admin:jobs_template_preview", args=[template.pk])).context["script"]
    assert "#SBATCH --time=00:10:00" in script


def test_it_shows_why_an_old_template_cannot_make_a_script(admin_client, template):
    Template.objects.filter(pk=template.pk).update(time_limit="forever")  # saved before validation existed
    r = admin_client.get(reverse("admin:jobs_template_preview", args=[template.pk]))
    assert r.status_code == 200 and r.context["script"] == ""
    assert "cannot make a batch script" in r.content.decode() and "forever" in r.content.decode()


@pytest.mark.parametrize("who", ["owner", "stranger"])
def test_it_keeps_the_preview_from_non_staff(client, request, template, who):
    client.force_login(request.getfixturevalue(who))
    r = client.get(reverse("admin:jobs_template_preview", args=[template.pk]))
    assert r.status_code == 302 and r["Location"].startswith(reverse("admin:login"))


# ---- snapshots ----

def test_it_never_changes_a_submitted_jobs_snapshot(admin_client, owner, template, real_survey):
    job = make_job(owner, template, targets=3)
    before = dict(job.template_snapshot)
    api = token_client(owner)[0]
    reported = api.get(f"/api/v1/jobs/{job.id}").json()
    r = save(admin_client, template, name="Renamed", slug="renamed", time_limit="02:00:00", mem="16G", chunk_size=50,
             gpu_count=2)
    assert r.status_code == 302, r.context and r.context["adminform"].form.errors
    template.refresh_from_db()
    assert (template.slug, template.time_limit, template.chunk_size) == ("renamed", "02:00:00", 50)

    job.refresh_from_db()
    assert job.template_snapshot == before
    assert (before["time_limit"], before["mem"], before["chunk_size"], before["gres"]) == ("00:10:00", "2G", 2, "gpu:h200:1")
    assert api.get(f"/api/v1/jobs/{job.id}").json() == reported
    assert reported["template"] == "quick-gpu"
    # What the job would be (re)submitted with still comes from its snapshot.
    from jobs.job.submit import sbatch_spec

    spec = sbatch_spec(job, 2)
    assert (spec.time_limit, spec.mem, spec.gres) == ("00:10:00", "2G", "gpu:h200:1")


# ---- partition, GPU type and priority offered as lists in plain words ----

def cluster_of_three_computers() -> dict:
    """sinfo and scontrol as a cluster answers them: computers gpu1 and gpu2 (2 H200 GPUs each) in
    partition gpu (the default), cpu1 (no GPU) in partition cpu, and partition debug, down."""
    data = json.loads((SAMPLES / "sinfo.json").read_text())
    node = data["nodes"][0]
    data["nodes"] = [{**node, "name": "gpu1", "partitions": ["gpu"]}, {**node, "name": "gpu2", "partitions": ["gpu"]},
                     {**node, "name": "cpu1", "partitions": ["cpu"], "gres": "", "gres_used": ""}]
    gpu, cpu = (SAMPLES / "scontrol_partitions.txt").read_text().splitlines()[:2]
    debug = cpu.replace("PartitionName=cpu", "PartitionName=debug").replace("State=UP", "State=DOWN")
    return {"sinfo": json.dumps(data), "scontrol": "\n".join([gpu, cpu, debug]) + "\n"}


@pytest.fixture
def cluster_answers(fake_ssh, monkeypatch):
    """The template's cluster answers through the SSH seam (the admin's survey reads it there)."""
    runner = fake_ssh(on_batch=cluster_of_three_computers())
    monkeypatch.setattr("jobs.admin.templates.survey_profile",
                        lambda profile, fresh=False: survey(cluster.runner_for(profile)))
    return runner


def change_page(admin_client, template, language="en") -> str:
    admin_client.cookies["django_language"] = language
    r = admin_client.get(reverse("admin:jobs_template_change", args=[template.pk]))
    assert r.status_code == 200
    return html.unescape(r.content.decode())


def options(body: str, name: str) -> list[tuple[str, str, bool]]:
    """(value, words, selected) of each choice of the <select> named `name`."""
    found = re.search(rf'<select name="{name}"[^>]*>(.*?)</select>', body, re.S)
    assert found, f"no list for {name}"
    return [(value, words, bool(selected))
            for value, selected, words in re.findall(r'<option value="([^"]*)"( selected)?>([^<]*)</option>',
                                                     found.group(1))]


@pytest.mark.parametrize("language, where, partitions, gpu_types", [
    ("en", "Where it runs (partition)",
     [("gpu", "gpu — 2 computers, 4 × H200 GPUs (the cluster's default)", True),
      ("cpu", "cpu — 1 computer, no GPUs", False),
      ("debug", "debug — 0 computers, no GPUs (not taking jobs now)", False)],
     [("", "Any type the partition has", False), ("h200", "H200 — 4 GPUs (partitions gpu)", True)]),
    ("zh-hans", "运行位置（分区）",
     [("gpu", "gpu — 2 台计算机，4 块 H200 GPU（集群的默认分区）", True),
      ("cpu", "cpu — 1 台计算机，没有 GPU", False),
      ("debug", "debug — 0 台计算机，没有 GPU（目前不接受任务）", False)],
     [("", "分区里的任意型号", False), ("h200", "H200 — 4 块 GPU（分区 gpu）", True)]),
])
def test_it_offers_what_the_cluster_has_in_plain_words(admin_client, template, cluster_answers, language, where,
                                                       partitions, gpu_types):
    body = change_page(admin_client, template, language)
    assert options(body, "partition") == partitions
    assert options(body, "gpu_type") == gpu_types
    assert where in body
    assert cluster_answers.batches == [[["sinfo", "--json"], ["scontrol", "show", "partition", "--oneliner"]]]


def test_it_saves_a_partition_chosen_from_the_list(admin_client, template, cluster_answers):
    r = save(admin_client, template, partition="cpu", gpu_type="", gpu_count=0)
    assert r.status_code == 302, r.context and r.context["adminform"].form.errors
    template.refresh_from_db()
    assert (template.partition, template.gpu_type) == ("cpu", "")
    assert len(cluster_answers.batches) == 1  # the list and the check share one question to the cluster


@pytest.mark.parametrize("language, gone", [("en", "a100-big — no longer on the cluster"),
                                            ("zh-hans", "a100-big — 集群上已没有")])
def test_it_keeps_a_value_the_cluster_no_longer_has(admin_client, template, cluster_answers, language, gone):
    Template.objects.filter(pk=template.pk).update(partition="a100-big", gpu_type="a100")
    body = change_page(admin_client, template, language)
    assert ("a100-big", gone, True) in options(body, "partition")
    assert options(body, "partition").count(("a100-big", gone, True)) == 1
    assert [o for o in options(body, "gpu_type") if o[2]] == [("a100", gone.replace("a100-big", "a100"), True)]


@pytest.mark.parametrize("language, note", [
    ("en", "The cluster Local did not answer just now, so its list cannot be shown: type the name."),
    ("zh-hans", "集群 Local 刚才没有应答，无法列出它的选项：请直接输入名称。"),
])
def test_it_lets_the_admin_type_the_names_when_the_cluster_does_not_answer(admin_client, template, fake_ssh,
                                                                            monkeypatch, language, note):
    fake_ssh(on_batch=ClusterUnreachable("127.0.0.1:2222: connection refused"))
    monkeypatch.setattr("jobs.admin.templates.survey_profile",
                        lambda profile, fresh=False: survey(cluster.runner_for(profile)))
    body = change_page(admin_client, template, language)
    assert re.search(r'<input type="text" name="partition" value="gpu"', body)
    assert re.search(r'<input type="text" name="gpu_type" value="h200"', body)
    assert note in body and '<select name="partition"' not in body

    admin_client.cookies["django_language"] = "en"
    r = save(admin_client, template, partition="brand-new")
    assert r.status_code == 302
    template.refresh_from_db()
    assert template.partition == "brand-new"
    (message,) = [str(m) for m in get_messages(r.wsgi_request) if m.level_tag == "warning"]
    assert "Saved without checking" in message and "connection refused" in message


@pytest.mark.parametrize("language, label, levels, kept", [
    ("en", "Priority (QOS)", [("", "Normal: the cluster's default"), ("urgent", "urgent (QOS urgent)"),
                              ("high", "high (QOS high)")], "legacy — not one of the priority levels"),
    ("zh-hans", "优先级（QOS）", [("", "普通：集群的默认优先级"), ("urgent", "urgent（QOS urgent）"),
                                ("high", "high（QOS high）")], "legacy — 不在优先级列表中"),
])
def test_it_offers_the_priority_levels(admin_client, template, cluster_answers, language, label, levels, kept):
    QosLevel.objects.create(name="high", label="high", rank=20)
    QosLevel.objects.create(name="urgent", label="urgent", rank=30)
    Template.objects.filter(pk=template.pk).update(qos="legacy")
    body = change_page(admin_client, template, language)
    assert label in body
    assert options(body, "qos") == [(v, w, False) for v, w in levels] + [("legacy", kept, True)]

    r = save(admin_client, template, qos="urgent")
    assert r.status_code == 302
    template.refresh_from_db()
    assert template.qos == "urgent"


def test_a_new_template_is_offered_the_only_clusters_partitions(admin_client, profile, cluster_answers):
    r = admin_client.get(reverse("admin:jobs_template_add"))
    body = html.unescape(r.content.decode())
    assert options(body, "partition")[:2] == [("", "Choose where it runs", True),
                                              ("gpu", "gpu — 2 computers, 4 × H200 GPUs (the cluster's default)",
                                               False)]
    assert re.search(rf'<option value="{profile.pk}" selected>', body)
