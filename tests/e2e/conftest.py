"""End-to-end fixtures: the REAL local cluster (scripts/cluster/up.sh, started by `make test`),
real Redis, real SSH. Nothing here skips: a missing component fails with a message saying which.

Jobs run in-process: the API request commits, the submission is enqueued in real Redis and run by
an rq SimpleWorker in this process (so it sees the test database), and the watcher's
`poll_profile` is called in a loop until the job ends.
"""
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from django.core.management import call_command

from jobs.models import ClusterProfile, Job
from tests.e2e import sites

STORAGE = Path(os.environ.get("FFP_STORAGE", "/srv/ffportal/storage"))
SAMPLES = Path(os.environ.get("FFP_SAMPLE_FACES", str(STORAGE / "samples" / "faces")))


@pytest.fixture(scope="session", autouse=True)
def _cluster_is_up():
    repo = Path(__file__).resolve().parents[2]
    r = subprocess.run(["bash", str(repo / "scripts/cluster/check.sh")], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        pytest.fail("the local cluster is not up (run `make test`, which starts it):\n" + r.stdout + r.stderr, pytrace=False)


@pytest.fixture
def redis_queue():
    import django_rq

    q = django_rq.get_queue("default")
    try:
        q.connection.ping()
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"Redis is not reachable at {q.connection}: {exc}", pytrace=False)
    q.empty()
    # empty() leaves the registries: a retry scheduled by an earlier, interrupted run (Redis keeps
    # the test database between runs) would be found by this run's "nothing is scheduled" checks.
    for registry in (q.scheduled_job_registry, q.deferred_job_registry, q.failed_job_registry):
        for job_id in registry.get_job_ids():
            registry.remove(job_id, delete_job=True)
    return q


@pytest.fixture
def local(transactional_db, settings, tmp_path, redis_queue):
    settings.SUBMIT_ON_START = True
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.MEDIA_ROOT = tmp_path / "media"
    call_command("seed_local", "--demo-password", "demo-pass-123", stdout=open(os.devnull, "w"))
    profile = ClusterProfile.objects.get(slug="local")
    return profile


@pytest.fixture(params=sites.VERSIONS, ids=sites.site_id)
def site(request, local) -> sites.Site:
    """Each Slurm version in turn (tests/e2e/sites.py): the contract suite's tests take this."""
    return sites.site(request.param)


@pytest.fixture
def folder():
    """A fresh target folder on the cluster storage; removed afterwards."""
    path = STORAGE / "tests" / uuid.uuid4().hex
    path.mkdir(parents=True)
    os.chmod(path.parent, 0o755)
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def fill(folder: Path, names_from: dict[str, Path]) -> None:
    for name, src in names_from.items():
        shutil.copyfile(src, folder / name)
        os.chmod(folder / name, 0o644)


def run_rq(queue) -> None:
    from rq import SimpleWorker

    SimpleWorker([queue], connection=queue.connection, serializer=queue.serializer).work(burst=True)


#: how long a job on the shared 2-CPU test cluster may take to reach a state (other test runs'
#: jobs go first); a wait ends as soon as the state is reached, so a generous one costs nothing
JOB_WAIT_S = 300


def watch_until(job: Job, statuses, timeout: float = JOB_WAIT_S, on_cycle=None) -> Job:
    """Run the watcher's poll (about once a second) until the job is in one of `statuses`. What the
    poll enqueues (output fetches, emails) is worked off in this process, as the RQ worker would."""
    import django_rq

    from jobs.watcher.poll import poll_profile

    queue = django_rq.get_queue("default")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cycle = poll_profile(job.cluster)
        # The watcher's cycle: every active job of the cluster in ONE SSH round trip, whatever happens.
        assert cycle.execs == (1 if cycle.jobs else 0), cycle
        job.refresh_from_db()
        if on_cycle:
            on_cycle(job)
        if job.status in statuses:
            return job
        run_rq(queue)
        time.sleep(1)
    tasks = [(t.index, t.state, t.reason) for t in job.tasks.all()]
    pytest.fail(f"job {job.id} still {job.status} after {timeout}s (tasks: {tasks}, error: {job.error!r})")


@pytest.fixture
def api(client, local):
    from django.contrib.auth.models import User

    from jobs.models import ApiToken

    user = User.objects.get(username="demo")
    _, key = ApiToken.issue(user)
    client.defaults["HTTP_AUTHORIZATION"] = f"Token {key}"
    return client
