"""Retention on the REAL local cluster over real SSH: a finished job's folder exists on the cluster,
"Delete job and files" (DELETE /api/v1/jobs/<id>) removes it there and the portal's files here; and
the cluster itself refuses a folder that leads outside the work root (cluster.cleanup)."""
import posixpath
import uuid
from pathlib import Path

import pytest

import cluster
from cluster.cleanup import delete_job_folder
from jobs.models import AuditEntry, JobStatus
from tests.e2e.conftest import SAMPLES, fill, run_rq, watch_until
from tests.e2e.test_end_to_end import start


def on_cluster(profile, *argv: str) -> int:
    """Exit status of a command run on the cluster as the portal's SSH user."""
    return cluster.runner_for(profile).run(list(argv), timeout=60).rc


def test_delete_removes_the_job_folder_on_the_cluster_and_the_files_here(api, local, folder, redis_queue):
    fill(folder, {"a.jpg": SAMPLES / "t1.jpg"})
    job = start(api, folder, name="to forget")
    run_rq(redis_queue)
    job = watch_until(job, {JobStatus.COMPLETED, JobStatus.PARTIALLY_FAILED, JobStatus.FAILED})
    assert job.status == JobStatus.COMPLETED, job.error
    remote = job.folder.root
    assert on_cluster(local, "test", "-f", posixpath.join(remote, "manifest.json")) == 0  # staged there
    assert job.media_dir.is_dir() and any(job.media_dir.rglob("*.jpg"))  # outputs/thumbnails here

    answer = api.delete(f"/api/v1/jobs/{job.id}")
    assert answer.status_code == 200, answer.content
    run_rq(redis_queue)  # the cluster folder's deletion, queued on commit

    assert on_cluster(local, "test", "-e", remote) == 1  # gone on the cluster
    assert on_cluster(local, "test", "-d", posixpath.dirname(remote)) == 0  # the other jobs' folder stays
    assert not job.media_dir.exists()
    job.refresh_from_db()
    assert job.files_deleted_at and job.cluster_files_deleted_at and job.total == 1
    assert api.get(f"/api/v1/jobs/{job.id}/results.zip").status_code == 410
    assert AuditEntry.objects.get(action="job.cluster_files_deleted", target_id=str(job.id)).details["existed"] is True
    assert Path(folder / "a.jpg").is_file()  # the user's own folder on the storage is not touched


def test_the_cluster_refuses_a_folder_that_leads_outside_the_work_root(local):
    runner = cluster.runner_for(local)
    outside = f"/tmp/ffp-retention-{uuid.uuid4().hex}"
    jobs_folder = posixpath.join(local.work_root, "jobs")
    link = posixpath.join(jobs_folder, f"link-{uuid.uuid4().hex}")
    # The folder of jobs of no team exists only once such a job ran: on a new machine whose jobs all
    # had a team (teams/<account>/jobs) it is not there yet, so the test makes it rather than rely
    # on the order tests run in.
    assert runner.run(["mkdir", "-p", "-m", "700", jobs_folder]).rc == 0
    assert runner.run(["mkdir", "-p", posixpath.join(outside, "victim")]).rc == 0
    assert runner.run(["touch", posixpath.join(outside, "victim", "keep.txt")]).rc == 0
    assert runner.run(["ln", "-s", outside, link]).rc == 0
    try:
        # Lexically inside the work root, so only the cluster's own check (realpath) can refuse it.
        with pytest.raises(cluster.PathNotAllowed, match="outside the work root"):
            delete_job_folder(runner, posixpath.join(link, "victim"), local.work_root)
        assert on_cluster(local, "test", "-f", posixpath.join(outside, "victim", "keep.txt")) == 0
    finally:
        runner.run(["rm", "-f", link])
        runner.run(["rm", "-rf", outside])
