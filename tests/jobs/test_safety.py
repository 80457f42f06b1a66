"""The optional content check on the portal's side, with the REAL NudeNet model: off by default
(nothing checked, no model loaded); on, a refused face photo is refused in plain words at upload and
at Start and audited; the manifest carries the settings; a result the worker held back reads as
plain words and is audited once.

A refusal is exercised without indecent images: the model finds FACE_FEMALE on the astronaut, so
settings that refuse that label refuse her photo as they would refuse nudity.
"""
from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

import worker.content_safety
from jobs import content_safety
from jobs.models import AuditEntry, Job, SafetyPolicy, TargetStatus
from worker.content_safety import DEFAULT_REFUSE

from .api_helpers import image, token_client
from .test_model_sets import staged_manifest, started_job
from .test_uploads_tus import send
from .test_watcher import SAMPLES, CannedSlurm, done, fake, make_job, record, settle  # noqa: F401 - `fake` is a fixture

REFUSED = "this photo was refused by the content check; choose another photo"


@pytest.fixture
def alice(client, owner):
    client.force_login(owner)
    return client


@pytest.fixture
def no_model(monkeypatch):
    """Any attempt to load a checker fails the test."""
    content_safety._checkers.clear()
    monkeypatch.setattr(worker.content_safety, "load_checker", lambda spec: pytest.fail("loaded the content-check model"))


def turn_on(**fields) -> SafetyPolicy:
    content_safety._checkers.clear()
    policy = SafetyPolicy(pk=1, enabled=True, **fields)
    policy.full_clean()
    policy.save()
    return policy


@pytest.fixture
def faces_refused(db):
    """On, refusing the face label the model finds on the astronaut."""
    return turn_on(refuse="FACE_FEMALE, FACE_MALE", min_score=0.3)


def refusals():
    return list(AuditEntry.objects.filter(action="content_check.refused").order_by("at"))


def test_it_is_off_by_default_and_checks_nothing(alice, owner, template, jpeg_bytes, no_model):
    policy = SafetyPolicy.current()
    assert (policy.enabled, policy.refused_labels, policy.min_score, policy.plugin) == (False, DEFAULT_REFUSE, 0.5, "nudenet")
    up = send(alice, jpeg_bytes, "face.jpg", "source")
    assert up.status == "ready" and "content_checked" not in up.info
    r = alice.post(reverse("job-new"), {"template": template.pk, "consent": "on", "source_uploads": [up.id],
                                        "targets": [SimpleUploadedFile("t.jpg", jpeg_bytes, "image/jpeg")]})
    assert r.status_code == 302 and Job.objects.count() == 1
    assert "safety" not in staged_manifest(started_job(owner, template, jpeg_bytes))
    assert refusals() == []


def test_a_refused_face_photo_is_refused_when_it_arrives_and_audited(alice, owner, jpeg_bytes, faces_refused):
    up = send(alice, jpeg_bytes, "holiday-with-anna.jpg", "source")
    assert (up.status, up.problem) == ("refused", REFUSED)
    [entry] = refusals()
    assert entry.actor == owner
    assert entry.details["kind"] == "source" and entry.details["upload"] == str(up.id)
    assert entry.details["labels"][0][0] == "FACE_FEMALE" and 0.3 <= entry.details["labels"][0][1] <= 1
    # what was refused and why, never which file: no name, no image data
    assert "holiday" not in str(entry.details) + entry.target_repr


def test_on_without_its_model_a_photo_is_refused_not_used_unchecked(alice, monkeypatch, jpeg_bytes, faces_refused):
    def missing(spec):
        raise worker.content_safety.ModelError("the content check is on but its model is not installed")

    monkeypatch.setattr(worker.content_safety, "load_checker", missing)
    up = send(alice, jpeg_bytes, "face.jpg", "source")
    assert (up.status, up.problem) == ("refused", "the content check cannot run on the portal right now; "
                                                  "tell your administrator")


def test_with_the_default_labels_a_face_photo_is_checked_and_passes(alice, jpeg_bytes):
    turn_on()
    up = send(alice, jpeg_bytes, "face.jpg", "source")
    assert up.status == "ready" and up.info["content_checked"] is True
    assert refusals() == []


def test_a_photo_sent_with_the_start_form_is_refused_in_plain_words(alice, template, jpeg_bytes, faces_refused):
    r = alice.post(reverse("job-new"), {"template": template.pk, "consent": "on",
                                        "source": SimpleUploadedFile("face.jpg", jpeg_bytes, "image/jpeg"),
                                        "targets": [SimpleUploadedFile("t.jpg", jpeg_bytes, "image/jpeg")]})
    assert r.status_code == 200 and not Job.objects.exists()
    assert f"Source face.jpg: {REFUSED}" in r.context["form"].errors["source"]
    [entry] = refusals()
    assert entry.details["kind"] == "source" and entry.details["at"] == "start"


def test_the_api_refuses_a_refused_source_with_its_field(owner, template, jpeg_bytes, faces_refused):
    api = token_client(owner)[0]
    r = api.post("/api/v1/jobs", {"template": template.slug, "source": [image("face.jpg", jpeg_bytes)],
                                  "targets": [image("a.jpg", jpeg_bytes)], "consent": "true"})
    assert r.status_code == 400 and not Job.objects.exists()
    assert r.json() == {"error": f"Source face.jpg: {REFUSED}", "field": "source"}
    assert refusals()[0].details["at"] == "start"


