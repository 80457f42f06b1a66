"""Opening a target on the node (`worker.targetfile`): where it really lies is checked at the last
moment, and what is read afterwards is the file that was checked."""
import os

import pytest

from worker.errors import TargetError
from worker.targetfile import (
    BEHIND_A_LINK,
    LINK_OUTSIDE,
    LINK_UNCHECKED,
    NOT_A_FILE,
    OUTSIDE,
    TargetRefused,
    allowed_folders,
    open_target,
)


@pytest.fixture
def storage(tmp_path):
    root = tmp_path / "storage"
    (root / "shoot").mkdir(parents=True)
    (root / "shoot" / "a.jpg").write_bytes(b"mine")
    (tmp_path / "private.jpg").write_bytes(b"not yours")
    return root


def test_it_opens_a_file_inside_the_roots_and_reads_it_through_the_open_file(storage):
    path = storage / "shoot" / "a.jpg"
    with open_target(path, allowed_folders([str(storage)])) as opened:
        assert opened.name == "a.jpg"
        path.unlink()
        path.symlink_to(storage.parent / "private.jpg")  # swapped after the check
        assert opened.path.read_bytes() == b"mine"


@pytest.mark.parametrize("roots, message", [(True, LINK_OUTSIDE), (False, LINK_UNCHECKED)])
def test_it_refuses_a_link_out_of_the_roots(storage, roots, message):
    link = storage / "shoot" / "b.jpg"
    link.symlink_to(storage.parent / "private.jpg")
    with pytest.raises(TargetRefused) as refused:
        with open_target(link, allowed_folders([str(storage)]) if roots else None):
            pytest.fail("opened")
    assert str(refused.value) == message and message.startswith("skipped: ")


def test_it_follows_a_link_that_stays_inside_when_it_knows_the_roots(storage):
    link = storage / "shoot" / "same.jpg"
    link.symlink_to(storage / "shoot" / "a.jpg")
    with open_target(link, allowed_folders([str(storage)])) as opened:
        assert opened.path.read_bytes() == b"mine" and opened.name == "same.jpg"


def test_it_refuses_a_file_reached_through_a_folder_link_out_of_the_roots(storage, tmp_path):
    (storage / "day2").symlink_to(tmp_path)
    with pytest.raises(TargetRefused, match=OUTSIDE.replace("(", r"\(").replace(")", r"\)")):
        with open_target(storage / "day2" / "private.jpg", allowed_folders([str(storage)])):
            pass


def test_without_roots_a_path_must_lead_where_it_says(storage, tmp_path):
    """The portal hands over resolved paths: a folder on the way that is (now) a link is refused
    even when the manifest names no roots; the job's own uploads are admitted however reached."""
    (storage / "day2").symlink_to(tmp_path)
    with pytest.raises(TargetRefused) as refused:
        with open_target(storage / "day2" / "private.jpg", allowed_folders(None)):
            pass
    assert str(refused.value) == BEHIND_A_LINK
    work = tmp_path / "work"
    (work / "jobs" / "j" / "targets").mkdir(parents=True)
    (work / "jobs" / "j" / "targets" / "up.jpg").write_bytes(b"uploaded")
    (tmp_path / "work-link").symlink_to(work)
    allowed = allowed_folders(None, job_folder=str(work / "jobs" / "j"))
    with open_target(tmp_path / "work-link" / "jobs" / "j" / "targets" / "up.jpg", allowed) as opened:
        assert opened.path.read_bytes() == b"uploaded"


def test_it_admits_a_root_that_is_itself_a_link_and_the_jobs_own_uploads(storage, tmp_path):
    (tmp_path / "mnt").symlink_to(storage)
    allowed = allowed_folders([str(tmp_path / "mnt")], job_folder=str(tmp_path / "job"))
    with open_target(storage / "shoot" / "a.jpg", allowed) as opened:
        assert opened.path.read_bytes() == b"mine"
    (tmp_path / "job" / "targets").mkdir(parents=True)
    (tmp_path / "job" / "targets" / "up.jpg").write_bytes(b"uploaded")
    with open_target(tmp_path / "job" / "targets" / "up.jpg", allowed) as opened:
        assert opened.path.read_bytes() == b"uploaded"


def test_it_refuses_what_is_not_an_ordinary_file(storage):
    os.mkfifo(storage / "shoot" / "pipe.jpg")
    (storage / "shoot" / "null.jpg").symlink_to("/dev/null")
    for name in ("pipe.jpg", "null.jpg"):
        with pytest.raises(TargetRefused, match="^skipped: it is not an ordinary file"):
            with open_target(storage / "shoot" / name, allowed_folders(["/"])):
                pass
    assert NOT_A_FILE.startswith("skipped: ")


def test_it_says_when_a_target_is_missing(storage):
    with pytest.raises(TargetError, match="^file not found: gone.jpg$"):
        with open_target(storage / "gone.jpg", None):
            pass


def test_it_closes_the_file_on_the_way_out(storage):
    with open_target(storage / "shoot" / "a.jpg", None) as opened:
        os.fstat(opened.fd)
    with pytest.raises(OSError):
        os.fstat(opened.fd)
