"""A job bigger than the cluster's MaxArraySize, and a template Slurm refuses, on the REAL cluster.

1,500 images with one image per task would be an array of 1,500 tasks, which this cluster's
slurmctld refuses (MaxArraySize 1001: `sbatch: error: ... Invalid job array specification`). The
portal reads the limit in the submission's first round trip and chunks the folder to fit. A
template whose partition does not exist is refused by sbatch for good: the job fails with Slurm's
words, once, and is not retried."""
import os
import re
import shutil

from jobs.models import JobStatus, Template
from tests.e2e.conftest import SAMPLES, run_rq
from tests.e2e.test_end_to_end import start


def array_task_ids(scontrol_oneliners: str) -> set[int]:
    """Every array index in `scontrol show job <id> --oneliner`'s records ("ArrayTaskId=0", "2-749",
    "3,5-9%4")."""
    ids: set[int] = set()
    for spec in re.findall(r"\bArrayTaskId=(\S+)", scontrol_oneliners):
        for part in spec.split("%")[0].split(","):
            lo, _, hi = part.partition("-")
            ids.update(range(int(lo), int(hi or lo) + 1))
    return ids


def test_it_reads_every_array_index_from_scontrols_records():
    assert array_task_ids("JobId=7 ArrayTaskId=2-5,9%2 X=1\nJobId=8 ArrayTaskId=0 X\nJobId=9 ArrayTaskId=1 Y") == \
        {0, 1, 2, 3, 4, 5, 9}


def test_a_folder_bigger_than_max_array_size_is_chunked_to_fit(api, site, folder, redis_queue):
    tiny = folder / "a0000.jpg"
    shutil.copyfile(SAMPLES / "t1.jpg", tiny)
    for i in range(1, 1500):
        os.link(tiny, folder / f"a{i:04d}.jpg")  # hard links: 1,500 real files, one copy on disk
    one_per_task = Template.objects.get(slug=site.cpu)
    one_per_task.pk, one_per_task.slug, one_per_task.chunk_size = None, "one-per-task", 1
    one_per_task.save()
    job = start(api, folder, template="one-per-task")
    run_rq(redis_queue)
    job.refresh_from_db()
    try:
        assert job.status == JobStatus.PENDING and job.slurm_job_id, job.error
        assert job.total == 1500 and job.tasks.count() == 750  # chunks of 2: 750 tasks
        assert job.cluster.max_array_size == 1001  # read from the real slurmctld
        shown = site.slurm("scontrol", "show", "job", job.slurm_job_id, "--oneliner")
        # One record per started task and one for the tasks still pending ("2-749" once two have
        # started, on a cluster with room): together they must be exactly the 750 tasks. A task
        # that already ended may have left slurmctld (MinJobAge): sacct still has it.
        ended = site.slurm("sacct", "-j", job.slurm_job_id, "-X", "-n", "-P", "-o", "JobID")
        ended_ids = {int(m) for m in re.findall(rf"^{job.slurm_job_id}_(\d+)$", ended, re.M)}
        assert array_task_ids(shown) | ended_ids == set(range(750)), shown[:400]
    finally:
        site.slurm("scancel", job.slurm_job_id)


def test_a_template_slurm_refuses_fails_the_job_once(api, local, folder, redis_queue):
    shutil.copyfile(SAMPLES / "t1.jpg", folder / "a.jpg")
    bad = Template.objects.get(slug="cpu-small")
    bad.pk, bad.slug, bad.name, bad.partition = None, "no-such-partition", "No such partition", "nosuch"
    bad.save()
    job = start(api, folder, template="no-such-partition")
    run_rq(redis_queue)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and not job.slurm_job_id
    assert job.error.startswith("Slurm refused the job: Invalid partition name specified."), job.error
    assert not [j for j in redis_queue.scheduled_job_registry.get_job_ids() if str(job.id) in j]  # not retried
    run_rq(redis_queue)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
