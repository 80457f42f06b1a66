"""The New job page: the form, its template cards, Start, and the messages next to each field."""
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import Group
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from jobs.models import Job, Source, Target, Template


def photo(jpeg_bytes, name="face.jpg"):
    return SimpleUploadedFile(name, jpeg_bytes, content_type="image/jpeg")


def files_under_media() -> list[Path]:
    root = Path(settings.MEDIA_ROOT)
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


@pytest.fixture
def logged_in(client, owner):
    client.force_login(owner)
    return client


def test_it_sends_anonymous_users_to_login(client):
    r = client.get(reverse("job-new"))
    assert r.status_code == 302 and r["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("who", ["owner", "colleague", "stranger", "staff"])
def test_it_shows_the_form_to_every_user(client, request, template, who):
    client.force_login(request.getfixturevalue(who))
    assert client.get(reverse("job-new")).status_code == 200


def test_it_shows_template_cards_usable_by_the_user_only(logged_in, template, profile):
    other_team = Group.objects.create(name="marketing")
    secret = Template.objects.create(name="Marketing only", slug="marketing", cluster=profile, partition="gpu")
    secret.groups.add(other_team)
    Template.objects.create(name="Retired", slug="retired", cluster=profile, partition="gpu", is_active=False)
    body = logged_in.get(reverse("job-new")).content.decode()
    assert "Quick GPU" in body and "One GPU, ten images per task." in body
    assert "Marketing only" not in body and "Retired" not in body
    assert 'enctype="multipart/form-data"' in body
    assert "I have the right to process the faces in these photos" in body
    assert 'type="file" name="source"' in body and "multiple" in body  # the form without JavaScript


def test_it_says_so_when_no_template_is_available(logged_in):
    assert "No template is available to you yet" in logged_in.get(reverse("job-new")).content.decode()


def test_it_fills_the_folder_from_the_query_string(logged_in, template):
    body = logged_in.get(reverse("job-new") + "?target_folder=/srv/ffportal/storage/shoot%201").content.decode()
    assert 'value="/srv/ffportal/storage/shoot 1"' in body


def test_it_starts_a_job_from_uploaded_targets(logged_in, owner, template, jpeg_bytes):
    r = logged_in.post(reverse("job-new"), {
        "template": template.pk, "name": "Team photos", "consent": "on",
        "source": [photo(jpeg_bytes, "face-1.jpg"), photo(jpeg_bytes, "face-2.jpg")],
        "targets": [photo(jpeg_bytes, "group.jpg"), photo(jpeg_bytes, "写真.jpg")],
    })
    job = Job.objects.get()
    assert r.status_code == 302 and r["Location"] == reverse("job-detail", args=[job.id])
    assert job.owner == owner and job.name == "Team photos" and job.template == template
    assert job.consent_at is not None and job.total == 2 and job.target_folder == ""
    sources = list(Source.objects.filter(job=job).order_by("original_name"))
    assert [s.original_name for s in sources] == ["face-1.jpg", "face-2.jpg"]
    for s in sources:
        assert Path(s.file.path).read_bytes() == jpeg_bytes
        assert Path(s.file.path).is_relative_to(job.media_dir)
    assert [t.name for t in Target.objects.filter(job=job)] == ["group.jpg", "写真.jpg"]
    page = logged_in.get(r["Location"])
    assert "Job started." in page.content.decode()


def test_it_starts_a_job_on_a_cluster_folder(logged_in, template, jpeg_bytes):
    r = logged_in.post(reverse("job-new"), {
        "template": template.pk, "consent": "on", "source": photo(jpeg_bytes),
        "target_folder": " /srv/ffportal/storage/shoot-01 ",
    })
    assert r.status_code == 302
    job = Job.objects.get()
    assert job.target_folder == "/srv/ffportal/storage/shoot-01" and job.total == 0
    assert job.sources.count() == 1 and job.consent_at is not None


def assert_refused(response, field: str, message: str):
    assert response.status_code == 200
    form = response.context["form"]
    assert any(message in e for e in form.errors.get(field, [])), form.errors
    body = response.content.decode()
    assert f'id="id_{field}-errors"' in body and message in body  # shown next to its field
    assert Job.objects.count() == 0
    # nothing of a job is left behind; good files sent with the form are kept (as uploads) for the next try
    assert [p for p in files_under_media() if "/jobs/" in p.as_posix()] == []


def test_it_requires_consent(logged_in, template, jpeg_bytes):
    r = logged_in.post(reverse("job-new"), {"template": template.pk, "source": photo(jpeg_bytes),
                                            "targets": photo(jpeg_bytes, "t.jpg")})
    assert_refused(r, "consent", "Confirm that you have the right to process the faces")
    assert "The job was not started." in r.content.decode() and "choose them again" in r.content.decode()


def test_it_requires_a_source_photo(logged_in, template, jpeg_bytes):
    r = logged_in.post(reverse("job-new"), {"template": template.pk, "consent": "on",
                                            "targets": photo(jpeg_bytes, "t.jpg")})
    assert_refused(r, "source", "Upload at least one photo of the face")


def test_it_refuses_both_a_folder_and_uploaded_targets(logged_in, template, jpeg_bytes):
    r = logged_in.post(reverse("job-new"), {"template": template.pk, "consent": "on", "source": photo(jpeg_bytes),
                                            "target_folder": "/srv/ffportal/storage/a",
                                            "targets": photo(jpeg_bytes, "t.jpg")})
    assert_refused(r, "target_folder", "one of the two")


def test_it_refuses_neither_a_folder_nor_uploaded_targets(logged_in, template, jpeg_bytes):
    r = logged_in.post(reverse("job-new"), {"template": template.pk, "consent": "on", "source": photo(jpeg_bytes)})
    assert_refused(r, "target_folder", "one of the two")


@pytest.mark.parametrize("folder", ["/etc", "/srv/ffportal/storage/../../../etc", "/srv/ffportal/storage-evil"])
def test_it_refuses_a_folder_outside_the_allowed_roots(logged_in, template, jpeg_bytes, folder):
    r = logged_in.post(reverse("job-new"), {"template": template.pk, "consent": "on", "source": photo(jpeg_bytes),
                                            "target_folder": folder})
    assert_refused(r, "target_folder", "outside the folders you may use")


def test_it_refuses_a_text_file_as_a_face_photo(logged_in, template, jpeg_bytes):
    text = SimpleUploadedFile("face.jpg", b"just some text, not a photo\n" * 10, content_type="image/jpeg")
    r = logged_in.post(reverse("job-new"), {"template": template.pk, "consent": "on", "source": [photo(jpeg_bytes), text],
                                            "targets": photo(jpeg_bytes, "t.jpg")})
    assert_refused(r, "source", "this is not an image")


def test_it_refuses_a_text_file_as_a_target(logged_in, template, jpeg_bytes):
    text = SimpleUploadedFile("notes.jpg", b"hello\n" * 50, content_type="image/jpeg")
    r = logged_in.post(reverse("job-new"), {"template": template.pk, "consent": "on", "source": photo(jpeg_bytes),
                                            "targets": [photo(jpeg_bytes, "ok.jpg"), text]})
    assert_refused(r, "targets", "notes.jpg")


def test_it_asks_for_a_template(logged_in, template, jpeg_bytes):
    r = logged_in.post(reverse("job-new"), {"consent": "on", "source": photo(jpeg_bytes),
                                            "targets": photo(jpeg_bytes, "t.jpg")})
    assert_refused(r, "template", "Choose one of the templates")


def test_it_refuses_a_template_of_another_group(client, stranger, template, jpeg_bytes):
    restricted = Group.objects.create(name="marketing")
    template.groups.add(restricted)
    client.force_login(stranger)
    r = client.post(reverse("job-new"), {"template": template.pk, "consent": "on", "source": photo(jpeg_bytes),
                                         "targets": photo(jpeg_bytes, "t.jpg")})
    assert r.status_code == 200 and "template" in r.context["form"].errors
    assert Job.objects.count() == 0 and files_under_media() == []


def test_it_keeps_the_users_choices_after_a_refusal(logged_in, template, jpeg_bytes):
    r = logged_in.post(reverse("job-new"), {"template": template.pk, "name": "Keep me", "source": photo(jpeg_bytes),
                                            "target_folder": "/srv/ffportal/storage/x"})
    body = r.content.decode()
    assert 'value="Keep me"' in body and 'value="/srv/ffportal/storage/x"' in body
    assert f'value="{template.pk}"' in body and "checked" in body


# ---- a callback URL for programs, under "Advanced" (the webhooks page points to it) ----

@pytest.mark.parametrize("language, words", [
    ("en", ["Advanced", "Callback URL (for programs)", "a program of yours can pick up the results"]),
    ("zh-hans", ["高级选项", "回调地址（供程序使用）", "方便您的程序取回结果"])])
def test_it_offers_a_callback_url_under_advanced(logged_in, template, language, words):
    logged_in.cookies[settings.LANGUAGE_COOKIE_NAME] = language
    body = logged_in.get(reverse("job-new")).content.decode()
    assert '<details class="advanced" id="advanced">' in body and 'name="callback_url"' in body
    for w in words:
        assert w in body


def test_it_refuses_a_private_callback_next_to_its_field_and_keeps_it(logged_in, template, jpeg_bytes):
    r = logged_in.post(reverse("job-new"), {"template": template.pk, "consent": "on", "source": photo(jpeg_bytes),
                                            "targets": photo(jpeg_bytes, "t.jpg"),
                                            "callback_url": "http://169.254.169.254/latest/meta-data"})
    assert_refused(r, "callback_url", "is a private, loopback or link-local address")
    body = r.content.decode()
    assert '<details class="advanced" id="advanced" open>' in body  # opened where the problem is
    assert 'value="http://169.254.169.254/latest/meta-data"' in body


def test_it_starts_a_job_that_calls_back(logged_in, template, jpeg_bytes, monkeypatch):
    from jobs.webhooks import guard
    monkeypatch.setattr(guard, "resolve", lambda host, port: ["93.184.216.34"])  # the DNS seam: a public address
    r = logged_in.post(reverse("job-new"), {"template": template.pk, "consent": "on", "source": photo(jpeg_bytes),
                                            "targets": photo(jpeg_bytes, "t.jpg"),
                                            "callback_url": " https://hooks.example.com/ffp "})
    assert r.status_code == 302 and Job.objects.get().callback_url == "https://hooks.example.com/ffp"


@pytest.mark.parametrize("language, words", [
    ("en", "Give a callback URL when you start a job (on <a href=\"/jobs/new/\">New job</a>, under “Advanced”"),
    ("zh-hans", "在<a href=\"/jobs/new/\">新建任务</a>页面的“高级选项”里")])
def test_the_webhooks_page_says_where_the_callback_is_given(logged_in, language, words):
    logged_in.cookies[settings.LANGUAGE_COOKIE_NAME] = language
    body = logged_in.get(reverse("webhooks")).content.decode()
    assert words.replace("/jobs/new/", reverse("job-new")) in body
