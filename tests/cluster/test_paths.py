"""User-chosen paths stay inside the profile's allowed roots, symlinks included."""
import pytest

from cluster import PathNotAllowed, RemoteFileError, check_in_roots, map_path, resolve_remote_in_roots

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


class FakeRunner:
    """Stands in for SSHRunner.realpath: a map of symlinks on an imaginary cluster."""

    def __init__(self, links: dict[str, str], missing=()):
        self.links, self.missing = links, set(missing)

    def realpath(self, path):
        if path in self.missing:
            raise RemoteFileError(f"no such file: {path}", path, 2)
        for link, target in sorted(self.links.items(), key=lambda kv: -len(kv[0])):
            if path == link or path.startswith(link + "/"):
                return target + path[len(link):]
        return path


def test_it_refuses_a_symlink_that_leads_out_of_the_roots():
    runner = FakeRunner({"/srv/storage/evil": "/etc"})
    with pytest.raises(PathNotAllowed, match="symbolic link"):
        resolve_remote_in_roots(runner, "/srv/storage/evil/passwd", ROOTS)


def test_it_returns_the_resolved_path_of_a_link_that_stays_inside():
    runner = FakeRunner({"/srv/storage/latest": "/srv/storage/2024/june"})
    assert resolve_remote_in_roots(runner, "/srv/storage/latest/a.jpg", ROOTS) == \
        "/srv/storage/2024/june/a.jpg"


def test_it_admits_paths_under_a_root_that_is_itself_a_link():
    runner = FakeRunner({"/srv/storage": "/mnt/nfs/storage"}, missing={"/data/shared"})
    assert resolve_remote_in_roots(runner, "/srv/storage/x", ROOTS) == "/mnt/nfs/storage/x"


def test_it_checks_lexically_before_asking_the_cluster():
    runner = FakeRunner({})
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
