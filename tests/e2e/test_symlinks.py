"""Links in the cluster storage, on the real local cluster over real SSH: a photo in a user's folder
that is a link out of the storage root (to a system file, or to another job's uploaded face in the
work root) is refused, when the folder is listed and again on the node right before it is opened;
its content is never output, and its neighbours finish as usual."""
import os
import subprocess
from pathlib import Path

from jobs.models import Job, JobStatus, TargetStatus, Template
from tests.e2e.conftest import SAMPLES, fill, run_rq, watch_until
from tests.e2e.test_end_to_end import slurm, start

FINAL = {JobStatus.COMPLETED, JobStatus.PARTIALLY_FAILED, JobStatus.FAILED}
#: the portal's words; the worker's say the same ("... leads outside ...") or, without the roots in
#: the manifest, that a link may lead outside
REFUSED = "skipped: it is a link"


def another_jobs_face(api, folder, redis_queue) -> tuple[Job, Path]:
    """A job of its own (one photo), staged and submitted: its uploaded face now lies in its job
    folder under the work root, outside the storage root."""
    sub = folder / "other"
    sub.mkdir()
    os.chmod(sub, 0o755)
    fill(sub, {"x.jpg": SAMPLES / "t1.jpg"})
    other = start(api, sub)
    run_rq(redis_queue)
    other.refresh_from_db()
    assert other.slurm_job_id, other.error
    [face] = Path(other.folder.sources).iterdir()
    return other, face


def outputs_on_the_cluster(job: Job) -> list[str]:
    return sorted(os.listdir(job.folder.outputs))


def test_a_link_out_of_the_storage_is_refused_and_never_output(api, local, folder, redis_queue):
    other, their_face = another_jobs_face(api, folder, redis_queue)
    fill(folder, {"a.jpg": SAMPLES / "t1.jpg"})
    (folder / "b-their-face.png").symlink_to(their_face)
    (folder / "c-hostname.jpg").symlink_to("/etc/hostname")
    (folder / "d-same.jpg").symlink_to(folder / "a.jpg")  # a link that stays inside: fine

    # The folder browser does not offer them.
    listing = api.get("/api/v1/folders", {"path": str(folder)}).json()
    assert [e["name"] for e in listing["entries"] if e["type"] == "file"] == ["a.jpg", "d-same.jpg"]

    job = start(api, folder)
    run_rq(redis_queue)
    job.refresh_from_db()
    assert job.slurm_job_id, job.error
    refused = {t.name: t for t in job.targets.filter(status=TargetStatus.FAILED)}
    assert set(refused) == {"b-their-face.png", "c-hostname.jpg"}  # refused when listed, with a reason
    assert all(t.message == "skipped: it is a link that leads outside the folders you may use" for t in refused.values())
    assert str(their_face) not in Path(job.folder.manifest).read_text()

    job = watch_until(job, FINAL)
    watch_until(other, FINAL)
    targets = {t.name: t for t in job.targets.all()}
    assert job.status == JobStatus.PARTIALLY_FAILED, job.error
    assert {n: t.status for n, t in targets.items()} == {
        "a.jpg": TargetStatus.DONE, "b-their-face.png": TargetStatus.FAILED, "c-hostname.jpg": TargetStatus.FAILED,
        "d-same.jpg": TargetStatus.DONE}
    assert targets["b-their-face.png"].message.startswith(REFUSED)  # the worker refused it too
    assert not targets["b-their-face.png"].output_file and not targets["c-hostname.jpg"].output_file
    assert outputs_on_the_cluster(job) == ["a.jpg", "d-same.jpg"]
    assert all(their_face.read_bytes() != Path(job.folder.outputs, n).read_bytes() for n in outputs_on_the_cluster(job))
    r = api.get(f"/api/v1/jobs/{job.id}")
    assert {t["name"] for t in r.json()["outputs"]} == {"a.jpg", "d-same.jpg"}


def test_a_photo_swapped_for_a_link_after_the_listing_is_refused_on_the_node(api, local, folder, redis_queue):
    """The storage changes between the listing and the run: the worker checks again right before
    it opens the file. One target per task, one task at a time; task 1 is held while b.png, listed
    as a real photo, becomes a link to another job's face."""
    other, their_face = another_jobs_face(api, folder, redis_queue)
    template = Template.objects.get(slug="cpu-small")
    template.pk, template.slug, template.name = None, "cpu-one-by-one", "CPU, one image a task, one task at a time"
    template.chunk_size, template.array_limit = 1, 1
    template.save()
    fill(folder, {"a.jpg": SAMPLES / "t1.jpg", "b.png": SAMPLES / "astronaut.png"})
    job = start(api, folder, template=template.slug)
    run_rq(redis_queue)
    job.refresh_from_db()
    assert job.slurm_job_id and job.targets.get(name="b.png").status == TargetStatus.WAITING, job.error
    relink_while_held(job, 1, folder / "b.png", their_face)
    job = watch_until(job, FINAL)
    watch_until(other, FINAL)
    b = job.targets.get(name="b.png")
    assert b.status == TargetStatus.FAILED and b.message.startswith(REFUSED), b.message
    assert job.targets.get(name="a.jpg").status == TargetStatus.DONE
    assert outputs_on_the_cluster(job) == ["a.jpg"]
    assert [t.state for t in job.tasks.order_by("index")] == ["COMPLETED", "FAILED"]  # exit 1: a target failed


def relink_while_held(job: Job, task: int, path: Path, to: Path) -> None:
    """Make `path` a link to `to` while task `task` of `job` is held on the cluster: after the portal
    listed the folder, before the worker reads the file (the job is cancelled if that fails)."""
    held = f"{job.slurm_job_id}_{task}"
    try:
        slurm("scontrol", "hold", held)
        path.unlink()
        path.symlink_to(to)
        slurm("scontrol", "release", held)
    except BaseException:
        subprocess.run(["scancel", job.slurm_job_id], capture_output=True, timeout=60)
        raise
