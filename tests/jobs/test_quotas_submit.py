"""Folder targets are counted only when submit_job lists the folder on the cluster: the
targets-per-job quota is checked there. A folder over the limit fails the job with a plain
message and submits nothing; within the limit the job goes on, and its GPU-hour estimate grows
to the real count (it weighs on the next Start; it is never refused after Start).
Only the SSH seam (`cluster.runner_for`) is faked, as in test_watcher.py."""
from datetime import datetime
from datetime import timezone as dt_timezone

import pytest

from cluster import RemoteEntry
from cluster.paths import answer_folder_listing
from jobs import quotas
from jobs.job.submit import submit_job
from jobs.models import Job, JobStatus, Quota, Template
from tests.fake_ssh import FakeSSH

from .api_helpers import image
from .test_watcher import EMPTY_SQUEUE

FOLDER = "/srv/ffportal/storage/shoot"


#: the first round trip of a submission: squeue: nothing queued; sacct and the rest: "failed" (no
#: accounting) -> no earlier submission found
NOTHING_SUBMITTED = {"squeue": EMPTY_SQUEUE, "*": (1, "", "")}


def folder_of(n_images: int) -> dict:
    """How a cluster whose target folder holds `n_images` JPEGs (and a hidden file and a text file,
    which are not targets) answers `run`: the folder listing (cluster.list_folder_argv), and sbatch
    with Slurm job id 4242."""
    entries = [RemoteEntry(name=f"img{i:05d}.jpg", path=f"{FOLDER}/img{i:05d}.jpg", type="file", size=1000,
                           mtime=0) for i in range(n_images)]
    entries += [RemoteEntry(name=".DS_Store", path=f"{FOLDER}/.DS_Store", type="file", size=1, mtime=0),
                RemoteEntry(name="notes.txt", path=f"{FOLDER}/notes.txt", type="file", size=1, mtime=0)]
    return {"sh": lambda argv: answer_folder_listing(argv, entries), "sbatch": "4242\n"}


@pytest.fixture
def cluster(fake_ssh):
    """`cluster(n_images)`: the SSH seam answered by a cluster whose folder holds `n_images` JPEGs."""
    def install(n_images: int) -> FakeSSH:
        return fake_ssh(on_run=folder_of(n_images), on_batch=NOTHING_SUBMITTED)
    return install


@pytest.fixture
def folder_job(owner, template, jpeg_bytes):
    from jobs.job.start import start_job

    return start_job(user=owner, template=template, sources=[image("face.jpg", jpeg_bytes)], consent=True,
                     target_folder=FOLDER)


def sbatch_calls(runner: FakeSSH) -> list:
    return [c for c in runner.commands if c[0] == "sbatch"]


def test_it_fails_a_folder_job_over_the_targets_limit(cluster, team, folder_job):
    Quota.objects.create(group=team, max_targets_per_job=1000)
    runner = cluster(1200)
    assert submit_job(str(folder_job.id)) is None
    folder_job.refresh_from_db()
    assert folder_job.status == JobStatus.FAILED and folder_job.finished_at is not None
    assert folder_job.error == ("The folder has 1,200 images and videos; your limit is 1,000 per job (group vfx). "
                                "Split the folder or ask an admin.")
    assert folder_job.targets.count() == 0 and folder_job.total == 0
    assert sbatch_calls(runner) == [] and not any(p.endswith("manifest.json") for p in runner.written)


def test_it_submits_a_folder_job_within_the_limit(cluster, owner, folder_job):
    Quota.objects.create(user=owner, max_targets_per_job=1000)
    runner = cluster(1000)
    assert submit_job(str(folder_job.id)) == "4242"
    folder_job.refresh_from_db()
    assert folder_job.status == JobStatus.PENDING and folder_job.total == 1000
    assert len(sbatch_calls(runner)) == 1


def test_it_re_estimates_a_folder_job_once_listed_but_never_refuses_it_then(cluster, owner, profile, jpeg_bytes):
    from jobs.job.start import start_job

    hungry = Template.objects.create(name="Hungry", slug="hungry", cluster=profile, partition="gpu", gpu_count=1,
                                     time_limit="01:00:00", chunk_size=10, seconds_per_image=600)
    Quota.objects.create(user=owner, gpu_hours_per_month=5)
    job = start_job(user=owner, template=hungry, sources=[image("face.jpg", jpeg_bytes)], consent=True,
                    target_folder=FOLDER)
    now = datetime.now(dt_timezone.utc)
    assert quotas.gpu_budgets(owner, now)[0].used == pytest.approx(1)  # one task of 10 at Start
    cluster(100)  # 10 tasks of 1 GPU-hour: 10 GPU-hours, twice the quota
    assert submit_job(str(job.id)) == "4242"  # accepted at Start: it runs
    assert Job.objects.get(pk=job.pk).status == JobStatus.PENDING
    budget = quotas.gpu_budgets(owner, now)[0]
    assert budget.used == pytest.approx(10) and budget.left == 0  # the next Start is refused
