"""What every test suite shares."""
import pytest

from tests.fake_ssh import Seam


@pytest.fixture
def fake_ssh(monkeypatch) -> Seam:
    """The one stand-in for the cluster's SSH seam, `cluster.runner_for` (tests/fake_ssh.py):
    `fake_ssh(on_run=..., ...)` installs a FakeSSH and returns it; `fake_ssh.unreachable(message)`
    makes the seam refuse."""
    return Seam(monkeypatch)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's test database, plus one step before it is dropped at the end: on PostgreSQL,
    the connections that threads of this process left open (Channels runs database work in a pool
    of threads, whose connections pytest-django never closes) would keep the database from being
    dropped ("being accessed by other users"), and it would linger until the next run."""
    yield
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                       "WHERE datname = current_database() AND pid <> pg_backend_pid()")
