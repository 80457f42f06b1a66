"""cluster.images: the container image check's commands and what their output means. The stat
lines are what GNU stat printed on the 26.05 cluster's login node (Debian unstable, coreutils 9)."""
import pytest

from cluster import images


def test_it_checks_the_image_in_one_round_trip_without_a_shell():
    argvs = images.image_check_argvs("/srv/images/face fusion;rm -rf ~.sif")
    assert argvs == [["stat", "-L", "--format=%F|%s|%.9Y", "--", "/srv/images/face fusion;rm -rf ~.sif"],
                     ["test", "-r", "/srv/images/face fusion;rm -rf ~.sif"]]
    assert images.digest_argv("-x.sif") == ["sha256sum", "--", "-x.sif"]


@pytest.mark.parametrize("stat_rc, out, readable_rc, verdict", [
    (0, "regular file|494157824|1764662372.861235270\n", 0, "ok"),
    (1, "", 1, "missing"),  # stat: cannot statx '/srv/ffportal/images/gone.sif': No such file or directory
    (0, "regular file|73|1764662400.000000000\n", 1, "unreadable"),
    (0, "directory|4096|1764662372.861235270\n", 0, "not_file"),
    (0, "regular empty file|0|1764662372.861235270\n", 0, "not_file"),
])
def test_it_tells_what_is_wrong_with_an_image(stat_rc, out, readable_rc, verdict):
    check = images.parse_image_check(stat_rc, out, readable_rc)
    assert check.verdict == verdict and check.ok == (verdict == "ok")


def test_the_size_and_modification_time_tell_a_replaced_image_from_the_same_one():
    same = images.parse_image_check(0, "regular file|494157824|1764662372.861235270\n", 0)
    again = images.parse_image_check(0, "regular file|494157824|1764662372.861235270", 0)
    rebuilt = images.parse_image_check(0, "regular file|494157824|1764662399.000000001\n", 0)
    assert (same.size, same.mtime) == (again.size, again.mtime) == (494157824, "1764662372.861235270")
    assert (rebuilt.size, rebuilt.mtime) != (same.size, same.mtime)


def test_it_reads_the_digest_from_sha256sums_line_only():
    digest = "9b1d" + "0" * 60
    assert images.parse_digest(f"{digest}  /srv/ffportal/images/worker.sif\n") == digest
    assert images.parse_digest("sha256sum: /x: Permission denied\n") == ""
    assert images.parse_digest("") == ""
