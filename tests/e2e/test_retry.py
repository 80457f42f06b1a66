"""Retry on the REAL local cluster: two tasks made to exceed their memory limit at once (the worker's
tests-only FFP_TEST_ALLOCATE_MB hook grows memory until Slurm kills it, on attempt 1 only) both end
OUT_OF_MEMORY, are resubmitted automatically with more memory as attempt 2, and complete; a target
that failed for its own reasons is not retried automatically, and is done once its owner replaces
its file and retries."""

import os

import numpy
import pytest
from django.test import Client
from django.urls import reverse
from PIL import Image

from jobs.job.attempts import history
from jobs.models import JobStatus, TargetStatus, Template
from tests.e2e import sites
from tests.e2e.conftest import SAMPLES, fill, run_rq, watch_until
from tests.e2e.test_end_to_end import start
from tests.worker import badfiles

FINAL = {JobStatus.COMPLETED, JobStatus.PARTIALLY_FAILED, JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.LOST}


def small_template(slug, base="cpu-small", **fields):
    t = Template.objects.get(slug=base)
    t.pk, t.slug, t.name = None, slug, slug
    for k, v in fields.items():
        setattr(t, k, v)
    t.save()
    return t


@pytest.mark.parametrize("site", sites.WITH_CONTAINER, indirect=True, ids=sites.site_id)
def test_two_tasks_over_their_memory_are_retried_automatically_with_more_memory(api, site, folder, redis_queue,
                                                                               settings):
    # Two tasks memory-killed at the same moment: each one's end is decided from its own log, read
    # in a later cycle's round trip (slurmstepd writes its line a moment after the kill).
    small_template("tight-mem", base=site.cpu, mem="250M", max_mem="1G", chunk_size=2)
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
    assert "Attempt 2, automatically: Ran out of memory" in job.error and "tasks" not in job.error
    # The first attempt really was a memory kill in Slurm's accounting; the second asked for more.
    out = site.slurm("sacct", "-n", "-X", "-j", f"{first},{second}", "-o", "JobID%20,JobName%60,ReqMem%10,State%20")
    rows = [line.split() for line in out.splitlines() if line.strip()]
    assert {r[0] for r in rows if r[0].startswith(second)} == {f"{second}_0", f"{second}_1"}, out
    assert all(r[1] == f"ffp-{job.id}-a2" and r[2].startswith("500M") for r in rows if r[0].startswith(second)), out
    assert all(r[1] == f"ffp-{job.id}" and r[3] == "FAILED" for r in rows if r[0].startswith(first)), out


def test_a_damaged_file_replaced_by_its_owner_is_retried_and_done(api, local, folder, redis_queue):
    """The issue's walk: a photo fails because its file is damaged; the watcher does not retry it (it
    would fail again); its owner replaces the file on the job page and clicks Retry; the new attempt
    reads the new file from the job's own folder on the cluster and the photo is done. The user's
    folder is never written to."""
    fill(folder, {"a.jpg": SAMPLES / "t1.jpg"})
    badfiles.truncated(numpy.asarray(Image.open(SAMPLES / "astronaut.png").convert("RGB")), folder / "broken.jpg")
    damaged = (folder / "broken.jpg").read_bytes()
    job = start(api, folder, template="cpu-small")
    run_rq(redis_queue)
    job = watch_until(job, FINAL)
    assert job.status == JobStatus.PARTIALLY_FAILED and job.attempt == 1, job.error  # not retried by the watcher
    broken = job.targets.get(name="broken.jpg")
    assert broken.status == TargetStatus.FAILED and not broken.failed_with_task

    web = Client()
    web.force_login(job.owner)
    page = web.get(reverse("job-detail", args=[job.id])).content.decode()
    replace_url = reverse("job-target-replace", args=[job.id, broken.index])
    assert f'action="{replace_url}"' in page and 'id="job-retry"' in page
    with open(SAMPLES / "t1.jpg", "rb") as good:
        assert web.post(replace_url, {"file": good}).status_code == 302
    assert web.post(reverse("job-retry", args=[job.id])).status_code == 302
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED and job.attempt == 2
    assert [j for j in redis_queue.jobs if j.func_name.endswith("submit_job")]  # the new attempt is on its way

    run_rq(redis_queue)
    job.refresh_from_db()
    assert job.status == JobStatus.PENDING and job.slurm_job_id, job.error
    job = watch_until(job, FINAL)
    assert job.status == JobStatus.COMPLETED, (job.error, [(t.name, t.status, t.message) for t in job.targets.all()])
    assert job.done == 2 and job.failed == 0 and all(t.output_file for t in job.targets.all())
    assert history(job)[1].array == str(broken.task_index)
    # The user's folder holds what it held: the damaged file, untouched, and nothing new.
    assert (folder / "broken.jpg").read_bytes() == damaged
    assert sorted(p.name for p in folder.iterdir()) == ["a.jpg", "broken.jpg"]


