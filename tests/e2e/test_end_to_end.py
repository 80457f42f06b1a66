"""The product's spine on the real local cluster over real SSH: API -> RQ -> sbatch -> watcher -> results."""
import io
import subprocess
import zipfile

from PIL import Image

from jobs.models import Job, JobStatus, TargetStatus
from tests.e2e.conftest import SAMPLES, fill, run_rq, watch_until
from tests.worker import badfiles


def start(api, folder, template="gpu-batch", **extra):
    with open(SAMPLES / "Tom_Hanks_54745.png", "rb") as face:
        r = api.post("/api/v1/jobs", {"template": template, "source": face, "target_folder": str(folder),
                                      "consent": "true", **extra})
    assert r.status_code == 201, r.content
    return Job.objects.get(pk=r.json()["id"])


def test_it_runs_a_folder_as_one_array_job_and_returns_swapped_outputs(api, local, folder, redis_queue):
    fill(folder, {"group.jpg": SAMPLES / "t1.jpg", "astronaut.png": SAMPLES / "astronaut.png",
                  "hanks 'quoted' $(x).png": SAMPLES / "Tom_Hanks_54745.png", "group2.jpg": SAMPLES / "t1.jpg"})
    job = start(api, folder, name="four photos")
    assert job.status == JobStatus.QUEUED
    run_rq(redis_queue)
    job.refresh_from_db()
    assert job.status == JobStatus.PENDING and job.slurm_job_id, job.error
    assert job.total == 4 and job.tasks.count() == 2  # chunk size 2 -> an array of two tasks

    job = watch_until(job, {JobStatus.COMPLETED, JobStatus.PARTIALLY_FAILED, JobStatus.FAILED})
    assert job.status == JobStatus.COMPLETED, (job.error, [(t.name, t.status, t.message) for t in job.targets.all()])
    assert job.done == 4 and job.failed == 0
    assert [t.state for t in job.tasks.all()] == ["COMPLETED", "COMPLETED"]
    targets = list(job.targets.all())
    assert all(t.status == TargetStatus.DONE and t.faces_swapped >= 1 for t in targets)
    assert all(t.output_file and t.thumbnail_file for t in targets)
    # The outputs are real swapped images of the same size as the inputs.
    group = next(t for t in targets if t.name == "group.jpg")
    out = Image.open(group.output_file)
    assert out.size == Image.open(SAMPLES / "t1.jpg").size

    detail = api.get(f"/api/v1/jobs/{job.id}").json()
    assert detail["status"] == "completed" and detail["progress"] == {"total": 4, "done": 4, "failed": 0}
    assert len(detail["outputs"]) == 4
    z = api.get(f"/api/v1/jobs/{job.id}/results.zip")
    assert z.status_code == 200
    names = zipfile.ZipFile(io.BytesIO(b"".join(z.streaming_content))).namelist()
    assert sorted(names) == sorted(t.output_name for t in targets)


def test_it_ends_partially_failed_with_the_corrupt_targets_message(api, local, folder, redis_queue):
    fill(folder, {"a.jpg": SAMPLES / "t1.jpg", "b.png": SAMPLES / "astronaut.png"})
    badfiles.truncated(__import__("numpy").asarray(Image.open(SAMPLES / "astronaut.png").convert("RGB")),
                       folder / "broken.jpg")
    job = start(api, folder)
    run_rq(redis_queue)
    job = watch_until(job, {JobStatus.COMPLETED, JobStatus.PARTIALLY_FAILED, JobStatus.FAILED})
    assert job.status == JobStatus.PARTIALLY_FAILED, job.error
    broken = job.targets.get(name="broken.jpg")
    assert broken.status == TargetStatus.FAILED and "truncated or corrupt" in broken.message
    assert {t.name for t in job.targets.filter(status=TargetStatus.DONE)} == {"a.jpg", "b.png"}
    assert all(t.output_file for t in job.targets.filter(status=TargetStatus.DONE))
    assert "1 of 3 images failed" in job.error


def test_it_cancels_a_running_job(api, local, folder, redis_queue):
    fill(folder, {f"g{i:02d}.jpg": SAMPLES / "t1.jpg" for i in range(30)})
    job = start(api, folder, template="cpu-small")
    run_rq(redis_queue)
    job = watch_until(job, {JobStatus.RUNNING}, timeout=90)
    r = api.post(f"/api/v1/jobs/{job.id}/cancel")
    assert r.status_code == 200, r.content
    run_rq(redis_queue)  # the scancel goes through the queue
    job = watch_until(job, {JobStatus.CANCELLED, JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.PARTIALLY_FAILED})
    assert job.status == JobStatus.CANCELLED
    assert any(t.state == "CANCELLED" for t in job.tasks.all())
    assert job.done < 30  # stopped before the end; what was finished is kept
    for t in job.targets.filter(status=TargetStatus.DONE):
        assert t.output_file


def test_a_retried_submission_does_not_submit_twice(api, local, folder, redis_queue):
    from jobs.submit import submit_job

    fill(folder, {"a.jpg": SAMPLES / "t1.jpg"})
    job = start(api, folder)
    run_rq(redis_queue)
    job.refresh_from_db()
    first = job.slurm_job_id
    assert first
    # The RQ worker died after sbatch but before the id was saved: the retry must find the job.
    Job.objects.filter(pk=job.pk).update(slurm_job_id="", status=JobStatus.SUBMITTING)
    assert submit_job(str(job.id)) == first
    job.refresh_from_db()
    assert job.slurm_job_id == first and job.status == JobStatus.PENDING
    # Accounting lags a few seconds behind sbatch: ask it once the job has finished.
    watch_until(job, {JobStatus.COMPLETED, JobStatus.PARTIALLY_FAILED, JobStatus.FAILED})
    out = subprocess.run(["sacct", "-n", "-X", "--name", job.slurm_name, "-S", "now-1hour", "-o", "JobID%30"],
                         capture_output=True, text=True, timeout=30)
    ids = {line.strip().split("_")[0] for line in out.stdout.splitlines() if line.strip()}
    assert ids == {first}
