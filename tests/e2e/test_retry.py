"""Retry on the REAL local cluster: two tasks made to exceed their memory limit at once (the worker's
tests-only FFP_TEST_ALLOCATE_MB hook grows memory until Slurm kills it, on attempt 1 only) both end
OUT_OF_MEMORY, are resubmitted automatically with more memory as attempt 2, and complete; a target
that failed for its own reasons is never retried."""
import subprocess

import numpy
from PIL import Image

from jobs.attempts import history
from jobs.models import Job, JobStatus, Template, TargetStatus
from tests.e2e.conftest import SAMPLES, fill, run_rq, watch_until
from tests.e2e.test_end_to_end import start
from tests.worker import badfiles

FINAL = {JobStatus.COMPLETED, JobStatus.PARTIALLY_FAILED, JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.LOST}


def small_template(slug, **fields):
    t = Template.objects.get(slug="cpu-small")
    t.pk, t.slug, t.name = None, slug, slug
    for k, v in fields.items():
        setattr(t, k, v)
    t.save()
    return t


def test_two_tasks_over_their_memory_are_retried_automatically_with_more_memory(api, local, folder, redis_queue,
                                                                               settings):
    # Two tasks memory-killed at the same moment: each one's end is decided from its own log, read
    # in a later cycle's round trip (slurmstepd writes its line a moment after the kill).
    small_template("tight-mem", mem="250M", max_mem="1G", chunk_size=2)
    # Attempt 1 only: the worker's test hook grows its memory until Slurm kills it.
    settings.FFP_TEST_ALLOCATE_MB = {1: 2000}
    fill(folder, {"a.jpg": SAMPLES / "t1.jpg", "b.png": SAMPLES / "astronaut.png", "c.jpg": SAMPLES / "t1.jpg"})
    job = start(api, folder, template="tight-mem")
    run_rq(redis_queue)
    job.refresh_from_db()
    first = job.slurm_job_id
    assert job.status == JobStatus.PENDING and first, job.error

    # Attempt 1 ends OUT_OF_MEMORY in both tasks; the watcher resubmits instead of finalising.
    job = watch_until(job, {JobStatus.QUEUED} | FINAL)
    assert job.status == JobStatus.QUEUED, (job.error, [(t.index, t.state, t.reason) for t in job.tasks.all()])
    assert job.attempt == 2 and job.slurm_job_id == ""
    assert history(job)[0].slurm_job_id == first
    assert history(job)[0].ended == {"0": "OUT_OF_MEMORY", "1": "OUT_OF_MEMORY"}
    assert history(job)[1].auto and history(job)[1].mem == "500M" and history(job)[1].array == "0-1"
    assert "Ran out of memory; retried automatically with 500M." in job.error
    assert job.targets.filter(status=TargetStatus.WAITING).count() == 3

    run_rq(redis_queue)
    job.refresh_from_db()
    second = job.slurm_job_id
    assert job.status == JobStatus.PENDING and second and second != first
    job = watch_until(job, FINAL)
    assert job.status == JobStatus.COMPLETED, (job.error, [(t.name, t.status, t.message) for t in job.targets.all()])
    assert job.done == 3 and job.failed == 0 and all(t.output_file for t in job.targets.all())
    assert [(t.state, t.attempt) for t in job.tasks.all()] == [("COMPLETED", 2), ("COMPLETED", 2)]
    assert history(job)[1].slurm_job_id == second
    assert "Attempt 2 (tasks 0-1) automatically: Ran out of memory" in job.error
    # The first attempt really was a memory kill in Slurm's accounting; the second asked for more.
    out = subprocess.run(["sacct", "-n", "-X", "-j", f"{first},{second}", "-o", "JobID%20,JobName%60,ReqMem%10,State%20"],
                         capture_output=True, text=True, timeout=30).stdout
    rows = [line.split() for line in out.splitlines() if line.strip()]
    assert {r[0] for r in rows if r[0].startswith(second)} == {f"{second}_0", f"{second}_1"}, out
    assert all(r[1] == f"ffp-{job.id}-a2" and r[2].startswith("500M") for r in rows if r[0].startswith(second)), out
    assert all(r[1] == f"ffp-{job.id}" and r[3] == "FAILED" for r in rows if r[0].startswith(first)), out


def test_a_corrupt_target_is_never_retried(api, local, folder, redis_queue):
    fill(folder, {"a.jpg": SAMPLES / "t1.jpg"})
    badfiles.truncated(numpy.asarray(Image.open(SAMPLES / "astronaut.png").convert("RGB")), folder / "broken.jpg")
    job = start(api, folder, template="cpu-small")
    run_rq(redis_queue)
    job = watch_until(job, FINAL)
    assert job.status == JobStatus.PARTIALLY_FAILED, job.error
    broken = job.targets.get(name="broken.jpg")
    before = (broken.status, broken.message, broken.failed_with_task)
    assert before[0] == TargetStatus.FAILED and not before[2]

    r = api.post(f"/api/v1/jobs/{job.id}/retry")
    assert r.status_code == 409 and "their own reasons" in r.json()["error"]
    assert not [j for j in redis_queue.jobs if j.func_name.endswith("submit_job")]  # nothing resubmitted
    job = Job.objects.get(pk=job.pk)
    broken.refresh_from_db()
    assert (broken.status, broken.message, broken.failed_with_task) == before
    assert job.status == JobStatus.PARTIALLY_FAILED and job.attempt == 1 and history(job) == []
