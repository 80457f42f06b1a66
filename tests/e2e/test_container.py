"""The worker's container image, checked on the REAL Slurm 26.05 cluster (the one with Apptainer)
before a job is submitted: a template pointing at an image that is not there, or that the portal's
cluster account may not read, fails the job before any task runs, in the words of the person who
started it, and nothing reaches Slurm. (A job that runs in the image: the contract suite's
`[slurm2605+apptainer]` tests.)"""
import os
import uuid

import pytest

from jobs.models import Job, JobStatus, Template
from tests.e2e import sites
from tests.e2e.conftest import SAMPLES, fill, run_rq, watch_until
from tests.e2e.test_end_to_end import start

IMAGES = os.environ.get("FFP_IMAGES", "/srv/ffportal/images")


# The 26.05 cluster with the image: the test ids name it ([slurm2605+apptainer]), so these run
# where the newer clusters' tests run (scripts/test.sh), once that cluster and its image are up.
pytestmark = pytest.mark.parametrize("site", [sites.CONTAINER], indirect=True, ids=sites.site_id)


def template_with_image(site, image: str) -> Template:
    t = Template.objects.get(slug=site.gpu)
    t.pk, t.slug, t.name, t.container_image = None, f"image-{uuid.uuid4().hex[:8]}", "Broken image", image
    t.save()
    return t


def started_and_submitted(api, folder, redis_queue, template, language="en"):
    job = start(api, folder, template=template.slug)
    Job.objects.filter(pk=job.pk).update(language=language)
    run_rq(redis_queue)
    job.refresh_from_db()
    return job


@pytest.fixture
def unreadable_image():
    """An image file the portal's cluster account may not read (root's, mode 600)."""
    path = os.path.join(IMAGES, f"unreadable-{uuid.uuid4().hex[:8]}.sif")
    with open(path, "wb") as f:
        f.write(b"SIF_MAGIC" + b"\0" * 64)
    os.chmod(path, 0o600)
    yield path
    os.unlink(path)


@pytest.mark.parametrize("language, words", [
    ("en", "The container image {image} is not on the cluster. Nothing ran; ask an admin to check the "
           "template Broken image."),
    ("zh-hans", "集群上没有容器镜像 {image}。没有运行任何任务；请让管理员检查模板 Broken image。"),
])
def test_a_missing_image_fails_the_job_before_anything_runs(api, site, folder, redis_queue, language,
                                                          words):
    image = f"{IMAGES}/gone-{uuid.uuid4().hex[:8]}.sif"
    fill(folder, {"a.jpg": SAMPLES / "t1.jpg"})
    job = started_and_submitted(api, folder, redis_queue, template_with_image(site, image), language)
    assert job.status == JobStatus.FAILED and job.slurm_job_id == "", job.error
    assert job.error == words.format(image=image)
    assert job.tasks.count() == 0 and job.container_image_used == {}
    # Slurm never heard of it.
    assert job.slurm_name not in site.slurm("squeue", "-h", "-o", "%j")
    assert api.get(f"/api/v1/jobs/{job.id}").json()["container_image"] is None


def test_an_image_the_cluster_account_may_not_read_fails_the_job_before_anything_runs(
        api, site, folder, redis_queue, unreadable_image):
    fill(folder, {"a.jpg": SAMPLES / "t1.jpg"})
    job = started_and_submitted(api, folder, redis_queue, template_with_image(site, unreadable_image))
    assert job.status == JobStatus.FAILED and job.slurm_job_id == "", job.error
    assert job.error.startswith(f"The container image {unreadable_image} is on the cluster, but the portal's "
                                f"cluster account may not read it."), job.error
    assert job.tasks.count() == 0


def test_a_folder_in_place_of_an_image_fails_the_job_before_anything_runs(api, site, folder,
                                                                          redis_queue):
    fill(folder, {"a.jpg": SAMPLES / "t1.jpg"})
    job = started_and_submitted(api, folder, redis_queue, template_with_image(site, IMAGES))
    assert job.status == JobStatus.FAILED and job.slurm_job_id == "", job.error
    assert job.error.startswith(f"{IMAGES} on the cluster is not a container image file."), job.error


def test_an_image_gone_after_submission_fails_its_tasks_in_plain_words(api, site, folder, redis_queue, monkeypatch):
    # The image is there when the portal checks it, and an admin removes it right after, before any
    # task could start (the moment is made exact by removing it as the check returns): each task's
    # container cannot start, and the page says so in words rather than "exit code 255".
    from jobs.job import container

    image = os.path.join(IMAGES, f"soon-gone-{uuid.uuid4().hex[:8]}.sif")
    os.link(site.container, image)  # the same file under another name: no copy of 500 MB
    checked = container.check_image

    def check_then_remove(runner, job):
        found = checked(runner, job)
        os.unlink(image)
        return found

    monkeypatch.setattr(container, "check_image", check_then_remove)
    fill(folder, {"a.jpg": SAMPLES / "t1.jpg", "b.jpg": SAMPLES / "t1.jpg", "c.jpg": SAMPLES / "t1.jpg"})
    try:
        job = start(api, folder, template=template_with_image(site, image).slug)
        run_rq(redis_queue)
    finally:
        if os.path.exists(image):
            os.unlink(image)
    job.refresh_from_db()
    assert job.status == JobStatus.PENDING and job.slurm_job_id, job.error
    assert job.container_image_used["image"] == image
    job = watch_until(job, {JobStatus.COMPLETED, JobStatus.PARTIALLY_FAILED, JobStatus.FAILED})
    assert job.status == JobStatus.FAILED, job.error
    reasons = {t.reason for t in job.tasks.all()}
    assert reasons == {"the worker's container could not start on the compute node (an admin can read why in "
                       "the task's log)"}, [(t.index, t.state, t.exit_code, t.reason) for t in job.tasks.all()]
