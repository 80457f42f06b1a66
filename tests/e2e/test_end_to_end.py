"""The product's spine on the real local clusters over real SSH: API -> RQ -> sbatch -> watcher -> results.

The tests that take `site` are the contract suite: they run on every Slurm version (tests/e2e/sites.py)."""
import hashlib
import io
import subprocess
import time
import zipfile

import pytest
from PIL import Image

from jobs.models import Job, JobStatus, TargetStatus
from jobs.results.files import download_name
from tests.e2e import sites
from tests.e2e.conftest import SAMPLES, fill, run_rq, watch_until
from tests.e2e.shots import SHOTS
from tests.e2e.test_browser_live import (
    CHROMIUM,
    CHROMIUM_ARGS,
    _sync_playwright,
    web_server,  # noqa: F401 - a fixture
)
from tests.worker import badfiles


def start(api, folder, template="gpu-batch", **extra):
    with open(SAMPLES / "Tom_Hanks_54745.png", "rb") as face:
        r = api.post("/api/v1/jobs", {"template": template, "source": face, "target_folder": str(folder),
                                      "consent": "true", **extra})
    assert r.status_code == 201, r.content
    return Job.objects.get(pk=r.json()["id"])


@pytest.mark.parametrize("site", sites.WITH_CONTAINER, indirect=True, ids=sites.site_id)
def test_it_runs_a_folder_as_one_array_job_and_returns_swapped_outputs(api, site, folder, redis_queue, web_server,
                                                                       monkeypatch):
    fill(folder, {"group.jpg": SAMPLES / "t1.jpg", "astronaut.png": SAMPLES / "astronaut.png",
                  "hanks 'quoted' $(x).png": SAMPLES / "Tom_Hanks_54745.png", "group2.jpg": SAMPLES / "t1.jpg"})
    job = start(api, folder, template=site.gpu, name="four photos")
    assert job.cluster == site.profile
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
    # the worker looked at each result again (worker.selfcheck): its flags reached the rows and the count
    flagged = sum(1 for t in targets if t.self_check)
    assert all(t.self_check in ("", "not_taken", "face_lost") for t in targets)
    assert detail["status"] == "completed" and detail["progress"] == {"total": 4, "done": 4, "failed": 0,
                                                                      "needs_look": flagged}
    assert len(detail["outputs"]) == 4
    z = api.get(f"/api/v1/jobs/{job.id}/results.zip")
    assert z.status_code == 200
    names = zipfile.ZipFile(io.BytesIO(b"".join(z.streaming_content))).namelist()
    assert sorted(names) == sorted(download_name(t) for t in targets)  # "<original>-swapped.<ext>"
    assert "group-swapped.jpg" in names
    # Slurm's own accounting of that cluster: one array, its two tasks completed on its nodes.
    rows = [line.split("|") for line in site.slurm("sacct", "-j", job.slurm_job_id, "-X", "-n", "-P",
                                                   "-o", "JobID,State,NodeList").splitlines() if line.strip()]
    assert sorted(r[0] for r in rows) == [f"{job.slurm_job_id}_0", f"{job.slurm_job_id}_1"], rows
    assert all(r[1] == "COMPLETED" and r[2] in site.nodes for r in rows), rows
    if site.container:
        # The tasks ran the worker in its image (the nodes' own Debian has no `python` at all), and
        # the job records which image: its path and the SHA-256 of the file the nodes read.
        # (The cluster's work root is this machine's folder, bound into its root at the same path.)
        with open(job.folder.script(1)) as script:
            assert "exec apptainer exec --nv --bind" in script.read()
        with open(site.container, "rb") as image:
            digest = hashlib.file_digest(image, "sha256").hexdigest()
        assert detail["container_image"] == {"image": site.container, "sha256": digest}
    else:
        assert detail["container_image"] is None
    # What its owner sees: the finished job's page, its four results shown (a picture per site).
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    screenshot_job_page(job, web_server, f"finished-job-{site.id}")


def screenshot_job_page(job, web_server, name: str) -> None:
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.test import Client

    session = Client()
    session.force_login(User.objects.get(username="demo"))
    SHOTS.mkdir(parents=True, exist_ok=True)
    with _sync_playwright()() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(base_url=web_server.url, locale="en-US", viewport={"width": 1280, "height": 900})
            context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "url": web_server.url,
                                  "value": session.cookies[settings.SESSION_COOKIE_NAME].value}])
            page = context.new_page()
            assert page.goto(f"/jobs/{job.id}").status == 200
            page.wait_for_load_state("networkidle")
            assert page.get_attribute("[data-status]", "data-status") == "completed"
            shown = page.evaluate("() => [...document.images].filter(i => i.complete && i.naturalWidth > 0 "
                                  "&& i.src.includes('/thumbs/')).length")
            assert shown >= job.total, f"{shown} result pictures shown of {job.total}"
            page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
        finally:
            browser.close()


def test_it_ends_partially_failed_with_the_corrupt_targets_message(api, local, folder, redis_queue):
    fill(folder, {"a.jpg": SAMPLES / "t1.jpg", "b.png": SAMPLES / "astronaut.png"})
    badfiles.truncated(__import__("numpy").asarray(Image.open(SAMPLES / "astronaut.png").convert("RGB")),
                       folder / "broken.jpg")
    job = start(api, folder)
    run_rq(redis_queue)
    job = watch_until(job, {JobStatus.COMPLETED, JobStatus.PARTIALLY_FAILED, JobStatus.FAILED})
    assert job.status == JobStatus.PARTIALLY_FAILED, job.error
    broken = job.targets.get(name="broken.jpg")
    assert broken.status == TargetStatus.FAILED and "is damaged: export it again into the same folder" in broken.message  # the worker names the sentence (code "damaged"), said for a folder
    assert {t.name for t in job.targets.filter(status=TargetStatus.DONE)} == {"a.jpg", "b.png"}
    assert all(t.output_file for t in job.targets.filter(status=TargetStatus.DONE))
    assert "1 of 3 photos and videos failed" in job.error


