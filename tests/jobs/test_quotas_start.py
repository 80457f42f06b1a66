"""Quotas at Start, through start_job, the New job page and POST /api/v1/jobs: a refused Start
creates nothing (no job, no files, no "job.start" in the audit log) and says why next to the
right field; the New job page shows what is left before Start and an estimate per template."""
import json
import re
from datetime import date
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from jobs import quotas, transitions
from jobs.errors import QuotaExceeded, StartError
from jobs.job.start import start_job
from jobs.models import AuditEntry, Job, JobStatus, Quota, Template
from tests.fake_ssh import run_here

from .api_helpers import image, token_client
from .test_quotas import active, charged

FOLDER = "/srv/ffportal/storage/shoot"


def files_under_media() -> list[Path]:
    root = Path(settings.MEDIA_ROOT)
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


@pytest.fixture
def start(jpeg_bytes):
    def run(user, template, n_targets=0, folder="", target_bytes=None):
        targets = [image(f"t{i}.jpg", target_bytes or jpeg_bytes) for i in range(n_targets)]
        return start_job(user=user, template=template, sources=[image("face.jpg", jpeg_bytes)], consent=True,
                         target_files=targets, target_folder=folder)
    return run


@pytest.fixture
def hungry(profile):
    """One GPU for a whole hour per task of 10 images: a folder job is estimated at 1 GPU-hour."""
    return Template.objects.create(name="Hungry", slug="hungry", cluster=profile, partition="gpu", gpu_count=1,
                                   time_limit="01:00:00", chunk_size=10, seconds_per_image=600)


def this_month() -> date:
    return timezone.localdate(timezone.now()).replace(day=1)


def test_it_refuses_past_the_gpu_hours_and_leaves_nothing_behind(start, owner, template, hungry):
    Quota.objects.create(user=owner, gpu_hours_per_month=2)
    charged(owner, template, 1.5, this_month())
    with pytest.raises(QuotaExceeded) as exc:
        start(owner, hungry, folder=FOLDER)
    assert "You have used 1.5 of your 2 GPU-hours this month (your own quota), 0.5 left; " \
           "this job needs about 1." in exc.value.message
    assert Job.objects.filter(status=JobStatus.QUEUED).count() == 0
    assert files_under_media() == [] and not AuditEntry.objects.filter(action="job.start").exists()


def test_it_counts_the_jobs_it_started_against_the_next_start(start, owner, hungry):
    Quota.objects.create(user=owner, gpu_hours_per_month=2.5)
    start(owner, hungry, folder=FOLDER)  # about 1 GPU-hour each while queued
    start(owner, hungry, folder=FOLDER)
    with pytest.raises(QuotaExceeded):
        start(owner, hungry, folder=FOLDER)
    assert Job.objects.count() == 2


def test_it_records_the_start_in_the_audit_log(start, owner, template):
    Quota.objects.create(user=owner, max_targets_per_job=5)
    job = start(owner, template, n_targets=2)
    (entry,) = AuditEntry.objects.filter(action="job.start")
    assert entry.target_id == str(job.id) and entry.details["uploaded_targets"] == 2


def test_it_frees_a_job_slot_when_a_job_ends(start, owner, template):
    Quota.objects.create(user=owner, max_concurrent_jobs=1)
    first = start(owner, template, n_targets=1)
    with pytest.raises(QuotaExceeded, match="You already have 1 job waiting or running"):
        start(owner, template, n_targets=1)
    transitions.update_if(first, "status", (JobStatus.QUEUED,), JobStatus.COMPLETED)
    start(owner, template, n_targets=1)


def test_it_refuses_too_many_uploaded_targets_at_start(start, owner, team, template):
    Quota.objects.create(group=team, max_targets_per_job=2)
    with pytest.raises(QuotaExceeded) as exc:
        start(owner, template, n_targets=3)
    assert exc.value.field == "targets"
    assert exc.value.message.startswith("This job has 3 images and videos; your limit is 2 per job (group vfx).")
    start(owner, template, n_targets=2)
    start(owner, template, folder=FOLDER)  # a folder is counted after listing (test_quotas_submit.py)


