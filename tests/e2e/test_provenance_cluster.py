"""Provenance and model versions on the REAL local cluster: the outputs of a real job carry the
"modified by face fusion" label with the job id (JPEG, PNG and a video) and the template's
watermark; the job records the model files its tasks loaded; a template pinned to a model set runs
on that folder's files, and one whose file has another hash is refused in plain words."""
from __future__ import annotations

import hashlib
import os
import subprocess

import numpy as np
from PIL import Image

from jobs.models import JobStatus, ModelSet, TargetStatus, Template
from tests.e2e.conftest import SAMPLES, fill, run_rq, watch_until
from tests.e2e.test_end_to_end import start
from tests.worker.fake_models import build_fake_models
from worker.provenance import read_label

ENDED = {JobStatus.COMPLETED, JobStatus.PARTIALLY_FAILED, JobStatus.FAILED}


def run_job(api, folder, redis_queue, name):
    job = start(api, folder, name=name)
    run_rq(redis_queue)
    job.refresh_from_db()
    assert job.slurm_job_id, job.error
    return watch_until(job, ENDED)


def test_the_outputs_of_a_real_job_carry_the_label_and_the_watermark(api, local, folder, redis_queue):
    Template.objects.filter(slug="gpu-batch").update(watermark="AI edit")
    fill(folder, {"group.jpg": SAMPLES / "t1.jpg", "astronaut.png": SAMPLES / "astronaut.png"})
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-loop", "1", "-i", str(SAMPLES / "t1.jpg"), "-t", "2", "-r", "5",
                    "-vf", "scale=480:-2,format=yuv420p", "-c:v", "libx264", "-preset", "ultrafast",
                    str(folder / "clip.mp4")], check=True)
    os.chmod(folder / "clip.mp4", 0o644)

    job = run_job(api, folder, redis_queue, "labelled")
    targets = {t.name: t for t in job.targets.all()}
    assert job.status == JobStatus.COMPLETED, (job.error, [(t.name, t.status, t.message) for t in targets.values()])
    for name, target in targets.items():
        assert target.status == TargetStatus.DONE and target.output_file, name
        assert read_label(target.output_file) == {"generator": "FaceFusion Portal", "modified": "face fusion",
                                                  "job": str(job.id)}, name
    # the watermark: the corner of the result differs from the input far beyond compression noise
    with Image.open(targets["astronaut.png"].output_file) as out, Image.open(SAMPLES / "astronaut.png") as src:
        corner = np.abs(np.asarray(out.convert("RGB"), int)[-30:, -150:] - np.asarray(src.convert("RGB"), int)[-30:, -150:])
    assert corner.max() > 100
    # which model files the tasks loaded, in the API (the local cluster runs the classic engine)
    models = api.get(f"/api/v1/jobs/{job.id}").json()["models"]
    assert {m["name"] for m in models} >= {"shape_predictor_68_face_landmarks.dat"}
    assert all(len(m["sha256"]) == 64 for m in models)


def test_a_template_pinned_to_a_model_set_runs_on_it_or_refuses_a_file_that_differs(api, local, folder, redis_queue):
    models = folder / "models-2026-11"
    registry = build_fake_models(models)
    os.chmod(models, 0o755)
    for spec in registry.values():
        os.chmod(models / spec.file, 0o644)
    files = [{"name": s.file, "sha256": s.sha256} for s in registry.values()]
    pinned = ModelSet.objects.create(name="fake 2026-11", folder=str(models), files=files)
    Template.objects.filter(slug="gpu-batch").update(model_set=pinned, engine="insightface")
    fill(folder, {"astronaut.png": SAMPLES / "astronaut.png"})

    job = run_job(api, folder, redis_queue, "pinned")
    target = job.targets.get()
    assert job.status == JobStatus.COMPLETED, (job.error, target.message)
    used = {m["name"]: m["sha256"] for m in job.models_used}
    assert used == {f["name"]: f["sha256"] for f in files}  # the pinned files, by their hashes
    assert read_label(target.output_file)["job"] == str(job.id)

    # The swapper in the folder is replaced by another file: the next job refuses it, nothing runs.
    (models / "inswapper_128.onnx").write_bytes(b"another model version")
    assert hashlib.sha256(b"another model version").hexdigest() != used["inswapper_128.onnx"]
    job = run_job(api, folder, redis_queue, "pinned, file changed")
    target = job.targets.get()
    assert job.status == JobStatus.FAILED and target.status == TargetStatus.FAILED
    assert "model set fake 2026-11" in target.message and "inswapper_128.onnx is not the pinned version" in target.message
