"""Shared fixtures for the portal's tests: named users (owner, colleague, stranger, staff), a
cluster profile and templates. Unit tests never reach the cluster: Start does not enqueue here
(SUBMIT_ON_START off) and the SSH seam (`cluster.runner_for`) is not called by pure views."""
import uuid

import pytest
from django.contrib.auth.models import Group, User

from jobs.models import ClusterProfile, Template


@pytest.fixture(autouse=True)
def _no_submission(settings, tmp_path):
    settings.SUBMIT_ON_START = False
    # Start's folder check asks the cluster (jobs.clusters.folder_check): tests of it give a fake runner.
    settings.FOLDER_CHECK_ON_START = False
    # Django's real password hashing costs ~0.3 s per user; these tests don't need it.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.MEDIA_ROOT = tmp_path / "media"
    # The cache (Redis) outlives a test: a key prefix of its own keeps failed-login counters of
    # one test from locking out the next.
    settings.CACHES = {"default": {**settings.CACHES["default"], "KEY_PREFIX": f"test-{uuid.uuid4().hex}"}}


@pytest.fixture(autouse=True)
def _english_outside_requests():
    """A request's language stays active in its thread after the response (LocaleMiddleware does not
    switch it back): each test starts from the default, as each watcher cycle or RQ job does."""
    from django.utils import translation

    translation.activate("en")
    yield
    translation.deactivate()


@pytest.fixture
def team(db):
    return Group.objects.create(name="vfx")


@pytest.fixture
def owner(db, team):
    u = User.objects.create_user("alice", "alice@example.org", "alice-pass-123")
    u.groups.add(team)
    return u


@pytest.fixture
def colleague(db, team):
    u = User.objects.create_user("bob", "bob@example.org", "bob-pass-123")
    u.groups.add(team)
    return u


@pytest.fixture
def stranger(db):
    return User.objects.create_user("mallory", "mallory@example.org", "mallory-pass-123")


@pytest.fixture
def staff(db):
    return User.objects.create_user("root-admin", "admin@example.org", "admin-pass-123", is_staff=True, is_superuser=True)


@pytest.fixture
def profile(db):
    return ClusterProfile.objects.create(
        name="Local", slug="local", host="127.0.0.1", port=2222, username="ffportal",
        private_key="not-a-real-key", known_hosts="[127.0.0.1]:2222 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeFakeFake",
        work_root="/srv/ffportal/work", target_roots=["/srv/ffportal/storage"], worker_python="/usr/bin/python3",
    )


@pytest.fixture
def template(profile):
    return Template.objects.create(name="Quick GPU", slug="quick-gpu", description="One GPU, ten images per task.",
                                   cluster=profile, partition="gpu", gpu_type="h200", gpu_count=1, mem="2G",
                                   time_limit="00:10:00", chunk_size=2, engine="classic")


@pytest.fixture
def jpeg_bytes():
    import io

    import numpy as np
    from PIL import Image
    from skimage import data

    buf = io.BytesIO()
    Image.fromarray(np.asarray(data.astronaut())).save(buf, format="JPEG", quality=85)
    return buf.getvalue()


class InlineQueue:
    """Stands in for the RQ queue (`jobs.background.enqueue.queue`): runs what is enqueued at once, in this
    process and database, importing the function by its dotted path as the RQ worker would."""

    def __init__(self):
        self.enqueued: list[tuple[str, tuple]] = []

    def enqueue(self, func, *args, **options):
        from django.utils.module_loading import import_string

        self.enqueued.append((func, args))
        return (import_string(func) if isinstance(func, str) else func)(*args)

    def enqueue_many(self, datas):
        """RQ's `enqueue_many` of `Queue.prepare_data`s: each run at once, in order."""
        return [self.enqueue(d.func, *d.args) for d in datas]


@pytest.fixture
def inline_rq(monkeypatch):
    queue = InlineQueue()
    monkeypatch.setattr("jobs.background.enqueue.queue", lambda: queue)
    return queue


@pytest.fixture(autouse=True)
def _no_pace_from_another_test():
    """The measured pace per template is kept for a minute in the process (jobs.job.expected); template
    ids repeat from test to test, so each test starts without one."""
    from jobs.job import expected

    expected._pace.clear()
