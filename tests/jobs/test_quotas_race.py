"""THE RACE: two Starts at once, with room for only one, on real database connections.

Two threads call start_job, each on its own connection to the (file-based) test database. Each
waits on a barrier right after it has counted the usage, so that WITHOUT serialisation both count
"nothing used yet" before either creates its job, and both would win. With it (check_quota runs
in the transaction that creates the job, after locking the user's and groups' rows; on SQLite
the IMMEDIATE transaction holds the write lock from BEGIN), the second Start waits for the first
to commit, the first's barrier times out, and the second then counts the first's job: exactly one
job, and one QuotaExceeded.

Checked to fail: with check_quota moved out of the transaction (SQLite), or with
lock_quota_subjects() emptied (PostgreSQL), both Starts win and this test fails. On PostgreSQL:
DATABASE_URL=postgres://USER@HOST:PORT/DB pytest tests/jobs/test_quotas_race.py --nomigrations
"""
import threading

import pytest
from django.db import connection

from jobs.errors import QuotaExceeded
from jobs.job.start import start_job
from jobs.models import Job, Quota, Template
from jobs.quotas import limits as quotas  # where the counters are called from

from .api_helpers import image

FOLDER = "/srv/ffportal/storage/shoot"
#: how long the first Start waits for a second one that (rightly) cannot get in
RACE_WINDOW_S = 1.5


@pytest.fixture
def hungry(profile):
    """A folder job is estimated at one task: 10 images x 300 s + 30 s on 1 GPU = 0.84 GPU-hours."""
    return Template.objects.create(name="Hungry", slug="hungry", cluster=profile, partition="gpu", gpu_count=1,
                                   time_limit="01:00:00", chunk_size=10, seconds_per_image=300)


def race(monkeypatch, counter: str, users, template, jpeg_bytes) -> list:
    """Start a job for each of `users` at the same moment; returns what each got (a Job or the error)."""
    original = getattr(quotas, counter)
    counted = threading.Barrier(len(users))

    def count_then_wait(*args, **kwargs):
        result = original(*args, **kwargs)
        try:
            counted.wait(timeout=RACE_WINDOW_S)  # both have counted: now both go on
        except threading.BrokenBarrierError:
            pass  # the other Start is (rightly) waiting for our lock
        return result

    monkeypatch.setattr(quotas, counter, count_then_wait)
    go = threading.Barrier(len(users))
    results: list = [None] * len(users)

    def one_start(i, user):
        try:
            go.wait(timeout=10)
            results[i] = start_job(user=user, template=template, sources=[image("face.jpg", jpeg_bytes)],
                                   consent=True, target_folder=FOLDER)
        except Exception as exc:  # noqa: BLE001 - the test looks at what each got
            results[i] = exc
        finally:
            connection.close()  # this thread's own connection

    threads = [threading.Thread(target=one_start, args=(i, u)) for i, u in enumerate(users)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    return results


def assert_exactly_one_won(results):
    jobs = [r for r in results if isinstance(r, Job)]
    refused = [r for r in results if isinstance(r, QuotaExceeded)]
    assert len(jobs) == 1 and len(refused) == 1, results
    assert list(Job.objects.values_list("pk", flat=True)) == [jobs[0].pk]
    return refused[0]


@pytest.mark.django_db(transaction=True)
def test_it_lets_one_of_two_simultaneous_starts_through_the_gpu_hours(monkeypatch, owner, hungry, jpeg_bytes):
    Quota.objects.create(user=owner, gpu_hours_per_month=1)  # room for one 0.84 GPU-hour job
    refused = assert_exactly_one_won(race(monkeypatch, "gpu_hours_used", [owner, owner], hungry, jpeg_bytes))
    assert "You have used 0.8 of your 1 GPU-hours this month (your own quota), 0.2 left" in refused.message


@pytest.mark.django_db(transaction=True)
def test_it_lets_one_of_two_members_through_the_groups_jobs_at_once(monkeypatch, owner, colleague, team, hungry,
                                                                    jpeg_bytes):
    # Two different users, one shared group limit: serialised by the group's row.
    Quota.objects.create(group=team, max_concurrent_jobs=1)
    refused = assert_exactly_one_won(race(monkeypatch, "active_jobs_count", [owner, colleague], hungry, jpeg_bytes))
    assert "Your group already has 1 job waiting or running" in refused.message
