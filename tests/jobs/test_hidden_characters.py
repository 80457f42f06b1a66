"""Names people read never carry a bidi override (U+202E makes "a\u202egpj.exe" read "aexe.jpg") or
another hidden format character: they are saved without them (jobs.uploads.content.without_hidden_characters),
a job's name, a booking's, every file's as sent by a form, the API or tus, so no page, admin page or
live message shows one."""
from __future__ import annotations

import base64
import json

import pytest

from jobs.models import Booking, Job, Upload

from .api_helpers import image, session_client, token_client
from .booking_helpers import h200, policy, seed_json  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db

RLO = "\u202e"
HIDDEN = "\u202e\u202d\u2066\u2067\u2069\u200b\ufeff"


def assert_plain(response) -> str:
    assert response.status_code == 200, response
    body = b"".join(response.streaming_content) if response.streaming else response.content
    text = body.decode()
    for c in HIDDEN:
        assert c not in text, f"U+{ord(c):04X} shown raw"
    return text


def test_a_job_and_its_files_sent_with_the_api_are_shown_without_them(owner, staff, template, jpeg_bytes):
    api, _key = token_client(owner)
    r = api.post("/api/v1/jobs", {"template": template.slug, "consent": "true", "name": f"Invoice {RLO}gpj.exe",
                                  "source": [image(f"face{RLO}gnp.jpg", jpeg_bytes)],
                                  "targets": [image(f"shot{RLO}4pm.jpg", jpeg_bytes)]})
    assert r.status_code == 201, r.content
    job = Job.objects.get()
    assert job.name == "Invoice gpj.exe"
    assert [t.name for t in job.targets.all()] == ["shot4pm.jpg"]
    assert [s.original_name for s in job.sources.all()] == ["facegnp.jpg"]

    page = session_client(owner)
    assert "Invoice gpj.exe" in assert_plain(page.get("/"))
    assert "shot4pm.jpg" in assert_plain(page.get(f"/jobs/{job.id}"))
    assert_plain(page.get(f"/jobs/{job.id}/live.json"))
    assert_plain(page.get("/jobs/live.json"))
    assert_plain(api.get(f"/api/v1/jobs/{job.id}"))
    admin = session_client(staff)
    assert "Invoice gpj.exe" in assert_plain(admin.get("/admin/jobs/job/"))
    assert "shot4pm.jpg" in assert_plain(admin.get(f"/admin/jobs/job/{job.id}/change/"))


def test_a_file_sent_ahead_over_tus_is_listed_without_them(owner, staff):
    client = session_client(owner)
    meta = ",".join(f"{k} {base64.b64encode(v.encode()).decode()}"
                    for k, v in {"filename": f"clip{RLO}4pm.mp4", "kind": "target"}.items())
    r = client.post("/uploads/", HTTP_UPLOAD_LENGTH="10", HTTP_UPLOAD_METADATA=meta, HTTP_TUS_RESUMABLE="1.0.0")
    assert r.status_code == 201
    assert Upload.objects.get().name == "clip4pm.mp4"
    assert "clip4pm.mp4" in assert_plain(client.get("/uploads/"))
    assert "clip4pm.mp4" in assert_plain(session_client(staff).get("/admin/jobs/upload/"))


def test_a_bookings_name_is_shown_without_them(owner, staff, h200, policy):
    api, _key = token_client(owner)
    r = api.post("/api/v1/bookings", json.dumps(seed_json(task_name=f"Episode {RLO}5 {HIDDEN}")),
                 content_type="application/json")
    assert r.status_code == 201, r.content
    booking = Booking.objects.get()
    assert booking.task_name == "Episode 5"
    assert "Episode 5" in assert_plain(session_client(owner).get("/bookings/"))
    assert_plain(session_client(owner).get(f"/bookings/{booking.id}"))
    assert "Episode 5" in assert_plain(session_client(staff).get("/admin/jobs/booking/"))


def test_a_name_of_nothing_but_them_is_still_a_name(owner, template, jpeg_bytes):
    api, _key = token_client(owner)
    r = api.post("/api/v1/jobs", {"template": template.slug, "consent": "true", "name": HIDDEN,
                                  "source": [image("face.jpg", jpeg_bytes)],
                                  "targets": [image(f"{HIDDEN}.jpg", jpeg_bytes)]})
    assert r.status_code == 201, r.content
    job = Job.objects.get()
    assert job.name == "" and [t.name for t in job.targets.all()] == [".jpg"]
    assert str(job) == str(job.id)  # an empty name reads as the job's id, as for a job without one
