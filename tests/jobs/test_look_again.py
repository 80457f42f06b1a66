"""Results that need a look, tried again with another face photo (jobs.job.again): the job page and
the flagged photo's page offer it once the job has ended; New job comes filled with ONLY the flagged
photos and NO face photo; a folder job's new job keeps only those files of the folder on the
cluster; the API does the same with `look_again_of`, for the caller's own jobs only. Only the SSH
seam is faked."""
from __future__ import annotations

import json

import pytest
from django.urls import reverse

from cluster import RemoteEntry
from cluster.paths import answer_folder_listing
from jobs.job.submit import submit_job
from jobs.models import Job, JobStatus, Target, TargetStatus, Upload
from worker.selfcheck import FACE_LOST, NOT_TAKEN

from .api_helpers import image, token_client
from .test_quotas_submit import FOLDER, NOTHING_SUBMITTED
from .test_uploads_tus import send

NAMES = ["p0.jpg", "p1.jpg", "p2.jpg", "p3.jpg"]


@pytest.fixture
def alice(client, owner):
    client.force_login(owner)
    return client


def ended_with_flags(job: Job, flagged: dict[int, str]) -> Job:
    """The job as the watcher leaves it: every photo done, those of `flagged` flagged by the worker."""
    Target.objects.filter(job=job).update(status=TargetStatus.DONE, faces_found=1, faces_swapped=1)
    for index, code in flagged.items():
        Target.objects.filter(job=job, index=index).update(self_check=code, self_check_faces=1)
    job.recount()
    Job.objects.filter(pk=job.pk).update(status=JobStatus.COMPLETED)
    job.refresh_from_db()
    return job


@pytest.fixture
def uploaded_job(alice, template, jpeg_bytes) -> Job:
    face = send(alice, jpeg_bytes, "old-face.jpg", "source")
    photos = [send(alice, jpeg_bytes, n, "target") for n in NAMES]
    r = alice.post(reverse("job-new"), {"template": template.pk, "consent": "on", "source_uploads": [face.id],
                                        "target_uploads": [p.id for p in photos], "name": "Wedding"})
    assert r.status_code == 302, r.content
    return ended_with_flags(Job.objects.latest("created_at"), {1: NOT_TAKEN, 3: FACE_LOST})


def sent_on(page: str) -> dict:
    """The files the form comes with, as the upload widget's script reads them."""
    start = page.index('<script id="sent-uploads" type="application/json">')
    start = page.index(">", start) + 1
    return json.loads(page[start:page.index("</script>", start)])


@pytest.mark.parametrize("language, words", [
    ("en", ["2 results need a look", "Try again with another face photo"]),
    ("zh-hans", ["2 个结果需要查看", "换一张脸部照片重试"]),
])
def test_the_job_page_offers_it_once_the_job_has_ended(alice, uploaded_job, language, words):
    page = alice.get(reverse("job-detail", args=[uploaded_job.id]), HTTP_ACCEPT_LANGUAGE=language).content.decode()
    assert all(w in page for w in words), page
    assert f"again={uploaded_job.id}&amp;only=look" in page
    target_page = alice.get(reverse("job-target", args=[uploaded_job.id, 1]), HTTP_ACCEPT_LANGUAGE=language)
    assert 'id="target-look-again"' in target_page.content.decode()
    Job.objects.filter(pk=uploaded_job.pk).update(status=JobStatus.RUNNING)  # while it runs: hidden, for the live script
    assert '<div class="notice notice-warn" id="job-look-again" hidden>' in alice.get(
        reverse("job-detail", args=[uploaded_job.id])).content.decode()


