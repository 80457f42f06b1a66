"""Quotas at Start, through start_job, the New job page and POST /api/v1/jobs: a refused Start
creates nothing (no job, no files, no "job.start" in the audit log) and says why next to the
right field; the New job page shows what is left before Start and an estimate per template."""
from datetime import date
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from jobs import quotas, transitions
from jobs.errors import QuotaExceeded
from jobs.job.start import start_job
from jobs.models import AuditEntry, Job, JobStatus, Quota, Template

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
    assert "about 0.5 GPU-hours per 100 photos" in body  # quick-gpu: 50 tasks x 36 s on 1 GPU
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
