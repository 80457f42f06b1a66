"""Fault injection on the REAL local cluster: sshd, Redis, slurmctld, slurmd and the watcher are
really stopped and started around live jobs, and the end states are asserted: no job lost, none
submitted twice, every wait or failure explained in plain words.

Each test restores what it stopped in a `finally` (tests/e2e/faults.py: `outage`, `restore`), and the
module ends with scripts/cluster/check.sh so later tests find a healthy cluster.
"""
import os
import subprocess
import sys
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import ClusterProfile, Job, JobStatus, TargetStatus
from tests.e2e import faults
from tests.e2e.conftest import SAMPLES, fill, run_rq, watch_until
from tests.e2e.test_browser_live import _test_database_url
from tests.e2e.test_end_to_end import start

FINAL = {JobStatus.COMPLETED, JobStatus.PARTIALLY_FAILED, JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.LOST}
#: how long slurmd stays killed (well within SlurmdTimeout: the node is never declared down)
OUTAGE_S = 2

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def _cluster_checked_after():
    yield
    faults.restore()
    faults.check()


def slurm_ids(job: Job) -> set[str]:
    """Every Slurm job ever submitted under this job's unique name (accounting; the doubling check)."""
    deadline = time.monotonic() + 120
    while True:
        out = subprocess.run(["sacct", "-n", "-X", "--name", job.slurm_name, "-S", "now-1hour", "-o", "JobID%30"],
                             capture_output=True, text=True, timeout=30)
        ids = {line.strip().split("_")[0] for line in out.stdout.splitlines() if line.strip()}
        if ids or time.monotonic() > deadline:  # accounting lags sbatch by a moment
            return ids
        time.sleep(1)


def rq_status(queue, job: Job):
    from jobs.background.recovery import rq_job_id
    from jobs.background.recovery import rq_status as status
    return status(queue.connection, rq_job_id(job))


def run_due_retries(queue) -> None:
    """What RQ's scheduler does once a retry's backoff has elapsed (without waiting the 10 s)."""
    from rq.job import Job as RQJob

    registry = queue.scheduled_job_registry
    for jid in registry.get_job_ids():
        queue.enqueue_job(RQJob.fetch(jid, connection=queue.connection, serializer=queue.serializer))
        registry.remove(jid)
    run_rq(queue)


def assert_completed_once(job: Job, first_id: str) -> None:
    job.refresh_from_db()
    assert job.status == JobStatus.COMPLETED, (job.error, [(t.name, t.status, t.message) for t in job.targets.all()])
    assert job.done == job.total and job.failed == 0
    assert all(t.output_file for t in job.targets.all())
    assert job.slurm_job_id == first_id
    assert slurm_ids(job) == {first_id}  # submitted exactly once


def test_sshd_down_during_start_waits_visibly_then_submits_once(api, local, folder, redis_queue):
    fill(folder, {"a.jpg": SAMPLES / "t1.jpg", "b.png": SAMPLES / "astronaut.png"})
    job = start(api, folder)
    with faults.outage(faults.stop_sshd):
        t0 = time.monotonic()
        run_rq(redis_queue)  # the submission meets the outage
        took = time.monotonic() - t0
        job.refresh_from_db()
        assert job.status == JobStatus.SUBMITTING and not job.slurm_job_id
        assert job.error.startswith("Waiting to submit: cannot reach the cluster"), job.error
        assert "Retrying automatically" in job.error
        assert rq_status(redis_queue, job) == "scheduled"  # RQ keeps it, with backoff
        assert took < 30, f"a refused connection should fail fast, took {took:.1f}s"
        print(f"observed sshd-down Start: failed in {took:.1f}s, error {job.error!r}")
    # sshd is back: the retry submits it, once.
    run_due_retries(redis_queue)
    job.refresh_from_db()
    assert job.status == JobStatus.PENDING and job.slurm_job_id and job.error == "", job.error
    first = job.slurm_job_id

    # The watcher during a second outage: records unreachable_since, changes no job.
    before = (job.status, job.done, list(job.tasks.values_list("state", flat=True)))
    with faults.outage(faults.stop_sshd):
        from jobs.watcher.poll import poll_profile
        result = poll_profile(local)
        assert result.error
        local.refresh_from_db()
        assert local.unreachable_since is not None and local.last_error
        job.refresh_from_db()
        assert (job.status, job.done, list(job.tasks.values_list("state", flat=True))) == before
    t0 = time.monotonic()
    watch_until(job, FINAL)
    print(f"observed sshd-down watcher: {result.error!r}; ended {time.monotonic() - t0:.1f}s after sshd returned")
    local.refresh_from_db()
    assert local.unreachable_since is None and local.last_error == ""
    assert_completed_once(job, first)


