"""What an admin writes about templates and clusters, as users read it: the Chinese name and
description where the admin wrote them (the English otherwise), template cards in plain words with
no invented speed, a time limit written in words, and which template New job starts on."""
import io
import json
import re

import pytest
from django.core import mail
from django.core.management import call_command
from django.urls import reverse
from django.utils import translation

from jobs.bilingual import in_language
from jobs.models import ClusterProfile, JobStatus, Template
from jobs.models.template import time_limit_from_words

from .admin_helpers import template_form
from .api_helpers import make_job, token_client

ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-hans"}
#: what a template card must never say: the scheduler's words, and a time nobody measured
JARGON = ("per task", "batch of", "GPU-hours", "GPU 小时", "00:10:00", "gres", "about 6 minutes", "约 6 分钟")


@pytest.fixture
def bilingual(template):
    Template.objects.filter(pk=template.pk).update(name_zh="快速显卡", description_zh="使用显卡，适合大文件夹。",
                                                   description="Uses a graphics card; good for big folders.")
    template.refresh_from_db()
    return template


def new_job_page(client, user, **headers) -> str:
    client.force_login(user)
    return client.get(reverse("job-new"), **headers).content.decode()


def card(body: str, slug_or_name: str) -> str:
    start = body.index(f'data-name="{slug_or_name}"')
    return body[start:body.index("</label>", start)]


def chosen_template(body: str) -> str:
    """The name on the card whose radio is checked."""
    checked = [c for c in body.split('<label class="template-card"')[1:] if " checked" in c.split("</label>")[0]]
    assert len(checked) == 1, "exactly one template is chosen"
    return re.search(r'data-name="([^"]*)"', checked[0]).group(1)


# ---- the one rule: Chinese when written, else English ----

@pytest.mark.parametrize("language, chinese, shown", [
    ("zh-hans", "快速显卡", "快速显卡"), ("zh-hans", "  ", "Quick GPU"), ("zh-hans", "", "Quick GPU"),
    ("en", "快速显卡", "Quick GPU"),
])
def test_it_picks_the_readers_language_and_falls_back_to_english(language, chinese, shown):
    assert in_language("Quick GPU", chinese, language) == shown
    with translation.override(language):
        assert in_language("Quick GPU", chinese) == shown


# ---- the template cards on New job ----

def test_a_card_reads_in_english_on_an_english_page(client, owner, bilingual):
    html = card(new_job_page(client, owner), "Quick GPU")
    assert "Uses a graphics card; good for big folders." in html and "快速显卡" not in html
    assert "Speed not measured yet" in html and "Uses 1 GPU (NVIDIA H200)" in html
    for word in JARGON:
        assert word not in html, word


def test_a_card_reads_in_chinese_on_a_chinese_page(client, owner, bilingual):
    body = new_job_page(client, owner, **ZH)
    html = card(body, "快速显卡")
    assert '<span class="template-name">快速显卡</span>' in html
    assert "使用显卡，适合大文件夹。" in html and "Quick GPU" not in html and "graphics card" not in html
    assert "速度尚未测量" in html and "使用 1 块 GPU（NVIDIA H200）" in html
    for word in JARGON:
        assert word not in html, word


def test_a_card_without_chinese_words_shows_the_english_ones_on_a_chinese_page(client, owner, template):
    html = card(new_job_page(client, owner, **ZH), "Quick GPU")
    assert "One GPU, ten images per task." in html  # the admin's own words, until a Chinese version is written
    assert "速度尚未测量" in html


def test_a_cpu_card_says_it_needs_no_gpu_in_both_languages(client, owner, profile):
    Template.objects.create(name="CPU", name_zh="CPU 处理", slug="cpu", cluster=profile, partition="cpu",
                            gpu_count=0, time_limit="00:30:00", chunk_size=5)
    assert "Needs no GPU" in card(new_job_page(client, owner), "CPU")
    assert "无需 GPU" in card(new_job_page(client, owner, **ZH), "CPU 处理")


# ---- the job's own pages, the API, the email: the name frozen at Start, in the reader's language ----

def test_the_job_page_and_list_show_the_name_frozen_at_start_in_each_language(client, owner, bilingual):
    job = make_job(owner, bilingual)
    Template.objects.filter(pk=bilingual.pk).update(name="Renamed", name_zh="改名")  # after Start: not the job's
    client.force_login(owner)
    for headers, name in (({}, "Quick GPU"), (ZH, "快速显卡")):
        assert f"<dd>{name}</dd>" in client.get(reverse("job-detail", args=[job.id]), **headers).content.decode()
        listing = client.get(reverse("job-list"), **headers).content.decode()
        assert name in listing and "改名" not in listing and "Renamed" not in listing


