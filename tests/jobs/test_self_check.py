"""Results that check themselves, on the portal's side: the worker's flag reaches the target's row,
the job counts "needs a look", the job page filters them and the target page says what to do, in
English and Chinese."""
from __future__ import annotations

import pytest
from django.urls import reverse

from jobs.models import Job, JobStatus, Target, TargetStatus
from jobs.watcher.decide import target_fields
from worker.progress import TargetRecord
from worker.selfcheck import FACE_LOST, NOT_TAKEN


def record(**fields) -> TargetRecord:
    return TargetRecord(index=0, target="a.jpg", output="a.jpg", status="done", faces_found=2, faces_swapped=2,
                        **fields)


@pytest.mark.parametrize("fields, expected", [
    ({"check": NOT_TAKEN, "check_params": {"faces": 1, "of": 2}}, (NOT_TAKEN, 1)),
    ({"check": FACE_LOST, "check_params": {"faces": 2, "of": 2}}, (FACE_LOST, 2)),
    ({}, ("", 0)),  # an older worker's record: no flag
    ({"check": "rm -rf", "check_params": {"faces": 3}}, ("", 0)),  # a code this portal does not know
    ({"check": NOT_TAKEN, "check_params": {"faces": "many"}}, (NOT_TAKEN, 0)),
])
def test_the_workers_flag_reaches_the_row_as_stored(fields, expected):
    got = target_fields(record(**fields))
    assert (got["self_check"], got["self_check_faces"]) == expected


def test_a_failed_target_is_never_flagged():
    rec = record(check=NOT_TAKEN, check_params={"faces": 1})
    rec.status = "failed"
    assert target_fields(rec)["self_check"] == ""


@pytest.fixture
def job(owner, template):
    job = Job.objects.create(owner=owner, template=template, template_snapshot=template.snapshot().to_json(),
                             cluster=template.cluster, status=JobStatus.COMPLETED, total=4, name="Look job")
    Target.objects.bulk_create([
        Target(job=job, index=0, name="fine.jpg", output_name="fine.jpg", status=TargetStatus.DONE, faces_swapped=1),
        Target(job=job, index=1, name="weak.jpg", output_name="weak.jpg", status=TargetStatus.DONE, faces_swapped=1,
               self_check=NOT_TAKEN, self_check_faces=1),
        Target(job=job, index=2, name="group.jpg", output_name="group.jpg", status=TargetStatus.DONE,
               faces_swapped=3, self_check=FACE_LOST, self_check_faces=2),
        Target(job=job, index=3, name="bad.jpg", output_name="bad.jpg", status=TargetStatus.FAILED),
    ])
    job.recount()
    return job


def test_the_job_counts_what_needs_a_look(job):
    job.refresh_from_db()
    assert (job.done, job.failed, job.needs_look) == (3, 1, 2)


@pytest.mark.parametrize("language, label, sentence", [
    ("en", "Needs a look", "2 of the 3 swapped faces can no longer be found."),
    ("zh-hans", "需要查看", "换过的 3 张脸中有 2 张已经找不到了。"),
])
def test_the_job_page_filters_what_needs_a_look(client, owner, job, language, label, sentence):
    client.force_login(owner)
    url = reverse("job-detail", args=[job.id])
    page = client.get(url, HTTP_ACCEPT_LANGUAGE=language).content.decode()
    assert label in page and sentence in page  # the grid as the server draws it, before any script
    snapshot = client.get(reverse("job-live", args=[job.id]) + "?show=look", HTTP_ACCEPT_LANGUAGE=language).json()
    targets = snapshot["targets"] if "targets" in snapshot else snapshot["view"]["targets"]["items"]
    assert [t["name"] for t in targets] == ["weak.jpg", "group.jpg"]
    assert targets[1]["self_check_words"] == sentence
    assert snapshot["job"]["progress"]["needs_look"] == 2


@pytest.mark.parametrize("language, words", [
    ("en", ["Needs a look:", "it still looks like the person in the original photo", "Try another face photo"]),
    ("zh-hans", ["需要查看：", "看起来仍像原照片中的人", "请换一张脸部照片试试"]),
])
def test_the_target_page_says_what_to_do(client, owner, job, language, words):
    client.force_login(owner)
    page = client.get(reverse("job-target", args=[job.id, 1]), HTTP_ACCEPT_LANGUAGE=language).content.decode()
    for w in words:
        assert w in page
    fine = client.get(reverse("job-target", args=[job.id, 0]), HTTP_ACCEPT_LANGUAGE=language).content.decode()
    assert 'id="target-look"' not in fine


def test_the_api_counts_them(client, owner, job):
    client.force_login(owner)
    from jobs.shapes import job_summary

    assert job_summary(Job.objects.get(pk=job.pk))["progress"] == {"total": 4, "done": 3, "failed": 1, "needs_look": 2}


@pytest.mark.parametrize("on", [True, False])
def test_the_templates_choice_reaches_the_worker(fake_ssh, owner, template, jpeg_bytes, on):
    import json

    from jobs.job.start import start_job
    from jobs.job.submit import submit_job

    from .api_helpers import image
    from .test_quotas_submit import FOLDER, NOTHING_SUBMITTED, folder_of

    template.self_check = on
    template.save()
    runner = fake_ssh(on_run=folder_of(2), on_batch=NOTHING_SUBMITTED)
    job = start_job(user=owner, template=template, sources=[image("face.jpg", jpeg_bytes)], consent=True,
                    target_folder=FOLDER)
    submit_job(str(job.id))
    manifest = json.loads(next(v for k, v in runner.written.items() if k.endswith("manifest.json")))
    assert manifest.get("self_check", True) is on
