"""A task past its template's time limit, on every Slurm version (the contract suite): Slurm ends it
TIMEOUT, the owner reads "hit the time limit; choose a template with a longer time limit", and the
portal does not retry it by itself (a longer limit is the owner's choice). The worker is held busy
by its tests-only memory hook (a little memory, held until the task is killed: it never finishes on
its own), under a one-minute limit."""
from jobs.models import JobStatus, TargetStatus
from tests.e2e.conftest import SAMPLES, fill, run_rq, watch_until
from tests.e2e.test_end_to_end import start
from tests.e2e.test_retry import FINAL, small_template

TIME_LIMIT_WORDS = "hit the time limit; choose a template with a longer time limit"


def test_a_task_past_its_time_limit_ends_in_plain_words_and_is_not_retried(api, site, folder, redis_queue, settings):
    small_template("one-minute", base=site.cpu, time_limit="00:01:00", mem="1G", max_mem="2G", chunk_size=2)
    settings.FFP_TEST_ALLOCATE_MB = {1: 64}  # far below 1G: only the clock can stop it
    fill(folder, {"a.jpg": SAMPLES / "t1.jpg", "b.png": SAMPLES / "astronaut.png"})
    job = start(api, folder, template="one-minute")
    run_rq(redis_queue)
    job.refresh_from_db()
    assert job.status == JobStatus.PENDING and job.slurm_job_id, job.error

    job = watch_until(job, FINAL)
    task = job.tasks.get()
    assert (task.state, task.reason) == ("TIMEOUT", TIME_LIMIT_WORDS), (task.state, task.reason, job.error)
    assert job.status == JobStatus.FAILED and job.attempt == 1  # not retried automatically
    assert all(t.status == TargetStatus.FAILED and t.failed_with_task for t in job.targets.all())
    body = api.get(f"/api/v1/jobs/{job.id}").json()
    assert [t["reason"] for t in body["tasks"]] == [TIME_LIMIT_WORDS]
    # Slurm's accounting of that cluster says the same, after a minute or so of running.
    state, elapsed = site.slurm("sacct", "-n", "-X", "-P", "-j", job.slurm_job_id, "-o", "State,ElapsedRaw").split("|")
    assert state == "TIMEOUT" and 60 <= int(elapsed) < 150, (state, elapsed)
