"""A waiting job leaves its reservation before a cancelled booking's reservation is deleted."""
import pytest

from cluster import job_leave_reservation_argv


def test_it_clears_the_reservation_of_one_job():
    assert job_leave_reservation_argv("4711") == ["scontrol", "update", "jobid=4711", "reservation="]


@pytest.mark.parametrize("bad", ["", "12 34", "12;rm -rf /", "reservation=x", "-1", "12_3", None])
def test_it_refuses_anything_but_a_job_number(bad):
    with pytest.raises(ValueError):
        job_leave_reservation_argv(bad)