#: Slurm's task states that never change again (sacct's State column, first word)
SLURM_ENDED = {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED",
               "BOOT_FAIL", "DEADLINE"}


def slurm(*argv: str) -> str:
    """Run a Slurm command here, as root (the tests' user: an administrator); its output."""
    r = subprocess.run(list(argv), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"{' '.join(argv)} failed ({r.returncode}): {r.stdout}{r.stderr}"
    return r.stdout


def array_indexes(text: str) -> list[int]:
    """sacct's array part of a JobID: "2" -> [2]; "[0-1%1]" -> [0, 1]; "[1,3-4]" -> [1, 3, 4]."""
    out: list[int] = []
    for item in text.strip("[]").split("%")[0].split(","):
        first, _, last = item.partition("-")
        out.extend(range(int(first), int(last or first) + 1))
    return out


def accounted_task_states(slurm_job_id: str, timeout: float = 120, slurm=slurm) -> dict[int, str]:
    """{array index: state} from Slurm's accounting, once every task there has ended (accounting
    may lag the queue by a moment). `slurm`: how to run sacct (a site's, for another cluster)."""
    deadline = time.monotonic() + timeout
    while True:
        states: dict[int, str] = {}
        for line in slurm("sacct", "-j", slurm_job_id, "-X", "-n", "-P", "-o", "JobID,State").splitlines():
            job_id, _, state = line.strip().partition("|")
            _, _, index = job_id.partition("_")
            if index:
                states.update({i: state.split()[0] for i in array_indexes(index)})
        if states and set(states.values()) <= SLURM_ENDED:
            return states
        assert time.monotonic() < deadline, f"Slurm job {slurm_job_id}: tasks not ended after {timeout}s: {states}"
        time.sleep(1)


@pytest.mark.parametrize("site", sites.WITH_CONTAINER, indirect=True, ids=sites.site_id)
def test_it_cancels_a_running_job_that_cannot_finish_first(api, site, folder, redis_queue):
    from jobs.models import Template

    slurm = site.slurm
    # An admin's template that runs one task of a job at a time (`tasks at once` = 1, Slurm's
    # `--array=...%1`): 2 images a task, so 5 images are tasks 0, 1 and 2, and task 2 can start
    # only after tasks 0 and 1 have both ended.
    template = Template.objects.get(slug=site.cpu)
    template.pk, template.slug, template.name = None, "cpu-one-at-a-time", "CPU, one task at a time"
    template.chunk_size, template.array_limit = 2, 1
    template.save()
    fill(folder, {f"g{i}.jpg": SAMPLES / "t1.jpg" for i in range(5)})
    job = start(api, folder, template=template.slug)
    run_rq(redis_queue)
    job.refresh_from_db()
    assert job.status == JobStatus.PENDING and job.slurm_job_id, job.error
    assert job.tasks.count() == 3
    last = f"{job.slurm_job_id}_2"
    cancelled = False
    try:
        # An administrator holds the last task the moment the job is in the queue: however fast the
        # others run, the job cannot finish before the user's cancel.
        slurm("scontrol", "hold", last)
        queue = dict(line.split("|", 1) for line in
                     slurm("squeue", "-j", job.slurm_job_id, "-h", "-r", "-o", "%i|%T %r").splitlines())
        assert queue.get(last, "").startswith("PENDING") and "JobHeldAdmin" in queue[last], queue

        job = watch_until(job, {JobStatus.RUNNING})
        r = api.post(f"/api/v1/jobs/{job.id}/cancel")
        assert r.status_code == 200, r.content
        run_rq(redis_queue)  # the scancel goes through the queue
        cancelled = True
    finally:
        if not cancelled:  # never leave a held job in the queue
            slurm("scancel", job.slurm_job_id)

    job = watch_until(job, {JobStatus.CANCELLED, JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.PARTIALLY_FAILED})
    assert job.status == JobStatus.CANCELLED, (job.error, [(t.index, t.state, t.reason) for t in job.tasks.all()])
    tasks = {t.index: t.state for t in job.tasks.all()}
    print(f"observed cancel: tasks {tasks}, {job.done} of 5 done")
    assert tasks[2] == "CANCELLED", tasks
    # Slurm agrees, task by task; but for one race: the cancel reached a task just as it finished its
    # last photo, Slurm's accounting first said CANCELLED (what the portal read and kept) and then
    # settled COMPLETED (seen in CI: a busy machine). Such a task's photos are all done.
    accounted = accounted_task_states(job.slurm_job_id, slurm=slurm)
    assert accounted.keys() == tasks.keys() and accounted[2] == "CANCELLED", accounted
    for index, state in accounted.items():
        if state != tasks[index]:
            assert (tasks[index], state) == ("CANCELLED", "COMPLETED"), (tasks, accounted)
            assert all(t.status == TargetStatus.DONE for t in job.targets.filter(task_index=index)), accounted
    # The held task's image never ran; what was finished is kept, and the page says so.
    assert job.targets.get(index=4).status != TargetStatus.DONE
    assert job.done < 5 and f"{job.done} of 5 photos and videos were finished and are kept" in job.error, job.error
    for t in job.targets.filter(status=TargetStatus.DONE):
        assert t.output_file


def test_a_retried_submission_does_not_submit_twice(api, local, folder, redis_queue):
    from jobs.job.submit import submit_job

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
