"""User-chosen paths stay inside the profile's allowed roots, symlinks included: the folder and,
in one command, every entry of it."""
import os

import pytest

from cluster import (
    ClusterError,
    PathNotAllowed,
    RemoteFileError,
    check_in_roots,
    list_folder_argv,
    list_folder_in_roots,
    map_path,
    resolve_remote_in_roots,
)
from cluster.paths import answer_folder_listing, parse_folder_listing
from tests.fake_ssh import FakeSSH, run_here

ROOTS = ["/srv/storage", "/data/shared/"]


@pytest.mark.parametrize("path, normal", [
    ("/srv/storage", "/srv/storage"),
    ("/srv/storage/", "/srv/storage"),
    ("/srv/storage/a//b/./c", "/srv/storage/a/b/c"),
    ("//srv/storage/x", "/srv/storage/x"),
    ("/data/shared/名字 😀/$(touch x);.jpg", "/data/shared/名字 😀/$(touch x);.jpg"),
])
def test_it_accepts_and_normalizes_paths_inside_a_root(path, normal):
    assert check_in_roots(path, ROOTS) == normal


@pytest.mark.parametrize("path", [
    "/srv/storage/../etc/passwd",  # '..' escaping
    "/srv/storage/a/../b",  # '..' at all: lexical and real meaning differ through symlinks
    "/srv/storagex/a",  # a prefix that is not a folder boundary
    "/etc/passwd",  # absolute outside
    "srv/storage/a",  # relative
    "",
    "/srv/storage/a\0b",
    "/srv/storage/a\nb",
])
def test_it_refuses_paths_outside_or_malformed(path):
    with pytest.raises(PathNotAllowed):
        check_in_roots(path, ROOTS)


def test_it_allows_everything_under_a_root_of_slash():
    assert check_in_roots("/anything/at/all", ["/"]) == "/anything/at/all"


def test_it_refuses_a_symlink_that_leads_out_of_the_roots():
    runner = FakeSSH(links={"/srv/storage/evil": "/etc"})  # symlinks on an imaginary cluster
    with pytest.raises(PathNotAllowed, match="symbolic link"):
        resolve_remote_in_roots(runner, "/srv/storage/evil/passwd", ROOTS)


def test_it_returns_the_resolved_path_of_a_link_that_stays_inside():
    runner = FakeSSH(links={"/srv/storage/latest": "/srv/storage/2024/june"})
    assert resolve_remote_in_roots(runner, "/srv/storage/latest/a.jpg", ROOTS) == \
        "/srv/storage/2024/june/a.jpg"


def test_it_admits_paths_under_a_root_that_is_itself_a_link():
    runner = FakeSSH(links={"/srv/storage": "/mnt/nfs/storage"}, missing={"/data/shared"})
    assert resolve_remote_in_roots(runner, "/srv/storage/x", ROOTS) == "/mnt/nfs/storage/x"


def test_it_checks_lexically_before_asking_the_cluster():
    runner = FakeSSH(links={})
    runner.realpath = None  # would raise TypeError if it were called
    with pytest.raises(PathNotAllowed):
        resolve_remote_in_roots(runner, "/etc/passwd", ROOTS)


MAPPING = [("/portal/media", "/cluster/media"), ("/portal/media/big", "/fast/big"), ("/", "/other")]


@pytest.mark.parametrize("path, mapped", [
    ("/portal/media/u1/a.jpg", "/cluster/media/u1/a.jpg"),
    ("/portal/media/big/v.mp4", "/fast/big/v.mp4"),  # the longest prefix wins
    ("/portal/media", "/cluster/media"),
    ("/portal/mediax/a", "/other/portal/mediax/a"),  # not under /portal/media: falls to "/"
])
def test_it_maps_paths_by_the_longest_prefix(path, mapped):
    assert map_path(path, MAPPING) == mapped


def test_it_refuses_to_map_a_path_no_prefix_covers():
    with pytest.raises(PathNotAllowed):
        map_path("/elsewhere/a", [("/portal/media", "/cluster/media")])
    assert map_path("/cluster/media/a", [(b, a) for a, b in MAPPING[:2]]) == "/portal/media/a"


