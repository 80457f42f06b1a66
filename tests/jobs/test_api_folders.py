"""GET /api/v1/folders: the folder browser over the cluster's allowed roots (cluster seam patched)."""
import pytest

from jobs.errors import BrowseError
from jobs.models import ClusterProfile
from tests.fake_ssh import run_here

from .api_helpers import token_client

LISTING = {"path": "/srv/ffportal/storage/shoot", "entries": [
    {"name": "day1", "path": "/srv/ffportal/storage/shoot/day1", "type": "dir", "size": None},
    {"name": "a.jpg", "path": "/srv/ffportal/storage/shoot/a.jpg", "type": "file", "size": 1234},
]}


@pytest.fixture
def api(owner):
    return token_client(owner)[0]


@pytest.fixture
def fake_browse(monkeypatch):
    calls = []

    def browse(user, path="", profile=None):
        calls.append((user.username, path, profile.slug if profile else None))
        if isinstance(fake_browse_answer[0], Exception):
            raise fake_browse_answer[0]
        return fake_browse_answer[0]

    fake_browse_answer = [LISTING]
    monkeypatch.setattr("jobs.api.views.browse", browse)
    return calls, fake_browse_answer


def test_it_lists_the_allowed_roots_without_a_path(api, template):
    # No path: the roots come from the cluster profile; the cluster itself is not reached.
    r = api.get("/api/v1/folders")
    assert r.status_code == 200
    assert r.json() == {"path": "", "entries": [
        {"name": "/srv/ffportal/storage", "path": "/srv/ffportal/storage", "type": "dir", "size": None}]}


def test_it_lists_a_folder(api, template, fake_browse):
    calls, _ = fake_browse
    r = api.get("/api/v1/folders", {"path": "/srv/ffportal/storage/shoot"})
    assert r.status_code == 200 and r.json() == LISTING
    assert calls == [("alice", "/srv/ffportal/storage/shoot", None)]


def test_it_passes_the_chosen_cluster(api, template, profile, fake_browse):
    calls, _ = fake_browse
    assert api.get("/api/v1/folders", {"path": "/x", "cluster": "local"}).status_code == 200
    assert calls == [("alice", "/x", "local")]


def test_it_refuses_an_unknown_cluster(api, template, fake_browse):
    r = api.get("/api/v1/folders", {"cluster": "nowhere"})
    assert r.status_code == 404 and r.json()["field"] == "cluster"
    assert fake_browse[0] == []


@pytest.mark.parametrize("status, field", [(403, "path"), (400, "path"), (404, None), (503, None)])
def test_it_maps_browse_errors(api, template, fake_browse, status, field):
    fake_browse[1][0] = BrowseError("why it failed", status)
    r = api.get("/api/v1/folders", {"path": "/etc"})
    assert r.status_code == status
    assert r.json() == ({"error": "why it failed", "field": field} if field else {"error": "why it failed"})


def test_it_refuses_a_cluster_of_no_usable_template(stranger, template):
    # The real browse decides: a stranger may use quick-gpu (open to all), but not a cluster no template offers.
    ClusterProfile.objects.create(name="Other", slug="other", host="h", username="u", private_key="k",
                                  known_hosts="k", work_root="/w", target_roots=["/secret"])
    r = token_client(stranger)[0].get("/api/v1/folders", {"cluster": "other"})
    assert r.status_code == 404


@pytest.fixture
def storage(template, tmp_path, fake_ssh):
    """An allowed root holding a photo, links out of it (a system file, another job's face, a
    folder) and links that stay inside; the real `browse` lists it, the listing command run on
    this machine (the cluster's storage is a folder here)."""
    root, shoot = tmp_path / "storage", tmp_path / "storage" / "shoot"
    (shoot / "day2").mkdir(parents=True)
    face = tmp_path / "work" / "jobs" / "other" / "sources" / "0-face.jpg"
    face.parent.mkdir(parents=True)
    face.write_bytes(b"their face")
    (shoot / "a.jpg").write_bytes(b"12345")
    (shoot / "their-face.jpg").symlink_to(face)
    (shoot / "passwd.jpg").symlink_to("/etc/passwd")
    (shoot / "etc").symlink_to("/etc")
    (shoot / "same.jpg").symlink_to("a.jpg")
    (shoot / "latest").symlink_to(shoot / "day2")
    profile = template.cluster
    profile.target_roots = [str(root)]
    profile.save()
    return shoot, fake_ssh(on_run=run_here)


def test_it_never_offers_a_link_that_leads_out_of_the_roots(api, storage):
    shoot, runner = storage
    r = api.get("/api/v1/folders", {"path": str(shoot)})
    assert r.status_code == 200
    assert r.json() == {"path": str(shoot), "entries": [
        {"name": "day2", "path": f"{shoot}/day2", "type": "dir", "size": None},
        {"name": "latest", "path": f"{shoot}/latest", "type": "dir", "size": None},
        {"name": "a.jpg", "path": f"{shoot}/a.jpg", "type": "file", "size": 5},
        {"name": "same.jpg", "path": f"{shoot}/same.jpg", "type": "file", "size": 5},
    ]}
    assert len(runner.commands) == 1  # the folder and every entry: one command
    r = api.get("/api/v1/folders", {"path": f"{shoot}/etc"})
    assert r.status_code == 403 and r.json()["field"] == "path"