def test_it_refuses_an_upload_over_the_size_limit(start, owner, template, jpeg_bytes):
    Quota.objects.create(user=owner, max_upload_mb=1)
    padded = jpeg_bytes + b"\0" * (3 * 2**19)  # still a JPEG, now 1.5 MB and a bit
    with pytest.raises(QuotaExceeded) as exc:
        start(owner, template, n_targets=1, target_bytes=padded)
    size = quotas.format_mb(len(padded))
    assert exc.value.message == (f"t0.jpg is {size} MB; your limit is 1 MB per file (your own quota). "
                                 "Make it smaller or ask an admin.")
    assert exc.value.field == "targets" and files_under_media() == []


# ---- the page and the API show refusals ----

def test_it_shows_the_refusal_on_the_new_job_page(client, owner, template, jpeg_bytes):
    Quota.objects.create(user=owner, max_concurrent_jobs=1)
    active(owner, template)
    client.force_login(owner)
    r = client.post(reverse("job-new"), {"template": template.pk, "consent": "on",
                                         "source": image("face.jpg", jpeg_bytes), "targets": image("t.jpg", jpeg_bytes)})
    body = r.content.decode()
    assert r.status_code == 200 and "The job was not started." in body
    assert "your limit is 1 at a time (your own quota)" in body
    assert Job.objects.count() == 1


def test_it_answers_a_refusal_through_the_api_with_the_field(owner, team, template, jpeg_bytes):
    Quota.objects.create(group=team, max_targets_per_job=1)
    api = token_client(owner)[0]
    r = api.post("/api/v1/jobs", {"template": template.slug, "source": [image("face.jpg", jpeg_bytes)],
                                  "targets": [image("a.jpg", jpeg_bytes), image("b.jpg", jpeg_bytes)],
                                  "consent": "true"})
    assert r.status_code == 400
    assert r.json() == {"error": "This job has 2 images and videos; your limit is 1 per job (group vfx). "
                                 "Split them into several jobs or ask an admin.", "field": "targets"}


# ---- what the New job page shows before Start ----

def test_it_shows_what_is_left_before_start(client, owner, team, template):
    Quota.objects.create(group=team, gpu_hours_per_month=10, max_targets_per_job=1000)
    Quota.objects.create(user=owner, max_concurrent_jobs=3, max_upload_mb=200)
    charged(owner, template, 2.5, this_month())
    active(owner, template)
    client.force_login(owner)
    body = client.get(reverse("job-new")).content.decode()
    reset = quotas.resets_on()
    assert "Your quota" in body
    assert "2.5 used of 10, 7.5 left" in body and "group vfx: all its members together" in body
    assert f"resets on {reset.day} {reset:%B}" in body
    assert "1 of 3 waiting or running" in body
    assert "up to 1,000" in body and "up to 200 MB per file" in body
    assert 'data-per100="0.5"' in body  # quick-gpu: 50 tasks x 36 s on 1 GPU (the estimate's folder sentence)
    assert 'data-chunk="2"' in body and 'data-gpus="1"' in body and 'data-cap="600"' in body
    assert "js/estimate.js" in body


def test_it_warns_when_nothing_is_left(client, owner, template):
    Quota.objects.create(user=owner, gpu_hours_per_month=1)
    charged(owner, template, 1, this_month())
    client.force_login(owner)
    body = client.get(reverse("job-new")).content.decode()
    assert "No GPU-hours are left this month" in body


def test_it_says_when_no_quota_applies(client, stranger, template):
    client.force_login(stranger)
    assert "No quota limits your jobs." in client.get(reverse("job-new")).content.decode()


# ---- a limit of one job is refused next to its field, before any job (issue 27: a folder over it was a failed job) ----

@pytest.fixture
def shoot(template, tmp_path, fake_ssh, settings):
    """A cluster folder of 10 photos and 1 video, counted by Start (the folder check on)."""
    root = tmp_path / "storage"
    (root / "shoot").mkdir(parents=True)
    for i in range(10):
        (root / "shoot" / f"p{i}.jpg").write_bytes(b"x")
    (root / "shoot" / "clip.mp4").write_bytes(b"x")
    template.cluster.target_roots = [str(root)]
    template.cluster.save()
    fake_ssh(on_run=run_here)
    settings.FOLDER_CHECK_ON_START = True
    return root / "shoot"