# --- a folder listed with every entry resolved (one command) --------------------------------------

def here() -> FakeSSH:
    """Runs the command on this machine instead of over SSH (the same POSIX sh, find and realpath
    a cluster has); its `commands` count the round trips a real runner would make."""
    return FakeSSH(on_run=run_here)


@pytest.fixture
def storage(tmp_path):
    """/storage/shoot holds photos, links in and out, a folder, a pipe; /work holds another job's face."""
    root, shoot = tmp_path / "storage", tmp_path / "storage" / "shoot"
    (shoot / "day 2").mkdir(parents=True)
    (tmp_path / "work" / "jobs" / "other" / "sources").mkdir(parents=True)
    their_face = tmp_path / "work" / "jobs" / "other" / "sources" / "0-face.jpg"
    their_face.write_bytes(b"someone else's face")
    (shoot / "a.jpg").write_bytes(b"12345")
    (shoot / "out.jpg").symlink_to(their_face)
    (shoot / "passwd.jpg").symlink_to("/etc/passwd")
    (shoot / "same.jpg").symlink_to("a.jpg")
    (shoot / "etc").symlink_to("/etc")
    (shoot / "latest").symlink_to(shoot / "day 2")
    (shoot / "broken.jpg").symlink_to(tmp_path / "nowhere.jpg")
    (shoot / "loop.jpg").symlink_to("loop.jpg")
    (shoot / 'it\'s $(touch PWNED) "q"\n.jpg').write_bytes(b"x")
    os.mkfifo(shoot / "pipe.jpg")
    return root


def test_it_lists_a_folder_with_every_entry_resolved_in_one_command(storage):
    runner = here()
    shoot = str(storage / "shoot")
    listing = list_folder_in_roots(runner, shoot, [str(storage)])
    assert len(runner.commands) == 1
    assert listing.path == shoot
    got = {e.name: (e.type, e.path, e.link, e.refused) for e in listing.entries}
    assert got == {
        "a.jpg": ("file", f"{shoot}/a.jpg", False, None),
        "same.jpg": ("file", f"{shoot}/a.jpg", True, None),  # where it really is
        "out.jpg": ("file", f"{shoot}/out.jpg", True, "link_outside"),  # the link's own path, not the target
        "passwd.jpg": ("file", f"{shoot}/passwd.jpg", True, "link_outside"),
        "etc": ("dir", f"{shoot}/etc", True, "link_outside"),
        "latest": ("dir", f"{shoot}/day 2", True, None),
        "day 2": ("dir", f"{shoot}/day 2", False, None),
        "broken.jpg": ("other", f"{shoot}/broken.jpg", True, "link_outside"),
        'it\'s $(touch PWNED) "q"\n.jpg': ("file", f'{shoot}/it\'s $(touch PWNED) "q"\n.jpg', False, None),
        "pipe.jpg": ("other", f"{shoot}/pipe.jpg", False, None),
    }  # the looping link is left out: it leads nowhere
    assert [e.name for e in listing.entries] == sorted(got)
    assert next(e for e in listing.entries if e.name == "a.jpg").size == 5
    assert not list(storage.rglob("PWNED")) and not os.path.exists("PWNED")


def test_a_broken_link_inside_the_roots_is_no_file_and_not_refused(storage):
    (storage / "shoot" / "later.jpg").symlink_to(storage / "shoot" / "not-yet.jpg")
    listing = list_folder_in_roots(here(), str(storage / "shoot"), [str(storage)])
    later = next(e for e in listing.entries if e.name == "later.jpg")
    assert (later.type, later.refused) == ("other", None)


