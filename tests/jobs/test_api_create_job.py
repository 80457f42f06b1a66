"""POST /api/v1/jobs: start a job from multipart form data."""
import pytest
from django.contrib.auth.models import Group

from jobs.models import Job, JobStatus, Template

from .api_helpers import image, token_client

URL = "/api/v1/jobs"


@pytest.fixture
def api(owner):
    return token_client(owner)[0]


@pytest.fixture
def form(template, jpeg_bytes):
    """A complete, valid form with two uploaded targets; tests take fields away."""
    def build(**changes):
        data = {"template": template.slug, "source": [image("face.jpg", jpeg_bytes)],
                "targets": [image("a.jpg", jpeg_bytes), image("b.jpg", jpeg_bytes)], "consent": "true"}
        data.update(changes)
        return {k: v for k, v in data.items() if v is not None}
    return build


def test_it_creates_a_job_from_uploaded_targets(api, owner, form):
    r = api.post(URL, form(name="Shoot 1", callback_url="https://hooks.example.org/ff"))
    assert r.status_code == 201, r.content
    body = r.json()
    assert set(body) == {"id", "status", "url"}
    assert body["status"] == "queued"
    assert body["url"] == f"http://testserver/api/v1/jobs/{body['id']}"
    assert r["Location"] == body["url"]
    job = Job.objects.get(pk=body["id"])
    assert job.owner == owner and job.name == "Shoot 1" and job.callback_url == "https://hooks.example.org/ff"
    assert job.total == 2 and job.targets.count() == 2 and job.sources.count() == 1
    assert job.consent_at is not None
    assert job.template_snapshot["slug"] == "quick-gpu"
    # The url it answers is the job's API address.
    assert api.get(body["url"]).json()["id"] == body["id"]


def test_it_creates_a_job_from_a_target_folder(api, form):
    r = api.post(URL, form(targets=None, target_folder="/srv/ffportal/storage/shoot-2"))
    assert r.status_code == 201, r.content
    job = Job.objects.get(pk=r.json()["id"])
    assert job.target_folder == "/srv/ffportal/storage/shoot-2"
    assert job.status == JobStatus.QUEUED


@pytest.mark.parametrize("missing, field", [
    ("template", "template"), ("source", "source"), ("targets", "target_folder"), ("consent", "consent"),
])
def test_it_names_the_missing_field(api, form, missing, field):
    r = api.post(URL, form(**{missing: None}))
    assert r.status_code == 400
    assert r.json()["field"] == field
    assert r.json()["error"]
    assert not Job.objects.exists()


@pytest.mark.parametrize("consent", ["false", "", "no"])
def test_it_requires_consent_to_be_true(api, form, consent):
    r = api.post(URL, form(consent=consent))
    assert r.status_code == 400 and r.json()["field"] == "consent"


def test_it_refuses_a_folder_and_uploads_together(api, form):
    r = api.post(URL, form(target_folder="/srv/ffportal/storage/x"))
    assert r.status_code == 400 and r.json()["field"] == "target_folder"


def test_it_refuses_a_source_that_is_not_an_image(api, form):
    r = api.post(URL, form(source=[image("face.jpg", b"#!/bin/sh\necho not a photo\n")]))
    assert r.status_code == 400
    assert r.json()["field"] == "source"
    assert "face.jpg" in r.json()["error"]
    assert not Job.objects.exists()


def test_it_refuses_a_target_that_is_not_media(api, form, jpeg_bytes):
    r = api.post(URL, form(targets=[image("a.jpg", jpeg_bytes), image("notes.jpg", b"plain text")]))
    assert r.status_code == 400 and r.json()["field"] == "targets"
    assert not Job.objects.exists()


@pytest.mark.parametrize("folder", ["/etc", "/srv/ffportal/storage/../../../etc", "/srv/ffportal/storage-other"])
def test_it_refuses_a_folder_outside_the_roots(api, form, folder):
    r = api.post(URL, form(targets=None, target_folder=folder))
    assert r.status_code == 400 and r.json()["field"] == "target_folder"
    assert not Job.objects.exists()


def test_it_refuses_an_unknown_template(api, form):
    r = api.post(URL, form(template="no-such-template"))
    assert r.status_code == 400 and r.json()["field"] == "template"


def test_it_refuses_a_template_of_another_group(api, form, owner, colleague, template, profile, jpeg_bytes):
    other = Group.objects.create(name="animation")
    locked = Template.objects.create(name="Animation only", slug="animation", cluster=profile, partition="gpu")
    locked.groups.add(other)
    r = api.post(URL, form(template="animation"))
    assert r.status_code == 400 and r.json()["field"] == "template"
    # ... while a member of that group may use it.
    colleague.groups.add(other)
    r = token_client(colleague)[0].post(URL, form(template="animation"))
    assert r.status_code == 201, r.content


def test_it_refuses_an_inactive_template(api, form, template):
    Template.objects.filter(pk=template.pk).update(is_active=False)
    r = api.post(URL, form())
    assert r.status_code == 400 and r.json()["field"] == "template"


@pytest.mark.parametrize("url", ["ftp://example.org/x", "not a url", "javascript:alert(1)"])
def test_it_refuses_a_callback_that_is_not_http(api, form, url):
    r = api.post(URL, form(callback_url=url))
    assert r.status_code == 400 and r.json()["field"] == "callback_url"
    assert not Job.objects.exists()


def test_it_answers_json_when_django_refuses_the_body(api, form, settings, jpeg_bytes):
    settings.DATA_UPLOAD_MAX_NUMBER_FILES = 2
    r = api.post(URL, form(targets=[image("a.jpg", jpeg_bytes), image("b.jpg", jpeg_bytes)]))
    assert r.status_code == 400
    assert r.json()["error"]
    assert not Job.objects.exists()
