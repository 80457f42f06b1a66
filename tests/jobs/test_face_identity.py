"""Face photos of different people are not blended silently (jobs.uploads.identity): each face photo's
descriptor is measured when it arrives; Start refuses photos of different people, in the reader's
language, until one is removed or the user says they are the same person (the form's tick, the
API's `mixed_faces_ok`); one person's photos, mirrored or cropped, go through."""
import io

import cv2
import numpy as np
import pytest
from django.urls import reverse
from PIL import Image

from jobs.models import Job
from tests.worker.photos import astronaut, t1_path

from .api_helpers import token_client
from .test_uploads_tus import send

WARNING_EN = "These face photos seem to show different people"
WARNING_ZH = "这些人脸照片看起来是不同的人"


def jpeg(rgb: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


@pytest.fixture(scope="module")
def photos():
    """Eileen Collins (scikit-image's astronaut), mirrored, cropped; and a man from insightface's t1."""
    eileen = np.ascontiguousarray(astronaut()[:, :, ::-1])
    group = cv2.cvtColor(cv2.imread(str(t1_path())), cv2.COLOR_BGR2RGB)
    stranger = np.ascontiguousarray(group[180:520, 330:700])  # one face of the group, cut out
    return {"eileen": jpeg(eileen), "mirrored": jpeg(np.ascontiguousarray(eileen[:, ::-1])),
            "cropped": jpeg(np.ascontiguousarray(eileen[10:470, 25:495])), "stranger": jpeg(stranger)}


@pytest.fixture
def alice(client, owner):
    client.force_login(owner)
    return client


def start(client, template, faces, targets, **extra):
    return client.post(reverse("job-new"), {"template": template.pk, "consent": "on",
                                            "source_uploads": [f.id for f in faces],
                                            "target_uploads": [t.id for t in targets], **extra})


@pytest.mark.parametrize("language, warning", [("en", WARNING_EN), ("zh-hans", WARNING_ZH)])
def test_faces_of_two_people_are_refused_until_the_user_says_they_are_one(alice, template, photos, jpeg_bytes,
                                                                          language, warning):
    alice.cookies["django_language"] = language
    faces = [send(alice, photos["eileen"], "her.jpg", "source"), send(alice, photos["stranger"], "him.jpg", "source")]
    assert all(len(f.info["descriptor"]) == 128 for f in faces)
    target = send(alice, jpeg_bytes, "t.jpg", "target")
    r = start(alice, template, faces, [target], HTTP_ACCEPT_LANGUAGE=language)
    assert r.status_code == 200 and not Job.objects.exists()
    assert warning in r.content.decode()
    r = start(alice, template, faces, [target], mixed_faces_ok="on")
    assert r.status_code == 302 and Job.objects.get().sources.count() == 2


def test_one_persons_photos_mirrored_or_cropped_start_without_a_word(alice, template, photos, jpeg_bytes):
    faces = [send(alice, photos[k], f"{k}.jpg", "source") for k in ("eileen", "mirrored", "cropped")]
    target = send(alice, jpeg_bytes, "t.jpg", "target")
    r = start(alice, template, faces, [target])
    assert r.status_code == 302, r.content.decode()[:3000]


def test_the_new_job_page_carries_the_warning_and_the_tick(alice, template):
    body = alice.get(reverse("job-new")).content.decode()
    assert WARNING_EN in body and 'name="mixed_faces_ok"' in body and 'data-same-person-max="0.6"' in body


def test_the_api_refuses_two_people_unless_mixed_faces_ok(owner, template, photos, jpeg_bytes):
    api = token_client(owner)[0]
    faces = [("her.jpg", photos["eileen"]), ("him.jpg", photos["stranger"])]

    def files():
        from django.core.files.uploadedfile import SimpleUploadedFile

        return {"source": [SimpleUploadedFile(n, d, "image/jpeg") for n, d in faces],
                "targets": [SimpleUploadedFile("t.jpg", jpeg_bytes, "image/jpeg")]}

    r = api.post("/api/v1/jobs", {"template": template.slug, "consent": "true", **files()})
    assert r.status_code == 400 and r.json()["field"] == "source" and WARNING_EN in r.json()["error"]
    r = api.post("/api/v1/jobs", {"template": template.slug, "consent": "true", "mixed_faces_ok": "true", **files()})
    assert r.status_code == 201, r.content
