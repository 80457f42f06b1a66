"""Fixtures of the tests that use the REAL local cluster (tests/cluster/real_cluster.py)."""
import pytest

from cluster import close_all_runners, get_runner

from .real_cluster import connect_or_fail


@pytest.fixture(scope="module")
def cfg():
    yield connect_or_fail()
    close_all_runners()


@pytest.fixture(scope="module")
def runner(cfg):
    return get_runner(cfg)
