"""Start with files sent ahead, every problem at once, nothing lost on a refusal, the folder checked
before Start, and "Run again" from a job's own files."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from jobs.job.start import start_job
from jobs.models import Job, Upload
from jobs.uploads import store as upload_store
from tests.fake_ssh import FakeSSH, run_here

from .test_uploads_tus import send


@pytest.fixture
def alice(client, owner):
    client.force_login(owner)
    return client


def hidden_ids(body: str, name: str) -> list[str]:
    return re.findall(rf'<input type="hidden" name="{name}" value="([0-9a-f-]+)"', body)


def test_a_job_starts_from_files_sent_ahead_without_sending_them_again(alice, owner, template, jpeg_bytes):
    face = send(alice, jpeg_bytes, "face.jpg", "source")
    targets = [send(alice, jpeg_bytes, n, "target") for n in ("b.jpg", "a.jpg", "a.jpg")]
    r = alice.post(reverse("job-new"), {"template": template.pk, "consent": "on", "source_uploads": [face.id],
                                        "target_uploads": [t.id for t in targets]})
    job = Job.objects.get()
    assert r.status_code == 302 and r["Location"] == reverse("job-detail", args=[job.id])
    # in the order chosen, each with its own output name
    assert [(t.name, t.output_name) for t in job.targets.order_by("index")] == [
        ("b.jpg", "b.jpg"), ("a.jpg", "a.jpg"), ("a.jpg", "a-2.jpg")]
    for t in job.targets.all():
        assert Path(t.upload.path).read_bytes() == jpeg_bytes and Path(t.upload.path).is_relative_to(job.media_dir)
    source = job.sources.get()
    assert source.original_name == "face.jpg" and Path(source.file.path).read_bytes() == jpeg_bytes
    assert not Upload.objects.exists() and not face.path.exists()  # moved into the job, not copied


def test_every_problem_is_listed_at_once_and_the_good_files_stay(alice, template, jpeg_bytes):
    good = send(alice, jpeg_bytes, "good.jpg", "target")
    bad = send(alice, jpeg_bytes[:2000], "cut.jpg", "target")
    r = alice.post(reverse("job-new"), {"template": template.pk, "target_uploads": [good.id, bad.id]})
    assert r.status_code == 200 and not Job.objects.exists()
    errors = r.context["form"].errors
    assert "consent" in errors and "source" in errors and "targets" in errors
    assert any("cut.jpg" in e and "damaged" in e and "Remove it or replace it" in e for e in errors["targets"])
    body = r.content.decode()
    # each next to its field, and the summary lists them all
    for field in ("consent", "source", "targets"):
        assert f'id="id_{field}-errors"' in body
    assert body.count('<li><a href="#id_') == 3
    # both files are still on the form (the bad one to be removed or replaced), nothing to send again
    assert Upload.objects.filter(pk__in=[good.pk, bad.pk]).count() == 2
    sent = r.context["sent"]["targets"]
    assert [u["name"] for u in sent] == ["good.jpg", "cut.jpg"] and sent[1]["status"] == "refused"


def test_files_sent_with_the_form_are_kept_after_a_refusal(alice, template, jpeg_bytes):
    """Without JavaScript: the refusal keeps the good files as uploads; the second try sends only ids."""
    r = alice.post(reverse("job-new"), {"template": template.pk,
                                        "source": SimpleUploadedFile("face.jpg", jpeg_bytes, "image/jpeg"),
                                        "targets": [SimpleUploadedFile("t.jpg", jpeg_bytes, "image/jpeg"),
                                                    SimpleUploadedFile("notes.jpg", b"not a picture", "image/jpeg")]})
    body = r.content.decode()
    assert "Confirm that you have the right" in body and "notes.jpg" in body
    assert "you do not have to choose them again" in body
    sources, targets = hidden_ids(body, "source_uploads"), hidden_ids(body, "target_uploads")
    assert len(sources) == 1 and len(targets) == 1  # the text file is not kept
    r = alice.post(reverse("job-new"), {"template": template.pk, "consent": "on",
                                        "source_uploads": sources, "target_uploads": targets})
    job = Job.objects.get()
    assert r.status_code == 302 and [t.name for t in job.targets.all()] == ["t.jpg"]


def test_a_face_photo_without_a_face_is_refused_at_start_too(alice, template, jpeg_bytes):
    import io

    import numpy as np
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.full((200, 200, 3), 200, dtype=np.uint8)).save(buf, "JPEG")
    r = alice.post(reverse("job-new"), {"template": template.pk, "consent": "on",
                                        "source": SimpleUploadedFile("wall.jpg", buf.getvalue(), "image/jpeg"),
                                        "target_folder": "/srv/ffportal/storage/x"})
    assert any("no face found" in e for e in r.context["form"].errors["source"])
    assert not Job.objects.exists()


def test_someone_elses_upload_cannot_be_used(alice, template, jpeg_bytes, colleague):
    bob = Client()
    bob.force_login(colleague)
    theirs = send(bob, jpeg_bytes, "bob.jpg", "source")
    r = alice.post(reverse("job-new"), {"template": template.pk, "consent": "on", "source_uploads": [theirs.id],
                                        "target_folder": "/srv/ffportal/storage/x"})
    assert any("no longer kept" in e for e in r.context["form"].errors["source"])
    assert not Job.objects.exists() and theirs.path.exists() and Upload.objects.filter(pk=theirs.pk).exists()


def test_an_upload_still_arriving_is_refused_with_what_to_do(alice, owner, template, jpeg_bytes):
    half = upload_store.create(owner, "target", "big.mp4", 1000)
    face = send(alice, jpeg_bytes, "face.jpg", "source")
    r = alice.post(reverse("job-new"), {"template": template.pk, "consent": "on", "source_uploads": [face.id],
                                        "target_uploads": [half.id]})
    assert any("still being sent" in e for e in r.context["form"].errors["targets"])


@pytest.fixture
def storage(template, tmp_path, fake_ssh, settings):
    root = tmp_path / "storage"
    (root / "empty").mkdir(parents=True)
    (root / "shoot").mkdir()
    for name in ("a.jpg", "b.png", "c.mp4", ".hidden.jpg", "notes.txt"):
        (root / "shoot" / name).write_bytes(b"x")
    template.cluster.target_roots = [str(root)]
    template.cluster.save()
    fake_ssh(on_run=run_here)
    settings.FOLDER_CHECK_ON_START = True
    return root


def test_the_folder_is_checked_as_it_is_typed(alice, storage):
    def check(path):
        return alice.get(reverse("folder-check"), {"path": path}).json()

    found = check(str(storage / "shoot"))
    assert found["ok"] and (found["images"], found["videos"]) == (2, 1)
    assert found["summary"] == "2 photos and 1 video found."
    empty = check(str(storage / "empty"))
    assert not empty["ok"] and "no photos or videos" in empty["summary"]
    missing = check(str(storage / "shoot-typo"))
    assert not missing["ok"] and "There is no folder" in missing["summary"]
    outside = check("/etc")
    assert not outside["ok"] and "outside the folders you may use" in outside["summary"]


def test_an_empty_or_mistyped_folder_is_refused_before_start(alice, storage, template, jpeg_bytes):
    face = send(alice, jpeg_bytes, "face.jpg", "source")
    for folder, words in ((storage / "empty", "no photos or videos"), (storage / "shoot-typo", "There is no folder")):
        r = alice.post(reverse("job-new"), {"template": template.pk, "consent": "on", "source_uploads": [face.id],
                                            "target_folder": str(folder)})
        assert r.status_code == 200 and any(words in e for e in r.context["form"].errors["target_folder"])
        assert "Job started" not in r.content.decode()
    assert not Job.objects.exists()
    r = alice.post(reverse("job-new"), {"template": template.pk, "consent": "on", "source_uploads": [face.id],
                                        "target_folder": str(storage / "shoot")})
    assert r.status_code == 302


def test_a_cluster_that_does_not_answer_never_refuses_a_start(alice, template, jpeg_bytes, fake_ssh, settings):
    fake_ssh.unreachable("connection refused")
    settings.FOLDER_CHECK_ON_START = True
    face = send(alice, jpeg_bytes, "face.jpg", "source")
    r = alice.post(reverse("job-new"), {"template": template.pk, "consent": "on", "source_uploads": [face.id],
                                        "target_folder": "/srv/ffportal/storage/shoot"})
    assert r.status_code == 302 and Job.objects.get().target_folder == "/srv/ffportal/storage/shoot"
    answer = alice.get(reverse("folder-check"), {"path": "/srv/ffportal/storage/shoot"}).json()
    assert answer["reachable"] is False and "not answering" in answer["summary"]


def test_run_again_fills_the_form_from_the_job_and_its_files(alice, owner, template, jpeg_bytes, colleague):
    job = start_job(user=owner, template=template, consent=True, name="Beach",
                    sources=[SimpleUploadedFile("me.jpg", jpeg_bytes, "image/jpeg")],
                    target_files=[SimpleUploadedFile("t1.jpg", jpeg_bytes, "image/jpeg")])
    r = alice.get(reverse("job-new") + f"?again={job.id}")
    body = r.content.decode()
    assert 'value="Beach"' in body
    assert r.context["form"].initial["template"] == template.pk
    sources, targets = hidden_ids(body, "source_uploads"), hidden_ids(body, "target_uploads")
    assert len(sources) == 1 and len(targets) == 1
    r = alice.post(reverse("job-new"), {"template": template.pk, "consent": "on", "name": "Beach 2",
                                        "source_uploads": sources, "target_uploads": targets})
    again = Job.objects.get(name="Beach 2")
    assert [t.name for t in again.targets.all()] == ["t1.jpg"] and again.sources.get().original_name == "me.jpg"
    # the first job still has its own files
    assert Path(job.targets.get().upload.path).read_bytes() == jpeg_bytes
    # nobody else can repeat it
    bob = Client()
    bob.force_login(colleague)
    body = bob.get(reverse("job-new") + f"?again={job.id}").content.decode()
    assert hidden_ids(body, "source_uploads") == [] and 'value="Beach"' not in body


def test_which_faces_is_chosen_per_job_with_the_templates_default(alice, template, jpeg_bytes):
    template.face_selector = "one"
    template.save()
    page = alice.get(reverse("job-new")).content.decode()
    assert re.search(r'<input type="radio" name="face_selector" value="one"[^>]*checked', page)
    assert "Only the largest face" in page and "Only one person" in page
    face = send(alice, jpeg_bytes, "face.jpg", "source")
    target = send(alice, jpeg_bytes, "t.jpg", "target")
    r = alice.post(reverse("job-new"), {"template": template.pk, "consent": "on", "source_uploads": [face.id],
                                        "target_uploads": [target.id]})
    assert r.status_code == 302 and Job.objects.get().snapshot.face_selector == "one"  # the template's


def test_one_person_only_needs_a_photo_of_them(alice, template, jpeg_bytes):
    face = send(alice, jpeg_bytes, "face.jpg", "source")
    target = send(alice, jpeg_bytes, "t.jpg", "target")
    form = {"template": template.pk, "consent": "on", "source_uploads": [face.id], "target_uploads": [target.id],
            "face_selector": "reference"}
    r = alice.post(reverse("job-new"), form)
    assert any("Add a photo of the person" in e for e in r.context["form"].errors["reference"])
    assert 'id="id_reference-errors"' in r.content.decode()
    person = send(alice, jpeg_bytes, "him.jpg", "reference")
    assert person.status == "ready" and person.info["faces"] >= 1  # checked for a face like a face photo
    r = alice.post(reverse("job-new"), {**form, "reference_uploads": [person.id]})
    job = Job.objects.get()
    assert r.status_code == 302 and job.snapshot.face_selector == "reference"
    # the person to replace is not a face to put in: the job's face photos are the sources alone
    assert [s.original_name for s in job.sources.all()] == ["face.jpg"]
    assert Path(job.reference_face.path).read_bytes() == jpeg_bytes
    assert Path(job.reference_face.path).is_relative_to(job.media_dir)
    # Run again keeps the choice and the person
    again = alice.get(reverse("job-new") + f"?again={job.id}")
    assert again.context["form"].initial["face_selector"] == "reference"
    assert len(hidden_ids(again.content.decode(), "reference_uploads")) == 1


def test_the_manifest_tells_the_worker_whose_faces(alice, template, jpeg_bytes):
    """What the cluster receives: the reference photo beside the sources, named in the manifest."""
    import json

    from cluster import ClusterLimits
    from jobs.job.submit import stage

    face = send(alice, jpeg_bytes, "face.jpg", "source")
    target = send(alice, jpeg_bytes, "t.jpg", "target")
    person = send(alice, jpeg_bytes, "him.jpg", "reference")
    alice.post(reverse("job-new"), {"template": template.pk, "consent": "on", "source_uploads": [face.id],
                                    "target_uploads": [target.id], "face_selector": "reference",
                                    "reference_uploads": [person.id]})
    job = Job.objects.get()

    runner = FakeSSH()
    stage(runner, job, ClusterLimits())
    manifest = json.loads(runner.written[job.folder.manifest])
    assert manifest["engine"]["face_selector"] == "reference"
    assert runner.written[manifest["engine"]["reference_face"]] == jpeg_bytes
