"""The audit log: an entry for each audited action, `record` never fails its caller, and the log
is read-only in the admin for everyone (superusers included); non-staff never reach the admin."""
import logging

import pytest
from django.db import transaction
from django.urls import reverse

from jobs import audit
from jobs.models import AuditEntry, ClusterProfile, Job, JobStatus, Target, TargetStatus, Template

from .admin_helpers import profile_form, template_form
from .api_helpers import image, make_job, token_client

KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAASECRETSECRET\n-----END OPENSSH PRIVATE KEY-----\n"


def entries(action: str) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(action=action).order_by("pk"))


@pytest.fixture
def admin_client(client, staff):
    client.force_login(staff)
    return client


@pytest.fixture
def finished_job(owner, template, jpeg_bytes):
    """A completed job with one fetched output and its uploaded input."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    job = Job.objects.create(owner=owner, template=template, template_snapshot=template.snapshot().to_json(),
                             cluster=template.cluster, name="Audited", status=JobStatus.COMPLETED, total=1, done=1)
    outputs = job.media_dir / "outputs"
    outputs.mkdir(parents=True)
    (outputs / "a.jpg").write_bytes(jpeg_bytes)
    Target.objects.create(job=job, index=0, name="a.jpg", output_name="a.jpg", status=TargetStatus.DONE,
                          output_file=str(outputs / "a.jpg"), upload=SimpleUploadedFile("a.jpg", jpeg_bytes))
    return job


def drain(response) -> None:
    assert response.status_code == 200
    b"".join(response.streaming_content)  # the test client closes the response at the end


# ---- record() ----

def test_it_records_who_did_what_to_which_object(owner, template, rf):
    request = rf.get("/", REMOTE_ADDR="192.0.2.7")
    entry = audit.record(owner, "job.start", target=template, details={"n": 1}, request=request)
    entry.refresh_from_db()
    assert (entry.actor, entry.actor_name, entry.action) == (owner, "alice", "job.start")
    assert (entry.target_type, entry.target_id, entry.target_repr) == ("jobs.template", str(template.pk), "Quick GPU")
    assert entry.details == {"n": 1} and entry.ip == "192.0.2.7" and entry.at is not None


def test_it_keeps_the_actors_name_after_the_user_is_deleted(owner):
    entry = audit.record(owner, "auth.login")
    owner.delete()
    entry.refresh_from_db()
    assert entry.actor is None and entry.actor_name == "alice"


def test_it_never_raises_into_the_caller(owner, caplog):
    with caplog.at_level(logging.ERROR, logger="jobs.audit"):
        assert audit.record(owner, "job.start", details={"not json": object()}) is None
    assert "could not record job.start" in caplog.text
    assert AuditEntry.objects.count() == 0


def test_it_leaves_the_callers_transaction_usable_when_it_fails(owner, monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(AuditEntry.objects, "create", broken)
    with transaction.atomic():
        assert audit.record(owner, "job.cancel") is None
        owner.first_name = "Alice"
        owner.save()  # the caller goes on in the same transaction
    owner.refresh_from_db()
    assert owner.first_name == "Alice"


def test_it_ignores_forwarded_for_headers(owner, rf):
    request = rf.get("/", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.9")
    assert audit.record(owner, "auth.login", request=request).ip == "127.0.0.1"


# ---- logins ----

def test_it_records_a_login_and_a_logout(client, owner):
    r = client.post(reverse("login"), {"username": "alice", "password": "alice-pass-123"})
    assert r.status_code == 302
    (login,) = entries("auth.login")
    assert login.actor == owner and login.ip == "127.0.0.1"
    client.post(reverse("logout"))
    (logout,) = entries("auth.logout")
    assert logout.actor == owner


def test_it_records_a_failed_login_with_the_name_never_the_password(client, owner):
    r = client.post(reverse("login"), {"username": "alice", "password": "wrong-guess-999"})
    assert r.status_code == 200
    (entry,) = entries("auth.login_failed")
    # The request's id (its X-Request-ID, also in its log lines) comes with the facts.
    assert entry.actor is None and entry.details == {"username": "alice", "request_id": r["X-Request-ID"]}
    assert entry.ip == "127.0.0.1"
    assert "wrong-guess-999" not in str(entry.details)
    assert entries("auth.login") == []


# ---- jobs: start, cancel, downloads ----

def test_it_records_a_start_from_the_page(client, owner, template, jpeg_bytes):
    client.force_login(owner)
    r = client.post(reverse("job-new"), {"template": template.pk, "consent": "on",
                                         "source": image("face.jpg", jpeg_bytes), "targets": image("t.jpg", jpeg_bytes)})
    assert r.status_code == 302
    job = Job.objects.get()
    (entry,) = entries("job.start")
    assert entry.actor == owner and entry.target_type == "jobs.job" and entry.target_id == str(job.id)
    assert entry.details["template"] == "quick-gpu" and entry.details["consent_at"]


def test_it_records_a_start_through_the_api(owner, template, jpeg_bytes):
    api = token_client(owner)[0]
    r = api.post("/api/v1/jobs", {"template": template.slug, "source": [image("face.jpg", jpeg_bytes)],
                                  "targets": [image("t.jpg", jpeg_bytes)], "consent": "true"})
    assert r.status_code == 201
    (entry,) = entries("job.start")
    assert entry.actor == owner and entry.target_id == r.json()["id"]


def test_it_records_no_start_when_start_is_refused(client, owner, template, jpeg_bytes):
    client.force_login(owner)
    client.post(reverse("job-new"), {"template": template.pk, "source": image("face.jpg", jpeg_bytes),
                                     "targets": image("t.jpg", jpeg_bytes)})  # no consent
    assert Job.objects.count() == 0 and entries("job.start") == []


def test_it_records_a_cancel_from_the_page(client, owner, template):
    job = make_job(owner, template)
    client.force_login(owner)
    client.post(reverse("job-cancel", args=[job.id]))
    (entry,) = entries("job.cancel")
    assert entry.actor == owner and entry.target_id == str(job.id) and entry.details["status_before"] == "queued"
    client.post(reverse("job-cancel", args=[job.id]))  # already cancelled: nothing happens, nothing recorded
    assert len(entries("job.cancel")) == 1


def test_it_records_a_cancel_through_the_api(staff, owner, template, monkeypatch):
    monkeypatch.setattr("django_rq.get_queue", lambda name="default": type("Q", (), {"enqueue": lambda *a, **k: None})())
    job = make_job(owner, template, status=JobStatus.RUNNING)
    Job.objects.filter(pk=job.pk).update(slurm_job_id="4242")
    assert token_client(staff)[0].post(f"/api/v1/jobs/{job.id}/cancel").status_code == 404  # not theirs
    assert entries("job.cancel") == []
    r = token_client(owner)[0].post(f"/api/v1/jobs/{job.id}/cancel")
    assert r.status_code == 200
    (entry,) = entries("job.cancel")
    assert entry.actor == owner and entry.details == {"status_before": "running", "slurm_job_id": "4242",
                                                      "request_id": r["X-Request-ID"]}


def test_it_records_downloads_from_the_pages(client, owner, finished_job):
    client.force_login(owner)
    drain(client.get(reverse("job-output", args=[finished_job.id, 0]), {"download": "1"}))
    drain(client.get(reverse("job-input", args=[finished_job.id, 0]), {"download": "1"}))
    drain(client.get(reverse("job-results-zip", args=[finished_job.id])))
    got = [(e.details["file"], e.details["via"], e.target_id, e.actor) for e in entries("job.download")]
    assert got == [("output", "page", str(finished_job.id), owner), ("input", "page", str(finished_job.id), owner),
                   ("zip", "page", str(finished_job.id), owner)]
    assert entries("job.download")[0].details["name"] == "a.jpg"


def test_it_does_not_count_showing_a_picture_as_a_download(client, owner, finished_job):
    client.force_login(owner)
    drain(client.get(reverse("job-output", args=[finished_job.id, 0])))  # the before/after page's <img>
    drain(client.get(reverse("job-input", args=[finished_job.id, 0])))
    assert entries("job.download") == []


def test_it_records_no_download_of_someone_elses_job(client, stranger, finished_job):
    client.force_login(stranger)
    assert client.get(reverse("job-results-zip", args=[finished_job.id])).status_code == 404
    assert entries("job.download") == []


def test_it_records_downloads_through_the_api(owner, finished_job):
    api = token_client(owner)[0]
    drain(api.get(f"/api/v1/jobs/{finished_job.id}/results.zip"))
    drain(api.get(f"/api/v1/jobs/{finished_job.id}/outputs/0"))
    got = [(e.details["file"], e.details["via"], e.actor) for e in entries("job.download")]
    assert got == [("zip", "api", owner), ("output", "api", owner)]


# ---- admin changes ----

def test_it_records_a_template_change_with_the_changed_fields(admin_client, staff, template, team):
    r = admin_client.post(reverse("admin:jobs_template_change", args=[template.pk]),
                          template_form(template, time_limit="01:00:00", mem="8G", groups=[team.pk]))
    assert r.status_code == 302, r.context["adminform"].form.errors if r.context else r
    (entry,) = entries("template.change")
    assert entry.actor == staff and entry.target_id == str(template.pk) and entry.target_repr == "Quick GPU"
    assert entry.details == {"changed": {"time_limit": {"from": "00:10:00", "to": "01:00:00"},
                                         "mem": {"from": "2G", "to": "8G"},
                                         "groups": {"from": [], "to": ["vfx"]}}, "request_id": r["X-Request-ID"]}


def test_it_names_a_changed_foreign_key_rather_than_its_id(admin_client, template, profile):
    other = ClusterProfile.objects.create(name="Big iron", slug="big", host="h", username="u", private_key="k",
                                          known_hosts="x", work_root="/w", target_roots=["/s"])
    r = admin_client.post(reverse("admin:jobs_template_change", args=[template.pk]),
                          template_form(template, cluster=other.pk))
    assert r.status_code == 302
    (entry,) = entries("template.change")
    assert entry.details == {"changed": {"cluster": {"from": "Local", "to": "Big iron"}},
                             "request_id": r["X-Request-ID"]}


def test_it_records_nothing_when_a_template_is_saved_unchanged(admin_client, template):
    assert admin_client.post(reverse("admin:jobs_template_change", args=[template.pk]),
                             template_form(template)).status_code == 302
    assert entries("template.change") == []


def test_it_records_adding_and_deleting_a_template(admin_client, template):
    r = admin_client.post(reverse("admin:jobs_template_add"), template_form(template, name="Copy", slug="copy"))
    assert r.status_code == 302
    copy = Template.objects.get(slug="copy")
    (added,) = entries("template.add")
    assert added.target_id == str(copy.pk) and added.details["fields"]["time_limit"] == "00:10:00"
    r = admin_client.post(reverse("admin:jobs_template_delete", args=[copy.pk]), {"post": "yes"})
    assert r.status_code == 302 and not Template.objects.filter(slug="copy").exists()
    (deleted,) = entries("template.delete")
    assert (deleted.target_id, deleted.target_repr) == (str(copy.pk), "Copy")


def test_it_records_deleting_templates_from_the_list(admin_client, template):
    other = Template.objects.create(name="Other", slug="other", cluster=template.cluster, partition="gpu")
    r = admin_client.post(reverse("admin:jobs_template_changelist"),
                          {"action": "delete_selected", "_selected_action": [other.pk], "post": "yes"})
    assert r.status_code == 302
    assert [e.target_repr for e in entries("template.delete")] == ["Other"]


def test_it_records_a_profile_change_without_the_keys_value(admin_client, profile):
    url = reverse("admin:jobs_clusterprofile_change", args=[profile.pk])
    r = admin_client.post(url, profile_form(profile, private_key=KEY, port=2200))
    assert r.status_code == 302
    (entry,) = entries("profile.change")
    assert entry.details == {"changed": {"port": {"from": 2222, "to": 2200}, "private_key": "SSH private key changed"},
                             "request_id": r["X-Request-ID"]}
    assert "SECRETSECRET" not in str(entry.details) and "not-a-real-key" not in str(entry.details)
    # Left empty, the key is kept: not a change.
    r = admin_client.post(url, profile_form(profile, port=2201))
    assert r.status_code == 302
    assert entries("profile.change")[1].details == {"changed": {"port": {"from": 2200, "to": 2201}},
                                                    "request_id": r["X-Request-ID"]}
    assert ClusterProfile.objects.get().private_key == KEY


def test_it_never_puts_a_new_profiles_key_in_the_log(admin_client, profile):
    r = admin_client.post(reverse("admin:jobs_clusterprofile_add"), profile_form(profile, name="B", slug="b", private_key=KEY))
    assert r.status_code == 302
    (entry,) = entries("profile.add")
    assert "private_key" not in entry.details["fields"] and "SECRETSECRET" not in str(entry.details)


def test_it_audits_quota_changes_in_the_admin(admin_client, staff, owner):
    from django.contrib import admin as django_admin

    from jobs.admin.base import AuditedAdmin
    from jobs.models import Quota

    model_admin = django_admin.site._registry.get(Quota)
    assert isinstance(model_admin, AuditedAdmin), "register Quota's admin as an AuditedAdmin"
    quota = Quota.objects.create(user=owner, max_concurrent_jobs=2)
    data = {"user": owner.pk, "group": "", "max_concurrent_jobs": 5, "max_targets_per_job": "", "max_upload_mb": "",
            "gpu_hours_per_month": "", "note": ""}
    r = admin_client.post(reverse("admin:jobs_quota_change", args=[quota.pk]), data)
    assert r.status_code == 302, r.context["adminform"].form.errors if r.context else r
    (entry,) = entries("quota.change")
    assert entry.actor == staff and entry.details["changed"]["max_concurrent_jobs"] == {"from": 2, "to": 5}


# ---- the audit log in the admin ----

def test_it_shows_the_log_to_staff_filtered_and_searchable(admin_client, owner, template):
    audit.record(owner, "job.cancel", target=template)
    audit.record(owner, "auth.login", target=owner)
    url = reverse("admin:jobs_auditentry_changelist")
    r = admin_client.get(url, {"action": "job.cancel"})
    assert r.status_code == 200 and [e.action for e in r.context["cl"].result_list] == ["job.cancel"]
    r = admin_client.get(url, {"actor__id__exact": owner.pk})
    assert len(r.context["cl"].result_list) == 2
    r = admin_client.get(url, {"q": "Quick GPU"})
    assert [e.action for e in r.context["cl"].result_list] == ["job.cancel"]
    r = admin_client.get(url, {"q": str(owner.pk)})
    assert "auth.login" in [e.action for e in r.context["cl"].result_list]
    from django.utils import timezone

    today = timezone.localdate()
    r = admin_client.get(url, {"at__year": today.year, "at__month": today.month, "at__day": today.day})
    # the two above, and the admin's own login (force_login sends the same signal as a real one)
    assert r.status_code == 200 and len(r.context["cl"].result_list) == 3


def test_it_keeps_the_log_read_only_even_for_superusers(admin_client, staff, owner):
    assert staff.is_superuser
    entry = audit.record(owner, "auth.login", target=owner, details={"x": 1})
    assert admin_client.get(reverse("admin:jobs_auditentry_add")).status_code == 403
    change_url = reverse("admin:jobs_auditentry_change", args=[entry.pk])
    page = admin_client.get(change_url)
    assert page.status_code == 200
    body = page.content.decode()
    assert 'name="_save"' not in body and 'name="action"' not in body and "auth.login" in body
    assert admin_client.post(change_url, {"action": "tampered"}).status_code == 403
    assert admin_client.post(reverse("admin:jobs_auditentry_delete", args=[entry.pk]), {"post": "yes"}).status_code == 403
    listing = admin_client.get(reverse("admin:jobs_auditentry_changelist"))
    assert "delete_selected" not in listing.content.decode()
    admin_client.post(reverse("admin:jobs_auditentry_changelist"),
                      {"action": "delete_selected", "_selected_action": [entry.pk], "post": "yes"})
    entry.refresh_from_db()
    assert entry.action == "auth.login" and AuditEntry.objects.filter(pk=entry.pk).exists()


@pytest.mark.parametrize("who", ["owner", "stranger"])
@pytest.mark.parametrize("page", ["admin:index", "admin:jobs_auditentry_changelist", "admin:jobs_template_changelist",
                                  "admin:jobs_clusterprofile_changelist"])
def test_it_keeps_non_staff_out_of_the_admin(client, request, who, page):
    client.force_login(request.getfixturevalue(who))
    r = client.get(reverse(page))
    assert r.status_code == 302 and r["Location"].startswith(reverse("admin:login"))


def test_it_lets_staff_into_the_admin(admin_client):
    for page in ("admin:index", "admin:jobs_auditentry_changelist"):
        assert admin_client.get(reverse(page)).status_code == 200