def test_redis_restart_that_lost_the_queue_is_recovered_by_requeue_orphans(api, local, folder, redis_queue):
    from jobs.background.recovery import requeue_orphans

    fill(folder, {"a.jpg": SAMPLES / "t1.jpg"})
    job = start(api, folder)
    assert job.status == JobStatus.QUEUED and rq_status(redis_queue, job) == "queued"
    later = timezone.now() + timedelta(seconds=61)  # past the grace period
    with faults.outage(faults.stop_redis):
        pass  # a clean Redis stop + start (it saved its data)
    assert requeue_orphans(now=later) == []  # the queue survived a clean restart: nothing to do
    # A Redis that lost its data (crash without a save, flushed): the submission is gone.
    redis_queue.connection.delete(f"rq:job:submit-{job.id}")
    redis_queue.empty()
    assert rq_status(redis_queue, job) is None
    assert requeue_orphans(now=later) == [str(job.id)]
    assert requeue_orphans(now=later) == []  # idempotent: it is queued again now
    assert requeue_orphans() == []  # and a young job is never touched
    run_rq(redis_queue)
    job.refresh_from_db()
    assert job.status == JobStatus.PENDING and job.slurm_job_id
    first = job.slurm_job_id
    watch_until(job, FINAL)
    assert_completed_once(job, first)


def test_slurmctld_restarted_while_a_job_runs(api, local, folder, redis_queue):
    fill(folder, {f"g{i:02d}.jpg": SAMPLES / "t1.jpg" for i in range(10)})
    job = start(api, folder, template="cpu-small")
    run_rq(redis_queue)
    job.refresh_from_db()
    first = job.slurm_job_id
    assert first, job.error
    with faults.a_task_paused_mid_work(first):  # the job is mid-run for the whole outage
        job = watch_until(job, {JobStatus.RUNNING})
        t0 = time.monotonic()
        with faults.outage(faults.stop_slurmctld):
            from jobs.watcher.poll import poll_profile
            poll_profile(local)  # squeue fails, sacct (slurmdbd) still answers: nothing wrong is recorded
            job.refresh_from_db()
            assert job.status == JobStatus.RUNNING, job.error
        outage_s = time.monotonic() - t0
    watch_until(job, FINAL)
    print(f"observed slurmctld restart: down+up {outage_s:.1f}s, job {job.status} {job.done}/{job.total}")
    assert_completed_once(job, first)


def test_slurmd_killed_mid_task_keeps_the_task_and_the_truth(api, local, folder, redis_queue):
    """Slurm 22.05, observed: SIGKILL of slurmd leaves slurmstepd (and the task) running; a slurmd
    started again within SlurmdTimeout reattaches, the task finishes and is accounted COMPLETED."""
    fill(folder, {f"g{i:02d}.jpg": SAMPLES / "t1.jpg" for i in range(10)})
    job = start(api, folder, template="cpu-small")
    run_rq(redis_queue)
    job.refresh_from_db()
    first = job.slurm_job_id
    assert first, job.error
    # One of its tasks is held mid-work for the whole outage: it cannot end meanwhile, so its
    # slurmstepd has no reason to exit but a lost slurmd.
    with faults.a_task_paused_mid_work(first) as step:
        with faults.outage(faults.kill_slurmd):
            assert faults.alive(step)  # the task's slurmstepd survives its slurmd ...
            time.sleep(OUTAGE_S)
            assert faults.alive(step)  # ... for as long as slurmd is gone
    job = watch_until(job, FINAL)
    targets = list(job.targets.all())
    # Truthful either way: `completed` only with every output; otherwise each failure says why.
    if job.status == JobStatus.COMPLETED:
        assert all(t.status == TargetStatus.DONE and t.output_file for t in targets)
    else:
        assert job.error
        assert all(t.message for t in targets if t.status == TargetStatus.FAILED)
        assert all(t.reason for t in job.tasks.all() if t.state != "COMPLETED")
    print(f"observed slurmd killed: job {job.status}, tasks {[(t.state, t.reason) for t in job.tasks.all()]}")
    assert slurm_ids(job) == {first}


def test_a_restarted_watcher_resumes_from_stored_slurm_ids(api, local, folder, redis_queue, settings):
    fill(folder, {f"g{i:02d}.jpg": SAMPLES / "t1.jpg" for i in range(6)})
    job = start(api, folder, template="cpu-small")
    run_rq(redis_queue)
    job.refresh_from_db()
    first = job.slurm_job_id
    assert first, job.error
    with faults.a_task_paused_mid_work(first):  # the job cannot end before this watcher has seen it run
        job = watch_until(job, {JobStatus.RUNNING})  # this "watcher" then dies
    env = {**os.environ, "DATABASE_URL": _test_database_url(), "REDIS_URL": settings.REDIS_URL,
           "MEDIA_ROOT": str(settings.MEDIA_ROOT)}
    deadline = time.monotonic() + 600
    runs = 0
    while job.status not in FINAL:
        assert time.monotonic() < deadline, f"still {job.status} after {runs} fresh watcher processes"
        r = subprocess.run([sys.executable, "manage.py", "watch_cluster", "--once"], cwd=faults.REPO, env=env,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        runs += 1
        run_rq(redis_queue)  # the RQ worker's part: outputs the watcher asked for
        job.refresh_from_db()
        if job.status not in FINAL:
            time.sleep(1)
    assert_completed_once(job, first)
    print(f"observed watcher restart: {runs} fresh watcher processes, job {job.status} {job.done}/{job.total}")
    ClusterProfile.objects.get(pk=local.pk)  # the profile is untouched by the fresh processes