def test_retrying_one_chunk_twice_leaves_the_other_chunk_done_and_the_job_ends(api, local, folder, redis_queue,
                                                                              monkeypatch):
    """The sequence that once left a job "running" for good (4 of 4 done, Cancel stuck on
    "Cancelling..."): a 2-task job whose second task fails on a damaged photo, then Retry twice,
    each a single-task array (`--array=1`). While such an array runs, sacct lists it without its
    index; read as index 0, it turned task 0 (COMPLETED in attempt 1) back to PENDING. Here sacct
    is asked every cycle (the every-job beat made due each time), so every cycle sees that record."""
    from jobs.watcher import poll

    monkeypatch.setattr(poll, "ACCOUNTING_EVERY", 0.0)
    small_template("one-per-task", chunk_size=1)
    fill(folder, {"a.jpg": SAMPLES / "t1.jpg"})
    badfiles.truncated(numpy.asarray(Image.open(SAMPLES / "astronaut.png").convert("RGB")), folder / "b.jpg")
    job = start(api, folder, template="one-per-task")
    run_rq(redis_queue)
    job = watch_until(job, FINAL)
    assert job.status == JobStatus.PARTIALLY_FAILED, job.error
    assert [(t.index, t.state, t.attempt) for t in job.tasks.all()] == [(0, "COMPLETED", 1), (1, "FAILED", 1)]

    web = Client()
    web.force_login(job.owner)
    # Attempt 2: the damaged photo exported again, still damaged (fails again; an unchanged one is not
    # retried at all: jobs.job.retry.still_damaged); attempt 3: replaced by a good one.
    for attempt, replace, end in ((2, False, JobStatus.PARTIALLY_FAILED), (3, True, JobStatus.COMPLETED)):
        broken = job.targets.get(name="b.jpg")
        if not replace:
            os.utime(folder / "b.jpg")  # written again now, after the first attempt was submitted
        if replace:
            with open(SAMPLES / "t1.jpg", "rb") as good:
                assert web.post(reverse("job-target-replace", args=[job.id, broken.index]), {"file": good}).status_code == 302
        assert web.post(reverse("job-retry", args=[job.id])).status_code == 302
        run_rq(redis_queue)
        job.refresh_from_db()
        assert job.status == JobStatus.PENDING and job.attempt == attempt, job.error

        def task0_kept(j):
            assert (j.tasks.get(index=0).state, j.tasks.get(index=0).attempt) == ("COMPLETED", 1)

        job = watch_until(job, FINAL, on_cycle=task0_kept)
        assert job.status == end, (job.error, [(t.index, t.state, t.attempt) for t in job.tasks.all()])
        assert history(job)[attempt - 1].array == "1"
    assert job.done == 2 and job.failed == 0 and all(t.output_file for t in job.targets.all())
    assert [(t.index, t.state, t.attempt) for t in job.tasks.all()] == [(0, "COMPLETED", 1), (1, "COMPLETED", 3)]
