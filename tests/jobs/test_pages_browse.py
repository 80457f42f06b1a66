"""The folder browser page (and its partial, used inline by the New job page)."""
import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

import jobs.clusters.browse
from jobs.errors import BrowseError
from jobs.web.views.folders import breadcrumbs

LISTING = {"path": "/srv/ffportal/storage/shoot-01", "entries": [
    {"name": "day 2", "path": "/srv/ffportal/storage/shoot-01/day 2", "type": "dir", "size": None},
    {"name": "portrait.jpg", "path": "/srv/ffportal/storage/shoot-01/portrait.jpg", "type": "file", "size": 2048000},
]}


@pytest.fixture
def fake_browse(monkeypatch):
    """The cluster is never reached: the page gets a canned listing and records what it asked."""
    calls = []

    def browse(user, path="", profile=None):
        calls.append((user.username, path, profile.slug if profile else None))
        if path.startswith("/etc"):
            raise BrowseError("That folder is outside the folders you may use.", 403)
        if path == "/srv/ffportal/storage/down":
            raise BrowseError("The cluster cannot be reached right now (timed out). Try again in a minute.", 503)
        return LISTING

    monkeypatch.setattr(jobs.clusters.browse, "browse", browse)
    return calls


def test_it_sends_anonymous_users_to_login(client):
    r = client.get(reverse("folder-browse"))
    assert r.status_code == 302 and r["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("who", ["owner", "colleague", "stranger", "staff"])
def test_it_lists_the_allowed_roots_to_users_with_a_template(client, request, template, who):
    """No path: the roots, straight from the profile (the cluster is not asked)."""
    client.force_login(request.getfixturevalue(who))
    r = client.get(reverse("folder-browse"))
    assert r.status_code == 200
    body = r.content.decode()
    assert "/srv/ffportal/storage" in body
    assert reverse("folder-browse") + "?path=/srv/ffportal/storage" in body


def test_it_shows_nothing_of_a_cluster_whose_templates_the_user_may_not_use(client, stranger, template):
    template.groups.add(Group.objects.create(name="marketing"))
    client.force_login(stranger)
    r = client.get(reverse("folder-browse"))
    assert r.status_code == 404
    body = r.content.decode()
    assert "No cluster is available to you" in body and "/srv/ffportal/storage" not in body
    r = client.get(reverse("folder-browse") + "?cluster=local&path=/srv/ffportal/storage")
    body = r.content.decode()
    assert r.status_code == 404 and "No such cluster." in body  # the same answer as for a cluster that does not exist
    assert 'class="entries"' not in body and "Use this folder" not in body


def test_it_lists_a_folder_with_links_and_use_buttons(client, owner, template, fake_browse):
    client.force_login(owner)
    r = client.get(reverse("folder-browse") + "?path=/srv/ffportal/storage/shoot-01")
    assert r.status_code == 200
    assert fake_browse == [("alice", "/srv/ffportal/storage/shoot-01", "local")]
    body = r.content.decode()
    assert reverse("folder-browse") + "?path=/srv/ffportal/storage/shoot-01/day%202" in body  # navigable
    assert reverse("job-new") + "?target_folder=/srv/ffportal/storage/shoot-01" in body  # use this folder
    assert "Use this folder" in body
    assert "portrait.jpg" in body and "2.0" in body  # files shown with their size, not as links
    assert "?path=/srv/ffportal/storage/shoot-01/portrait.jpg" not in body
    assert "<strong>shoot-01</strong>" in body  # breadcrumb


def test_it_shows_a_browse_error_plainly(client, owner, template, fake_browse):
    client.force_login(owner)
    r = client.get(reverse("folder-browse") + "?path=/etc")
    assert r.status_code == 403
    assert "That folder is outside the folders you may use." in r.content.decode()
    r = client.get(reverse("folder-browse") + "?path=/srv/ffportal/storage/down")
    assert r.status_code == 503 and "The cluster cannot be reached right now" in r.content.decode()


def test_it_renders_the_listing_alone_for_the_inline_browser(client, owner, template, fake_browse):
    client.force_login(owner)
    r = client.get(reverse("folder-browse") + "?partial=1&path=/srv/ffportal/storage/shoot-01")
    body = r.content.decode()
    assert r.status_code == 200 and "<html" not in body and "day 2" in body and 'class="button primary use-folder"' in body


def test_it_refuses_an_unknown_cluster(client, owner, template, fake_browse):
    client.force_login(owner)
    r = client.get(reverse("folder-browse") + "?cluster=nope&path=/srv/ffportal/storage")
    assert r.status_code == 404 and "No such cluster." in r.content.decode()
    assert fake_browse == []


def test_it_links_the_browser_from_the_new_job_page(client, owner, template):
    client.force_login(owner)
    body = client.get(reverse("job-new")).content.decode()
    assert f'href="{reverse("folder-browse")}"' in body and "js/folders.js" in body


def test_it_builds_breadcrumbs_below_the_root():
    roots = ["/srv/ffportal/storage", "/data"]
    assert breadcrumbs("/srv/ffportal/storage/a/b", roots) == [
        ("/srv/ffportal/storage", "/srv/ffportal/storage"), ("a", "/srv/ffportal/storage/a"),
        ("b", "/srv/ffportal/storage/a/b")]
    assert breadcrumbs("/data", roots) == [("/data", "/data")]
    assert breadcrumbs("", roots) == []


def test_the_page_never_offers_a_link_that_leads_out_of_the_roots(client, owner, template, tmp_path, fake_ssh):
    """The real browse, the folder listed on this machine: a file that is a link out of the
    roots (another job's face, a system file) is not shown, nor offered to pick."""
    from tests.fake_ssh import run_here

    shoot = tmp_path / "storage" / "shoot"
    shoot.mkdir(parents=True)
    (tmp_path / "their-face.jpg").write_bytes(b"not yours")
    (shoot / "mine.jpg").write_bytes(b"mine")
    (shoot / "borrowed.jpg").symlink_to(tmp_path / "their-face.jpg")
    (shoot / "hostname.jpg").symlink_to("/etc/hostname")
    template.cluster.target_roots = [str(tmp_path / "storage")]
    template.cluster.save()
    fake_ssh(on_run=run_here)
    client.force_login(owner)
    r = client.get(reverse("folder-browse") + f"?path={shoot}")
    body = r.content.decode()
    assert r.status_code == 200 and "mine.jpg" in body
    assert "borrowed.jpg" not in body and "hostname.jpg" not in body