def test_new_job_comes_with_only_the_flagged_photos_and_no_face(alice, uploaded_job, template, jpeg_bytes):
    url = reverse("job-new") + f"?again={uploaded_job.id}&only=look"
    page = alice.get(url).content.decode()
    assert "Trying again the 2 results of" in page and "Add another face photo in step 1" in page
    sent = sent_on(page)
    assert [f["name"] for f in sent["targets"]] == ["p1.jpg", "p3.jpg"] and sent["source"] == []
    assert 'value="Wedding, another face"' in page
    assert "尝试重新处理" in alice.get(url, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    face = send(alice, jpeg_bytes, "new-face.jpg", "source")
    targets = [f["id"] for f in sent_on(alice.get(url).content.decode())["targets"]]
    r = alice.post(reverse("job-new"), {"template": template.pk, "consent": "on", "source_uploads": [face.id],
                                        "target_uploads": targets, "again_look": str(uploaded_job.id),
                                        "name": "Wedding, another face"})
    assert r.status_code == 302, r.content
    again = Job.objects.latest("created_at")
    assert again.pk != uploaded_job.pk and again.picked == []
    assert [t.name for t in again.targets.order_by("index")] == ["p1.jpg", "p3.jpg"]
    assert [s.original_name for s in again.sources.all()] == ["new-face.jpg"]
    # the earlier job keeps its own files and results
    assert uploaded_job.targets.exclude(upload="").count() == 4


def test_a_folder_job_takes_only_the_flagged_files_of_the_folder(fake_ssh, alice, owner, template, jpeg_bytes):
    earlier = Job.objects.create(owner=owner, template=template, template_snapshot=template.snapshot().to_json(),
                                 cluster=template.cluster, target_folder=FOLDER, name="Shoot", total=4)
    Target.objects.bulk_create([Target(job=earlier, index=i, name=n, cluster_path=f"{FOLDER}/{n}", output_name=n)
                                for i, n in enumerate(NAMES)])
    ended_with_flags(earlier, {0: NOT_TAKEN, 2: NOT_TAKEN})
    entries = [RemoteEntry(name=n, path=f"{FOLDER}/{n}", type="file", size=1000, mtime=0)
               for n in [*NAMES, "new.jpg"]]
    fake_ssh(on_run={"sh": lambda argv: answer_folder_listing(argv, entries), "sbatch": "4242\n"},
             on_batch=NOTHING_SUBMITTED)
    page = alice.get(reverse("job-new") + f"?again={earlier.id}&only=look").content.decode()
    assert "Of the folder, only those 2 photos are taken" in page and f'value="{FOLDER}"' in page
    face = send(alice, jpeg_bytes, "new-face.jpg", "source")
    r = alice.post(reverse("job-new"), {"template": template.pk, "consent": "on", "source_uploads": [face.id],
                                        "target_folder": FOLDER, "again_look": str(earlier.id)})
    assert r.status_code == 302, r.content
    again = Job.objects.latest("created_at")
    assert again.picked == [f"{FOLDER}/p0.jpg", f"{FOLDER}/p2.jpg"]
    submit_job(str(again.id))
    again.refresh_from_db()
    assert [t.name for t in again.targets.order_by("index")] == ["p0.jpg", "p2.jpg"] and again.total == 2
    # another folder typed on the form: the whole of it, as typed
    face = send(alice, jpeg_bytes, "new-face.jpg", "source")
    alice.post(reverse("job-new"), {"template": template.pk, "consent": "on", "source_uploads": [face.id],
                                    "target_folder": FOLDER + "/other", "again_look": str(earlier.id)})
    assert Job.objects.latest("created_at").picked == []


def test_the_api_tries_them_again_for_the_callers_own_jobs_only(uploaded_job, owner, stranger, jpeg_bytes):
    api, _key = token_client(owner)
    r = api.post("/api/v1/jobs", {"look_again_of": str(uploaded_job.id), "consent": "true",
                                  "source": image("new-face.jpg", jpeg_bytes)})
    assert r.status_code == 201, r.content
    again = Job.objects.get(pk=r.json()["id"])
    assert [t.name for t in again.targets.order_by("index")] == ["p1.jpg", "p3.jpg"]
    assert again.template_id == uploaded_job.template_id
    other, _key = token_client(stranger)
    r = other.post("/api/v1/jobs", {"look_again_of": str(uploaded_job.id), "consent": "true",
                                    "source": image("new-face.jpg", jpeg_bytes)})
    assert r.status_code == 404
    r = api.post("/api/v1/jobs", {"look_again_of": "not-a-job", "consent": "true"})
    assert r.status_code == 404
    Target.objects.filter(job=uploaded_job).update(self_check="")
    uploaded_job.recount()
    before = Upload.objects.count()
    r = api.post("/api/v1/jobs", {"look_again_of": str(uploaded_job.id), "consent": "true",
                                  "source": image("new-face.jpg", jpeg_bytes)})
    assert r.status_code == 400 and r.json()["field"] == "look_again_of"
    assert Upload.objects.count() == before  # nothing left behind by a refusal
