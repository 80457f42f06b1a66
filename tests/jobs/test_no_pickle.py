"""Nothing the portal reads from Redis is unpickled: a value or a job planted there by someone who
can reach Redis is refused, never run. Against the REAL Redis of the tests (REDIS_URL)."""
import json
import os
import pickle
import zlib

import pytest
import redis
from django.conf import settings
from django.core.cache import cache
from rq import Queue, SimpleWorker
from rq.exceptions import DeserializationError

from jobs.background import enqueue


class Plant:
    """Unpickling this creates the marker file: proof that a planted value ran."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture
def marker(tmp_path):
    path = tmp_path / "PWNED"
    yield path
    assert not path.exists(), "a value planted in Redis was unpickled: code ran"


@pytest.fixture
def raw():
    return redis.Redis.from_url(settings.REDIS_URL)


def test_the_cache_stores_json_and_refuses_a_planted_pickle(marker, raw, db):
    cache.set("probe", {"a": [1, 2]})
    key = cache.make_key("probe")
    assert raw.get(key) == b'{"a":[1,2]}'  # plain JSON on the wire
    assert cache.get("probe") == {"a": [1, 2]}
    cache.set("count", 3)
    assert cache.incr("count") == 4  # integers stay Redis integers
    raw.set(key, pickle.dumps(Plant(marker)))
    with pytest.raises(ValueError):
        cache.get("probe")


def test_a_failed_login_over_a_planted_pickle_runs_nothing(client, owner, marker, raw):
    # Every key the cache holds for this test gets a planted pickle, then a login fails.
    client.post("/login/", {"username": owner.username, "password": "wrong"})
    prefix = settings.CACHES["default"]["KEY_PREFIX"]
    for key in raw.scan_iter(f"{prefix}:*"):
        raw.set(key, pickle.dumps(Plant(marker)))
    r = client.post("/login/", {"username": owner.username, "password": "wrong again"})
    assert r.status_code in (200, 403, 429)


def test_rq_jobs_are_json_and_a_planted_pickle_job_never_runs(marker, raw):
    assert enqueue.queue().serializer is not None and "JSON" in str(settings.RQ_QUEUES["default"]["SERIALIZER"])
    queue = Queue(f"test-no-pickle-{os.getpid()}", connection=raw, serializer=settings.RQ_SERIALIZER)
    try:
        job = queue.enqueue("os.path.join", "a", "b")
        stored = zlib.decompress(raw.hget(job.key, "data"))  # RQ compresses the job's data
        assert json.loads(stored)[0] == "os.path.join"  # JSON, readable text
        # A job written by someone else, as a pickle: the worker refuses its data, nothing runs.
        planted = queue.enqueue("os.path.join", "x", "y")
        raw.hset(planted.key, "data", zlib.compress(pickle.dumps(Plant(marker))))
        with pytest.raises(DeserializationError):
            planted.refresh()
            planted.args  # noqa: B018 - reading the data is what would unpickle it
        SimpleWorker([queue], connection=raw, serializer=queue.serializer).work(burst=True)
    finally:
        queue.delete(delete_jobs=True)