def test_the_job_finished_email_names_the_template_in_the_jobs_language(owner, bilingual, settings):
    from jobs.usage.notifications import notify_job_finished

    job = make_job(owner, bilingual, status=JobStatus.COMPLETED)
    job.language = "zh-hans"
    job.save(update_fields=["language"])
    notify_job_finished(str(job.id))
    (sent,) = mail.outbox
    assert "快速显卡" in sent.body and "Quick GPU" not in sent.body


def test_the_api_lists_both_languages_of_a_template(owner, bilingual):
    api = token_client(owner)[0]
    (listed,) = api.get("/api/v1/templates", **ZH).json()
    assert (listed["name"], listed["name_zh"]) == ("Quick GPU", "快速显卡")
    assert (listed["description"], listed["description_zh"]) == ("Uses a graphics card; good for big folders.",
                                                                  "使用显卡，适合大文件夹。")


def test_a_clusters_name_reads_in_the_readers_language(profile):
    ClusterProfile.objects.filter(pk=profile.pk).update(name_zh="本地集群")
    profile.refresh_from_db()
    with translation.override("zh-hans"):
        assert profile.shown_name == "本地集群"
    assert profile.shown_name == "Local"


# ---- the time limit, written in words ----

@pytest.mark.parametrize("words, slurm", [
    ("20 minutes", "00:20:00"), ("2 hours", "02:00:00"), ("90 min", "01:30:00"), ("1 day", "1-00:00:00"),
    ("20 分钟", "00:20:00"), ("2 小时", "02:00:00"), ("1 天", "1-00:00:00"), ("2小时30分钟", "02:30:00"),
    ("1 hour and 30 minutes", "01:30:00"), ("1 Day, 6 Hours", "1-06:00:00"), ("1.5 hours", "01:30:00"),
    ("45s", "00:00:45"),
    # Slurm's own forms are kept as written
    ("00:20:00", "00:20:00"), ("1-12:00:00", "1-12:00:00"), ("30", "30"),
])
def test_it_reads_a_time_limit_in_words(words, slurm):
    assert time_limit_from_words(words) == slurm


@pytest.mark.parametrize("words", ["", "soon", "0 minutes", "20 minutes please", "2 horas", "minutes"])
def test_it_refuses_what_is_no_duration(words):
    with pytest.raises(ValueError):
        time_limit_from_words(words)


@pytest.mark.parametrize("typed, stored", [("20 minutes", "00:20:00"), ("2 小时", "02:00:00"),
                                           ("1 hour and 30 minutes", "01:30:00")])
def test_the_admin_saves_a_time_limit_typed_in_words_in_slurms_form(client, staff, template, monkeypatch,
                                                                       typed, stored):
    monkeypatch.setattr("jobs.admin.templates.survey_profile", lambda profile, fresh=False: _raise())
    client.force_login(staff)
    r = client.post(reverse("admin:jobs_template_change", args=[template.pk]), template_form(template, time_limit=typed))
    assert r.status_code == 302, r.context["adminform"].form.errors
    template.refresh_from_db()
    assert template.time_limit == stored


def _raise():
    raise RuntimeError("no cluster in this test")


def test_the_admin_form_says_the_accepted_forms_in_both_languages_with_chinese_fields_under_english(client, staff):
    client.force_login(staff)
    english = client.get(reverse("admin:jobs_template_add")).content.decode()
    assert "“20 minutes”, “2 hours”, “1 day 6 hours”, “20 分钟” or “2 小时”" in english
    assert english.index('name="name"') < english.index('name="name_zh"') < english.index('name="slug"')
    assert english.index('name="description"') < english.index('name="description_zh"') < english.index('name="is_active"')
    assert "Chinese name (简体中文)" in english and "Chinese description (简体中文)" in english
    chinese = client.get(reverse("admin:jobs_template_add"), **ZH).content.decode()
    assert "“20 minutes”" in chinese and "“20 分钟”" in chinese and "[D-]HH:MM:SS" in chinese
    assert "中文名称（简体中文）" in chinese and "中文说明（简体中文）" in chinese
    profile_page = client.get(reverse("admin:jobs_clusterprofile_add")).content.decode()
    assert profile_page.index('name="name"') < profile_page.index('name="name_zh"') < profile_page.index('name="slug"')


# ---- which template New job starts on ----