FOLDER_OVER = ("The folder has 11 images and videos; your limit is 5 per job (your own quota). "
               "Split the folder or ask an admin.")
FOLDER_OVER_ZH = "该文件夹包含 11 个照片/视频，而您的上限是每个任务 5 个（您的个人配额）。请拆分文件夹，或联系管理员。"


@pytest.mark.parametrize("language, words", [("en", FOLDER_OVER), ("zh-hans", FOLDER_OVER_ZH)])
def test_a_folder_over_the_limit_is_refused_next_to_its_field_and_no_job_is_made(client, owner, template, shoot,
                                                                               jpeg_bytes, language, words):
    Quota.objects.create(user=owner, max_targets_per_job=5)
    client.force_login(owner)
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = language
    r = client.post(reverse("job-new"), {"template": template.pk, "consent": "on", "name": "Shoot",
                                         "source": image("face.jpg", jpeg_bytes), "target_folder": str(shoot)})
    assert r.status_code == 200 and r.context["form"].errors["target_folder"] == [words]
    body = r.content.decode()
    assert 'id="id_target_folder-errors"' in body and words in body
    assert not Job.objects.exists() and not AuditEntry.objects.filter(action="job.start").exists()


def test_the_api_refuses_a_folder_over_the_limit_with_the_same_words(owner, template, shoot, jpeg_bytes):
    Quota.objects.create(user=owner, max_targets_per_job=5)
    api = token_client(owner)[0]
    r = api.post("/api/v1/jobs", {"template": template.slug, "source": [image("face.jpg", jpeg_bytes)],
                                  "target_folder": str(shoot), "consent": "true"})
    assert r.status_code == 400 and r.json() == {"error": FOLDER_OVER, "field": "target_folder"}
    assert not Job.objects.exists()


def test_a_folder_over_its_clusters_limit_is_refused_at_start(start, owner, template, shoot):
    template.cluster.max_targets_per_job = 10
    template.cluster.save()
    with pytest.raises(StartError) as exc:
        start(owner, template, folder=str(shoot))
    assert exc.value.field == "target_folder"
    assert exc.value.message.startswith("This job has 11 images and videos; the cluster Local takes at most 10 per job.")
    assert not Job.objects.exists()
    template.cluster.max_targets_per_job = 11
    template.cluster.save()
    assert start(owner, template, folder=str(shoot)).target_folder == str(shoot)


def test_too_many_uploaded_files_are_listed_with_every_other_problem(client, owner, template, jpeg_bytes):
    Quota.objects.create(user=owner, max_targets_per_job=2)
    client.force_login(owner)
    r = client.post(reverse("job-new"), {"template": template.pk,  # no consent
                                         "source": image("face.jpg", jpeg_bytes),
                                         "targets": [image(f"t{i}.jpg", jpeg_bytes) for i in range(3)]})
    errors = r.context["form"].errors
    assert errors["targets"] == ["This job has 3 images and videos; your limit is 2 per job (your own quota). "
                                 "Split them into several jobs or ask an admin."]
    assert "consent" in errors and not Job.objects.exists()


@pytest.mark.parametrize("language, words", [
    ("en", "This job has {count} images and videos; your limit is 5 per job (your own quota). "
           "Split them into several jobs or ask an admin."),
    ("zh-hans", "这个任务包含 {count} 个照片/视频，而您的上限是每个任务 5 个（您的个人配额）。请拆分成多个任务，或联系管理员。")])
def test_the_page_gives_its_script_the_limits_in_starts_own_words(client, owner, template, language, words):
    Quota.objects.create(user=owner, max_targets_per_job=5)
    template.cluster.max_targets_per_job = 1000
    template.cluster.save()
    client.force_login(owner)
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = language
    r = client.get(reverse("job-new"))
    limits = json.loads(re.search(r'<script id="targets-limits" type="application/json">(.*?)</script>',
                                  r.content.decode(), re.S).group(1))
    assert limits["quota"]["limit"] == 5 and limits["quota"]["files"] == words
    assert limits["clusters"][template.cluster.slug]["limit"] == 1000
    assert "{count}" in limits["quota"]["folder"] and "{count}" in limits["clusters"][template.cluster.slug]["text"]