def test_a_photo_sent_before_the_check_was_on_is_checked_at_start(alice, template, jpeg_bytes):
    up = send(alice, jpeg_bytes, "face.jpg", "source")
    assert up.status == "ready"
    turn_on(refuse="FACE_FEMALE", min_score=0.3)
    r = alice.post(reverse("job-new"), {"template": template.pk, "consent": "on", "source_uploads": [up.id],
                                        "targets": [SimpleUploadedFile("t.jpg", jpeg_bytes, "image/jpeg")]})
    assert r.status_code == 200 and not Job.objects.exists()
    assert any(REFUSED in e for e in r.context["form"].errors["source"])
    assert refusals()[0].details["upload"] == str(up.id)


def test_the_manifest_carries_the_settings_only_when_results_are_checked(owner, template, jpeg_bytes):
    turn_on(refuse="FEMALE_BREAST_EXPOSED", min_score=0.6)
    manifest = staged_manifest(started_job(owner, template, jpeg_bytes))
    assert manifest["version"] == 2
    assert manifest["safety"] == {"plugin": "nudenet", "refuse": ["FEMALE_BREAST_EXPOSED"], "min_score": 0.6}
    SafetyPolicy.objects.filter(pk=1).update(check_outputs=False)
    assert "safety" not in staged_manifest(started_job(owner, template, jpeg_bytes))


def test_a_result_the_worker_held_back_reads_in_plain_words_and_is_audited_once(fake, owner, template):
    job = make_job(owner, template, "33", tasks=4)
    held = {**done(0), "status": "failed", "message": "the result was held back by the content check and deleted "
            "(FEMALE_BREAST_EXPOSED 0.81)", "code": "held_back", "params": {"labels": [["FEMALE_BREAST_EXPOSED", 0.81]]}}
    progress = record(job, 0, [held]) + "".join(record(job, n, [done(n)]) for n in (1, 2, 3))
    runner = fake(CannedSlurm(sacct=(SAMPLES / "sacct_array_mixed.json").read_text(),
                              codes=(SAMPLES / "sacct_array_mixed.txt").read_text(), progress=progress))
    settle(template.cluster, cycles=4)
    target = job.targets.get(index=0)
    assert target.status == TargetStatus.FAILED
    assert target.message == "the result was held back by the content check and deleted; it is not delivered"
    assert job.folder.output("0.jpg") not in runner.fetched
    [entry] = refusals()
    assert entry.actor is None and entry.target_id == str(job.pk)
    assert entry.details == {"kind": "output", "job": str(job.id), "target_index": 0,
                             "labels": [["FEMALE_BREAST_EXPOSED", 0.81]]}


@pytest.mark.parametrize("fields, field, words", [
    ({"refuse": "FACE_CAT"}, "refuse", "no label FACE_CAT"),
    ({"refuse": " , "}, "refuse", "at least one label"),
    ({"plugin": "os.system; rm"}, "plugin", "package.module:callable"),
    ({"min_score": 0}, "min_score", "greater than or equal to 0.01"),
])
def test_the_admin_cannot_save_settings_the_check_cannot_use(db, fields, field, words):
    with pytest.raises(ValidationError) as err:
        SafetyPolicy(pk=1, enabled=True, **fields).full_clean()
    assert words in " ".join(err.value.message_dict[field])


def test_another_plug_in_may_name_its_own_labels(db):
    SafetyPolicy(pk=1, enabled=True, plugin="tests.worker.test_safety:Bright", refuse="BRIGHT").full_clean()


def test_the_admin_edits_the_one_row_and_it_is_audited(client, staff):
    client.force_login(staff)
    url = reverse("admin:jobs_safetypolicy_add")
    r = client.post(url, {"enabled": "on", "check_sources": "on", "check_outputs": "on",
                          "refuse": "FEMALE_GENITALIA_EXPOSED", "min_score": "0.7", "plugin": "nudenet"})
    assert r.status_code == 302, r.content
    policy = SafetyPolicy.current()
    assert policy.enabled and policy.refused_labels == ("FEMALE_GENITALIA_EXPOSED",)
    assert AuditEntry.objects.filter(action="safety_policy.add").exists()
    assert client.get(url).status_code == 403  # one row only


def test_the_settings_row_is_row_one_whatever_the_sequence_says(client, staff):
    """PostgreSQL's sequence does not go back when a row is removed or a transaction rolls back: the
    admin's "add" after such a row once wrote row 2, and the check it turned on stayed off."""
    SafetyPolicy(enabled=False).save()
    SafetyPolicy.objects.all().delete()  # the sequence has moved on
    client.force_login(staff)
    r = client.post(reverse("admin:jobs_safetypolicy_add"), {
        "enabled": "on", "check_sources": "on", "check_outputs": "on", "refuse": "FEMALE_GENITALIA_EXPOSED",
        "min_score": "0.7", "plugin": "nudenet"})
    assert r.status_code == 302, r.content
    assert SafetyPolicy.current().enabled and list(SafetyPolicy.objects.values_list("pk", flat=True)) == [1]