def test_a_new_template_takes_nobodys_choice_away(client, owner, colleague, template, profile, staff, monkeypatch):
    second = Template.objects.create(name="Slow CPU", slug="slow-cpu", cluster=profile, partition="cpu",
                                     gpu_count=0, time_limit="00:30:00", order=5)
    make_job(owner, second)  # alice used the second card last
    assert chosen_template(new_job_page(client, owner)) == "Slow CPU"
    assert chosen_template(new_job_page(client, colleague)) == "Quick GPU"  # no job yet: the first card

    # An admin adds a template whose name sorts first: the add form puts it after the others.
    monkeypatch.setattr("jobs.admin.templates.survey_profile", lambda profile, fresh=False: _raise())
    client.force_login(staff)
    add_page = client.get(reverse("admin:jobs_template_add")).content.decode()
    assert re.search(r'name="order" value="6"', add_page), "a new template is put last"
    newcomer = Template(name="Aardvark", slug="aardvark", cluster=profile, partition="gpu", gpu_type="h200",
                        gpu_count=1, time_limit="00:10:00", chunk_size=2)
    r = client.post(reverse("admin:jobs_template_add"), template_form(newcomer, order=6))
    assert r.status_code == 302, r.context["adminform"].form.errors

    assert chosen_template(new_job_page(client, owner)) == "Slow CPU"
    assert chosen_template(new_job_page(client, colleague)) == "Quick GPU"


def test_the_last_template_used_falls_back_to_the_first_card_once_it_is_gone(client, owner, template, profile):
    gone = Template.objects.create(name="Retired", slug="retired", cluster=profile, partition="gpu",
                                   time_limit="00:10:00", order=2)
    make_job(owner, gone)
    Template.objects.filter(pk=gone.pk).update(is_active=False)
    assert chosen_template(new_job_page(client, owner)) == "Quick GPU"


# ---- the sample templates of `make up` ----

def test_seed_local_gives_every_template_and_cluster_chinese_words_in_plain_language(db, tmp_path, monkeypatch):
    ssh = tmp_path / "ssh"
    ssh.mkdir()
    for name in ("id_ed25519", "known_hosts", "known_hosts-second"):
        (ssh / name).write_text("[127.0.0.1]:2222 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeFakeFake\n")
    clusters = tmp_path / "clusters"
    (clusters / "images").mkdir(parents=True)
    (clusters / "slurm-24-11.json").write_text(json.dumps(
        {"slug": "slurm-24-11", "version": "24.11", "ssh_port": 2224, "known_hosts": str(ssh / "known_hosts"),
         "work_root": "/srv/ffportal/work-24-11"}))
    (clusters / "images" / "slurm-24-11.json").write_text(json.dumps({"image": "/srv/images/worker.sif"}))
    monkeypatch.setenv("FFP_STATE", str(tmp_path))
    for name in ("FFP_SSH_KEY", "FFP_SSH_KNOWN_HOSTS", "FFP_SECOND_SSH_KNOWN_HOSTS", "FFP_SECOND"):
        monkeypatch.delenv(name, raising=False)
    call_command("seed_local", "--demo-password", "demo-pass-123", stdout=io.StringIO())

    templates = list(Template.objects.all())
    assert {t.slug for t in templates} == {"gpu-batch", "cpu-small", "gpu-second", "gpu-slurm-24-11",
                                           "cpu-slurm-24-11", "apptainer-slurm-24-11", "apptainer-cpu-slurm-24-11"}
    chinese = re.compile(r"[\u4e00-\u9fff]")
    for t in templates:
        assert chinese.search(t.name_zh) and chinese.search(t.description_zh), t.slug
        assert "你" not in t.description_zh, t.slug  # the portal says 您
        for word in ("per task", "batch of", "GPU-hours", "node", "classic engine", "fastest", "memory", "Apptainer"):
            assert word not in t.description, (t.slug, word)
    assert all(chinese.search(p.name_zh) for p in ClusterProfile.objects.all())
    assert ClusterProfile.objects.get(slug="local").name_zh == "本地集群"
    # two teams, each its own Slurm account, and the demo user in both: New job asks which (docs/teams.md)
    from django.contrib.auth.models import User

    from jobs.models import Team
    demo = User.objects.get(username="demo")
    assert sorted((t.name, t.slurm_account) for t in Team.objects.of(demo)) == [("Post", "post"), ("VFX", "vfx")]
    # a lead each (docs/teams.md): the demo user leads VFX, so a newcomer sees the team page; lin leads Post
    leads = {t.slurm_account: sorted(t.leads.values_list("username", flat=True)) for t in Team.objects.all()}
    assert leads == {"vfx": ["demo"], "post": ["lin"]}
    assert User.objects.get(username="lin").check_password("demo-pass-123")
