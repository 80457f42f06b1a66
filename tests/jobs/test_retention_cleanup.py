"""The cluster-side delete of a job folder (cluster.cleanup): the argument list is checked here, and
the script is run with a real shell on this machine (the same `sh -c` the cluster gets over SSH),
so its own check (realpath of the parent inside the resolved work root) is tested for real."""
from __future__ import annotations

import pytest

from cluster import ClusterError, PathNotAllowed
from cluster.cleanup import delete_job_folder, job_folder_delete_argv
from tests.fake_ssh import FakeSSH, run_here


def here() -> FakeSSH:
    """The cluster's side played by this machine: the `sh -c` runs here."""
    return FakeSSH(on_run=run_here)


@pytest.fixture
def root(tmp_path):
    work = tmp_path / "work"
    (work / "jobs" / "a1").mkdir(parents=True)
    (work / "jobs" / "a1" / "out.jpg").write_bytes(b"x")
    return work


def test_the_command_is_an_argument_list_with_the_paths_as_arguments():
    argv = job_folder_delete_argv("/srv/work/jobs/a1", "/srv/work/")
    assert argv[:2] == ["sh", "-c"] and argv[3:] == ["sh", "/srv/work", "/srv/work/jobs/a1"]
    assert "/srv/work" not in argv[2]  # never spliced into the script


@pytest.mark.parametrize("folder, root", [
    ("/etc", "/srv/work"), ("/srv/work", "/srv/work"), ("/srv/work/jobs/../../etc", "/srv/work"),
    ("/srv/workshop/jobs/a1", "/srv/work"), ("jobs/a1", "/srv/work"), ("/srv/work/jobs/a1\nrm", "/srv/work"),
    ("/tmp/x", "/"),
])
def test_anything_not_strictly_inside_the_work_root_is_refused_here(folder, root):
    with pytest.raises(PathNotAllowed):
        job_folder_delete_argv(folder, root)


def test_it_deletes_the_job_folder_and_nothing_else(root):
    (root / "jobs" / "b2").mkdir()
    result = delete_job_folder(here(), str(root / "jobs" / "a1"), str(root))
    assert result.existed and not (root / "jobs" / "a1").exists() and (root / "jobs" / "b2").is_dir()
    again = delete_job_folder(here(), str(root / "jobs" / "a1"), str(root))
    assert not again.existed  # already gone: nothing to do, not an error


def test_the_cluster_side_refuses_a_parent_that_leads_outside_the_root(root, tmp_path):
    outside = tmp_path / "precious"
    (outside / "a1").mkdir(parents=True)
    (outside / "a1" / "keep.txt").write_text("keep")
    (root / "jobs" / "linked").symlink_to(outside)  # lexically inside the root, really outside
    with pytest.raises(PathNotAllowed, match="outside the work root"):
        delete_job_folder(here(), str(root / "jobs" / "linked" / "a1"), str(root))
    assert (outside / "a1" / "keep.txt").read_text() == "keep"


def test_a_job_folder_that_is_a_link_loses_the_link_not_its_target(root, tmp_path):
    other = root / "jobs" / "b2"
    other.mkdir()
    (other / "keep.jpg").write_bytes(b"y")
    (root / "jobs" / "c3").symlink_to(other)
    assert delete_job_folder(here(), str(root / "jobs" / "c3"), str(root)).existed
    assert not (root / "jobs" / "c3").is_symlink() and (other / "keep.jpg").exists()


def test_a_missing_work_root_is_an_error_not_a_success(tmp_path):
    with pytest.raises(ClusterError, match="work root does not exist"):
        delete_job_folder(here(), str(tmp_path / "nowhere" / "jobs" / "a1"), str(tmp_path / "nowhere"))
