"""How big a job may be, and how it is fitted to the cluster: the cluster's own targets-per-job limit
(admin-settable, checked at Start for uploads and after listing for a folder), arrays sized from
the cluster's MaxArraySize (read from `scontrol show config` in the submission's first round
trip), sbatch refusals that fail the job instead of being retried, and a staging that can be
retried after it got half-way. Only the SSH seam (`cluster.runner_for`) is faked."""
import pytest

from cluster import CommandFailed
from jobs.errors import StartError
from jobs.job.start import start_job
from jobs.job.submit import submit_job
from jobs.models import ClusterProfile, JobStatus, Task
from tests.fake_ssh import FakeSSH

from .api_helpers import image, token_client
from .test_quotas_submit import FOLDER, NOTHING_SUBMITTED, folder_of

CONFIG = "Configuration data as of 2026-11-30T20:14:44\nMaxArraySize            = {size}\nMaxJobCount             = 10000\n"


@pytest.fixture
def sized(fake_ssh):
    """`sized(n_images, max_array_size=1001, sbatch_answers=())`: the SSH seam answered by a cluster
    with a folder of `n_images` (test_quotas_submit.folder_of) whose `scontrol show config` says
    MaxArraySize, and whose sbatch answers `sbatch_answers` (exit status, stderr) in turn (then 4242)."""
    def install(n_images, max_array_size=1001, sbatch_answers=()) -> FakeSSH:
        answers = [(rc, "", stderr) for rc, stderr in sbatch_answers]

        def sbatch(argv):
            return answers.pop(0) if answers else "4242\n"

        config = CONFIG.format(size=max_array_size)
        return fake_ssh(on_run={**folder_of(n_images), "sbatch": sbatch},
                        on_batch={**NOTHING_SUBMITTED, "scontrol": config})
    return install


def script(runner: FakeSSH) -> str:
    """The batch script staged for the job's first attempt."""
    return next(v.decode() for k, v in runner.written.items() if k.endswith("job.sbatch"))


def folder_job(owner, template, jpeg_bytes):
    return start_job(user=owner, template=template, sources=[image("face.jpg", jpeg_bytes)], consent=True,
                     target_folder=FOLDER)


def test_a_folder_over_the_clusters_limit_fails_with_a_plain_message(sized, owner, template, profile, jpeg_bytes):
    profile.max_targets_per_job = 500
    profile.save()
    job = folder_job(owner, template, jpeg_bytes)
    runner = sized(100_000)
    assert submit_job(str(job.id)) is None
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.targets.count() == 0 and not job.tasks.exists()
    assert job.error == ("This job has 100,000 images and videos; the cluster Local takes at most 500 per job. "
                         "Split them into several jobs, or ask an admin to raise the limit.")
    assert not [c for c in runner.commands if c[0] == "sbatch"]


def test_uploads_over_the_clusters_limit_are_refused_at_start(owner, template, profile, jpeg_bytes):
    profile.max_targets_per_job = 2
    profile.save()
    with pytest.raises(StartError) as refused:
        start_job(user=owner, template=template, sources=[image("face.jpg", jpeg_bytes)], consent=True,
                  target_files=[image(f"t{i}.jpg", jpeg_bytes) for i in range(3)])
    assert refused.value.field == "targets" and "takes at most 2 per job" in refused.value.message
    client, _key = token_client(owner)
    r = client.post("/api/v1/jobs", {"template": template.slug, "consent": "true",
                                     "source": image("face.jpg", jpeg_bytes),
                                     "targets": [image(f"t{i}.jpg", jpeg_bytes) for i in range(3)]})
    assert r.status_code == 400 and r.json()["field"] == "targets"


def test_an_array_is_sized_to_the_clusters_max_array_size(sized, owner, template, jpeg_bytes):
    template.chunk_size = 1
    template.save()
    job = folder_job(owner, template, jpeg_bytes)
    runner = sized(10, max_array_size=4)
    assert submit_job(str(job.id)) == "4242"
    job.refresh_from_db()
    # 10 images, at most 4 tasks: chunks of 3 (3 + 3 + 3 + 1), indexes 0-3
    assert "#SBATCH --array=0-3" in script(runner)
    assert [t.index for t in job.tasks.all()] == [0, 1, 2, 3]
    assert [t.task_index for t in job.targets.order_by("index")] == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3]
    assert ClusterProfile.objects.get(pk=job.cluster_id).max_array_size == 4
    assert job.snapshot.chunk_size == 1  # what the template asked stays on record


def test_a_refusal_by_sbatch_fails_the_job_and_is_not_retried(sized, owner, template, jpeg_bytes):
    job = folder_job(owner, template, jpeg_bytes)
    sized(3, sbatch_answers=[(1, "sbatch: error: invalid partition specified: gpu\n"
                                 "sbatch: error: Batch job submission failed: Invalid partition name specified\n")])
    assert submit_job(str(job.id)) is None  # returns: RQ does not try again
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.slurm_job_id == ""
    assert job.error.startswith("Slurm refused the job: Invalid partition name specified. Nothing ran;")


def test_a_passing_sbatch_failure_is_retried_and_staging_again_makes_no_second_set_of_tasks(sized, owner, template,
                                                                                        jpeg_bytes):
    job = folder_job(owner, template, jpeg_bytes)
    runner = sized(5, sbatch_answers=[(1, "sbatch: error: Batch job submission failed: Socket timed out on "
                                          "send/recv operation\n")])
    with pytest.raises(CommandFailed):  # RQ retries it with backoff
        submit_job(str(job.id))
    job.refresh_from_db()
    assert job.status == JobStatus.SUBMITTING and job.tasks.count() == 3  # staged once already
    assert submit_job(str(job.id)) == "4242"  # the retry stages again: same rows, no IntegrityError
    job.refresh_from_db()
    assert job.status == JobStatus.PENDING and Task.objects.filter(job=job).count() == 3
    assert job.targets.count() == 5 and len([c for c in runner.commands if c[0] == "sbatch"]) == 2
