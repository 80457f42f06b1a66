"""Model versions and provenance on the portal side: a template pinned to a model set (and its
watermark) reaches the manifest; the models each job's tasks used are stored from their progress
records and shown in the API and the admin."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from cluster import ClusterLimits
from jobs.job.model_sets import models_in
from jobs.job.submit import sbatch_spec, stage
from jobs.models import Job, ModelSet, Source, Target
from tests.fake_ssh import FakeSSH
from worker.progress import TaskProgress

from .api_helpers import token_client
from .test_watcher import CannedSlurm, done, fake, make_job, settle  # noqa: F401 - `fake` is a fixture

SWAPPER_OCT = "e4a3f08c753cb72d04e10aa0f7dbe3deebbf39567d4ead6dce08e98aa49e16af"
SWAPPER_NOV = "ab" * 32


@pytest.fixture
def october(db):
    return ModelSet.objects.create(name="inswapper 2026-10", folder="/srv/ffportal/models/2026-10",
                                   files=[{"name": "inswapper_128.onnx", "sha256": SWAPPER_OCT}])


@pytest.fixture
def november(db):
    return ModelSet.objects.create(name="inswapper 2026-11", folder="/srv/ffportal/models/2026-11",
                                   files=[{"name": "inswapper_128.onnx", "sha256": SWAPPER_NOV}])


def started_job(owner, template, jpeg_bytes) -> Job:
    """A job as Start leaves it (snapshot taken now), with one source and one target on the cluster."""
    job = Job.objects.create(owner=owner, template=template, template_snapshot=template.snapshot().to_json(),
                             cluster=template.cluster, total=1)
    Source.objects.create(job=job, file=SimpleUploadedFile("face.jpg", jpeg_bytes), original_name="face.jpg")
    Target.objects.create(job=job, index=0, name="a.jpg", output_name="a.jpg",
                          cluster_path="/srv/ffportal/storage/a.jpg")
    return job


def staged_manifest(job) -> dict:
    runner = FakeSSH()  # records what staging would write on the cluster
    stage(runner, job, ClusterLimits())
    return json.loads(runner.written[job.folder.manifest])


def test_a_pinned_template_sends_its_model_set_and_watermark_with_every_job(owner, template, october, jpeg_bytes):
    template.model_set, template.watermark = october, "Made with AI"
    template.save()
    manifest = staged_manifest(started_job(owner, template, jpeg_bytes))
    assert manifest["version"] == 2 and manifest["watermark"] == "Made with AI"
    assert manifest["models"] == {"set": "inswapper 2026-10", "folder": "/srv/ffportal/models/2026-10",
                                  "files": [{"name": "inswapper_128.onnx", "sha256": SWAPPER_OCT}]}


def test_an_unpinned_template_sends_neither(owner, template, jpeg_bytes):
    manifest = staged_manifest(started_job(owner, template, jpeg_bytes))
    assert "models" not in manifest and "watermark" not in manifest


def test_a_new_model_set_is_used_by_new_jobs_and_running_jobs_keep_theirs(owner, template, october, november,
                                                                         jpeg_bytes):
    template.model_set = october
    template.save()
    running = started_job(owner, template, jpeg_bytes)
    template.model_set = november  # the admin points the template at the new folder: no restart
    template.save()
    new = started_job(owner, template, jpeg_bytes)
    assert staged_manifest(new)["models"]["folder"] == "/srv/ffportal/models/2026-11"
    assert staged_manifest(running)["models"]["folder"] == "/srv/ffportal/models/2026-10"


def test_a_container_sees_the_model_sets_folder(owner, template, october, jpeg_bytes):
    template.model_set, template.container_image = october, "/srv/images/worker.sif"
    template.save()
    spec = sbatch_spec(started_job(owner, template, jpeg_bytes), 1)
    assert "/srv/ffportal/models/2026-10:/srv/ffportal/models/2026-10:ro" in spec.container_binds


@pytest.mark.parametrize("folder, files, field, words", [
    ("models/2026", [{"name": "a.onnx", "sha256": SWAPPER_OCT}], "folder", "absolute path"),
    ("/m", [], "files", "at least one file"),
    ("/m", [{"name": "a.onnx", "sha256": "abc"}], "files", "64 hexadecimal digits"),
    ("/m", [{"name": "../a.onnx", "sha256": SWAPPER_OCT}], "files", "plain file name"),
    ("/m", [{"name": "a.onnx", "sha256": SWAPPER_OCT}] * 2, "files", "listed once"),
])
def test_a_model_set_is_checked_before_it_is_saved(db, folder, files, field, words):
    with pytest.raises(ValidationError) as err:
        ModelSet(name="x", folder=folder, files=files).full_clean()
    assert words in " ".join(err.value.message_dict[field])


def test_a_watermark_the_cluster_cannot_draw_is_refused(template):
    template.watermark = "AI 生成"
    with pytest.raises(ValidationError) as err:
        template.full_clean()
    assert "Latin letters" in err.value.message_dict["watermark"][0]


# -- which models a job used ----------------------------------------------------------------------

def used(name, sha):
    return {"name": name, "sha256": sha}


def test_the_union_of_every_task_is_kept_each_file_once():
    a = TaskProgress(job="j", task_index=0, models=[used("inswapper_128.onnx", SWAPPER_OCT)])
    b = TaskProgress(job="j", task_index=1, models=[used("inswapper_128.onnx", SWAPPER_OCT),
                                                    used("det_10g.onnx", "cd" * 32)])
    old = TaskProgress(job="j", task_index=2)  # an older worker's record has no models
    assert models_in([a, b, old], [used("inswapper_128.onnx", SWAPPER_NOV)]) == [
        used("det_10g.onnx", "cd" * 32), used("inswapper_128.onnx", SWAPPER_NOV), used("inswapper_128.onnx", SWAPPER_OCT)]


def record_with_models(job, task_index, models):
    doc = {"version": 1, "job": str(job.id), "task_index": task_index, "state": "finished", "engine": "insightface",
           "models": models, "targets": [done(task_index)]}
    return f"{job.folder.progress_record(task_index)}\t{json.dumps(doc)}\n"


@pytest.fixture
def job_that_ran(fake, owner, template):
    job = make_job(owner, template, "41", tasks=2)
    progress = (record_with_models(job, 0, [used("inswapper_128.onnx", SWAPPER_OCT)])
                + record_with_models(job, 1, [used("inswapper_128.onnx", SWAPPER_OCT), used("det_10g.onnx", "cd" * 32)]))
    fake(CannedSlurm(squeue=(Path(__file__).parents[1] / "cluster" / "samples" / "22.05" / "squeue_array_running.json").read_text(),
                     progress=progress))
    settle(template.cluster, cycles=1)
    job.refresh_from_db()
    return job


def test_the_watcher_stores_the_models_the_tasks_loaded(job_that_ran):
    assert job_that_ran.models_used == [used("det_10g.onnx", "cd" * 32), used("inswapper_128.onnx", SWAPPER_OCT)]


def test_the_api_shows_the_models_a_job_used_to_its_owner_only(job_that_ran, owner, stranger):
    api, _key = token_client(owner)
    body = api.get(reverse("api-job", args=[job_that_ran.id])).json()
    assert body["models"] == [used("det_10g.onnx", "cd" * 32), used("inswapper_128.onnx", SWAPPER_OCT)]
    other, _key = token_client(stranger)
    assert other.get(reverse("api-job", args=[job_that_ran.id])).status_code == 404


def test_admins_see_the_models_on_the_job_and_the_sets_with_their_templates(client, staff, job_that_ran, template,
                                                                           october):
    template.model_set = october
    template.save()
    client.force_login(staff)
    page = client.get(reverse("admin:jobs_job_change", args=[job_that_ran.id])).content.decode()
    assert "Models used" in page and SWAPPER_OCT in page
    sets = client.get(reverse("admin:jobs_modelset_changelist")).content.decode()
    assert "inswapper 2026-10" in sets and template.name in sets
    form = client.get(reverse("admin:jobs_template_change", args=[template.pk])).content.decode()
    assert 'name="model_set"' in form and 'name="watermark"' in form