def test_a_thousand_files_and_links_cost_one_command_and_little_time(storage):
    import time

    big = storage / "big"
    big.mkdir()
    for i in range(1000):
        (big / f"img{i:04d}.jpg").write_bytes(b"x")
    for i in range(300):
        (big / f"in{i:03d}.jpg").symlink_to(f"img{i:04d}.jpg")
        (big / f"out{i:03d}.jpg").symlink_to("/etc/hostname")
    runner = here()
    t0 = time.perf_counter()
    listing = list_folder_in_roots(runner, str(big), [str(storage)])
    assert time.perf_counter() - t0 < 5 and len(runner.commands) == 1
    assert len(listing.entries) == 1600
    assert sum(e.refused == "link_outside" for e in listing.entries) == 300
    assert all(e.path == f"{big}/img0{e.name[2:5]}.jpg" for e in listing.entries if e.name.startswith("in"))


def test_it_refuses_a_folder_that_leads_out_of_the_roots(storage):
    runner = here()
    with pytest.raises(PathNotAllowed, match="symbolic link"):
        list_folder_in_roots(runner, str(storage / "shoot" / "etc"), [str(storage)])
    with pytest.raises(PathNotAllowed):
        list_folder_in_roots(runner, "/etc", [str(storage)])
    assert len(runner.commands) == 1  # the lexical check answered the second one


def test_it_admits_a_root_that_is_itself_a_link(storage, tmp_path):
    (tmp_path / "mnt").symlink_to(storage)
    listing = list_folder_in_roots(here(), str(tmp_path / "mnt" / "shoot"), [str(tmp_path / "mnt")])
    assert listing.path == str(storage / "shoot")
    assert {e.name for e in listing.entries if e.refused} == {"out.jpg", "passwd.jpg", "etc", "broken.jpg"}


@pytest.mark.parametrize("name, errno, words", [("missing", 2, "no such file or folder"),
                                                ("shoot/a.jpg", 20, "not a folder")])
def test_it_says_why_a_folder_cannot_be_listed(storage, name, errno, words):
    with pytest.raises(RemoteFileError, match=words) as caught:
        list_folder_in_roots(here(), str(storage / name), [str(storage)])
    assert caught.value.errno == errno


def test_it_passes_paths_as_arguments_never_inside_the_script():
    argv = list_folder_argv("/srv/storage/a'b $(x)", ["/srv/storage"])
    assert argv[:2] == ["sh", "-c"] and argv[-2:] == ["/srv/storage/a'b $(x)", "/srv/storage"]
    assert "a'b" not in argv[2] and "a'b" not in argv[4]


def test_it_reads_an_answer_and_refuses_one_that_is_cut_off():
    answer = "/r\0\0/r/f\0p\0f\x003\0001.5\0a.jpg\0l\0f\x004\0002\0b.jpg\0r\x002\0./b.jpg\0./c.jpg\0/x\0\0"
    roots, folder, entries, resolved = parse_folder_listing(answer, 1)
    assert (roots, folder, resolved) == (["/r"], "/r/f", {})  # realpath answered one of two: none trusted
    assert [(e.kind, e.type, e.size, e.mtime, e.name) for e in entries] == [("p", "f", 3, 1, "a.jpg"),
                                                                           ("l", "f", 4, 2, "b.jpg")]
    with pytest.raises(ClusterError, match="cut off"):
        parse_folder_listing(answer[:-2], 1)
    for short in (answer[:-1], "/r\0\0/r/f\0p\0f\0", "/r\0/r/f\0"):
        with pytest.raises(ClusterError, match="could not be read"):
            parse_folder_listing(short, 1)


def test_it_gives_fake_runners_an_answer_it_reads_back():
    from cluster import RemoteEntry

    entries = [RemoteEntry("b.jpg", "/r/f/b.jpg", "file", 3, 0), RemoteEntry("sub", "/r/f/sub", "dir", 0, 0)]
    answering = FakeSSH(on_run=lambda argv: answer_folder_listing(argv, entries))
    listing = list_folder_in_roots(answering, "/r/f", ["/r"])
    assert listing.path == "/r/f"
    assert [(e.name, e.path, e.type, e.size, e.refused) for e in listing.entries] == [
        ("b.jpg", "/r/f/b.jpg", "file", 3, None), ("sub", "/r/f/sub", "dir", 0, None)]
