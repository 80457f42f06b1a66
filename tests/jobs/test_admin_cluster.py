"""The cluster profile's "Test connection" and the template form's cluster check, against the REAL
local cluster (sshd on 127.0.0.1:2222, Slurm 22.05 with partition gpu on node vm: 2 h200 GPUs).

Never skipped: when the cluster is down these tests FAIL and say how to bring it up. The profile
is the one `manage.py seed_local` makes from the cluster's own key files.
"""
import os
import socket

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from django.contrib.auth.models import Permission, User
from django.contrib.messages import get_messages
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from cluster import close_all_runners
from jobs.models import ClusterProfile, Template

from .admin_helpers import profile_form, template_form

HOST = os.environ.get("FFP_SSH_HOST", "127.0.0.1")
PORT = int(os.environ.get("FFP_SSH_PORT", "2222"))
UP = "bring the local cluster up with `bash scripts/cluster/up.sh` (check: scripts/cluster/check.sh)"


@pytest.fixture
def local(db):
    """The real 'local' profile, exactly as `manage.py seed_local` writes it."""
    try:
        socket.create_connection((HOST, PORT), timeout=3).close()
    except OSError as e:
        pytest.fail(f"sshd is not listening on {HOST}:{PORT} ({e.strerror or e}): {UP}", pytrace=False)
    with open(os.devnull, "w") as quiet:
        call_command("seed_local", "--demo-password", "demo-pass-123", stdout=quiet)
    yield ClusterProfile.objects.get(slug="local")
    close_all_runners()


@pytest.fixture
def admin_client(client, staff):
    client.force_login(staff)
    return client


def new_key_text() -> str:
    return ed25519.Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()).decode()


def new_public_line() -> str:
    return ed25519.Ed25519PrivateKey.generate().public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()


def copy_of(profile: ClusterProfile, slug: str, **changes) -> ClusterProfile:
    fields = {f.name: getattr(profile, f.name) for f in ClusterProfile._meta.concrete_fields if f.name != "id"}
    fields.update(name=slug, slug=slug, **changes)
    return ClusterProfile.objects.create(**fields)


def run_action(admin_client, *profiles):
    r = admin_client.post(reverse("admin:jobs_clusterprofile_changelist"),
                          {"action": "test_connection", "_selected_action": [p.pk for p in profiles]})
    assert r.status_code == 200, r
    return r


def test_it_shows_partitions_gpu_types_and_gpus_of_the_real_cluster(admin_client, local):
    r = run_action(admin_client, local)
    (result,) = r.context["results"]
    assert result["ok"], result.get("error")
    by_name = {p.name: p for p in result["partitions"]}
    assert {"gpu", "cpu"} <= set(by_name)
    gpu = by_name["gpu"]
    assert gpu.gpu_types == ["h200"] and gpu.gpus_total == 2 and gpu.state == "UP" and gpu.is_default
    assert 0 <= gpu.gpus_free <= 2  # other tests may hold a GPU right now
    assert gpu.nodes == ["vm"]
    body = r.content.decode()
    assert "Connected: the host key matches the pinned one" in body
    assert "<td>gpu (default)</td>" in body and "<td>h200</td>" in body and "gpu:h200:2" in body


def test_it_tests_one_profile_from_its_change_page(admin_client, local):
    change = admin_client.get(reverse("admin:jobs_clusterprofile_change", args=[local.pk])).content.decode()
    url = reverse("admin:jobs_clusterprofile_test_connection", args=[local.pk])
    assert f'href="{url}"' in change
    r = admin_client.get(url)
    assert r.status_code == 200 and r.context["results"][0]["ok"]


def test_it_names_a_rejected_host_key(admin_client, local):
    wrong = copy_of(local, "wrong-host-key", known_hosts=f"[{HOST}]:{PORT} {new_public_line()}")
    r = run_action(admin_client, wrong)
    (result,) = r.context["results"]
    assert not result["ok"] and result["kind"] == "Host key rejected"
    assert "host key CHANGED" in result["error"] and "man-in-the-middle" in result["error"]
    body = r.content.decode()
    assert "Host key rejected." in body and "<td>h200</td>" not in body


def test_it_names_a_refused_login(admin_client, local):
    stranger_key = copy_of(local, "wrong-key", private_key=new_key_text())
    (result,) = run_action(admin_client, stranger_key).context["results"]
    assert not result["ok"] and result["kind"] == "Authentication failed"
    assert "refused the profile's SSH key for user 'ffportal'" in result["error"]


def test_it_names_an_unreachable_cluster(admin_client, local):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gone = copy_of(local, "gone", port=port, known_hosts=local.known_hosts.replace(f":{PORT}]", f":{port}]"))
    (result,) = run_action(admin_client, gone).context["results"]
    assert not result["ok"] and result["kind"] == "Cluster unreachable" and "connection refused" in result["error"]


def test_it_reports_each_selected_profile(admin_client, local):
    wrong = copy_of(local, "wrong-host-key", known_hosts=f"[{HOST}]:{PORT} {new_public_line()}")
    results = run_action(admin_client, local, wrong).context["results"]
    assert [(r["profile"].slug, r["ok"]) for r in results] == [("local", True), ("wrong-host-key", False)]


@pytest.mark.parametrize("who", ["owner", "stranger"])
def test_it_keeps_non_staff_from_testing_connections(client, request, local, who):
    client.force_login(request.getfixturevalue(who))
    r = client.get(reverse("admin:jobs_clusterprofile_test_connection", args=[local.pk]))
    assert r.status_code == 302 and r["Location"].startswith(reverse("admin:login"))


# ---- the template form asks the same cluster ----

def test_it_checks_a_template_against_the_real_cluster(admin_client, local):
    template = Template.objects.get(slug="gpu-batch")  # made by seed_local: partition gpu, h200 x 1
    url = reverse("admin:jobs_template_change", args=[template.pk])
    r = admin_client.post(url, template_form(template, gpu_type="a100"))
    assert r.status_code == 200
    assert r.context["adminform"].form.errors["gpu_type"] == [
        "No node of partition gpu has a100 GPUs; its GPU types: h200."]
    r = admin_client.post(url, template_form(template, partition="bigmem"))
    assert "The cluster has no partition bigmem" in r.context["adminform"].form.errors["partition"][0]
    r = admin_client.post(url, template_form(template, time_limit="00:45:00"))
    assert r.status_code == 302
    messages = [str(m) for m in get_messages(r.wsgi_request)]
    assert "Checked on the cluster Local cluster: partition gpu exists and has h200 GPUs." in messages
    template.refresh_from_db()
    assert template.time_limit == "00:45:00"


# ---- the SSH private key is never shown, to anyone, on any admin page of a profile ----

@pytest.fixture
def viewer(db):
    """Staff who may only look at cluster profiles (the "view cluster profile" permission)."""
    user = User.objects.create_user("viewer", "viewer@example.org", "viewer-pass-123", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_clusterprofile"))
    return user


def key_pieces(key: str) -> list[str]:
    """The key's text and each recognisable piece of it: its lines, the PEM label, and every
    16-character run of its base64 body."""
    lines = [line.strip() for line in key.strip().splitlines()]
    body = "".join(lines[1:-1])
    return ["PRIVATE KEY", *lines, *(body[i:i + 16] for i in range(0, len(body) - 15, 8))]


def assert_no_key(response, key: str, page: str) -> None:
    body = b"".join(response).decode() if response.streaming else response.content.decode()
    shown = [piece for piece in key_pieces(key) if piece in body]
    assert not shown, f"{page} shows the private key: {shown[:3]}"


def profile_pages(profile: ClusterProfile) -> list[tuple[str, str, dict | None]]:
    """(name, url, POST data or None for GET): every admin page that shows a profile."""
    pk = profile.pk
    changelist = reverse("admin:jobs_clusterprofile_changelist")
    return [
        ("list", changelist, None),
        ("search", changelist + "?q=local", None),
        ("change/view", reverse("admin:jobs_clusterprofile_change", args=[pk]), None),
        ("history", reverse("admin:jobs_clusterprofile_history", args=[pk]), None),
        ("delete confirmation", reverse("admin:jobs_clusterprofile_delete", args=[pk]), None),
        ("bulk delete confirmation", changelist, {"action": "delete_selected", "_selected_action": [pk]}),
        ("test connection", reverse("admin:jobs_clusterprofile_test_connection", args=[pk]), None),
        ("test connection action", changelist, {"action": "test_connection", "_selected_action": [pk]}),
        # an invalid change: the form comes back with what was posted
        ("invalid change", reverse("admin:jobs_clusterprofile_change", args=[pk]),
         profile_form(profile, port="not-a-port", private_key=profile.private_key,
                      max_targets_per_job=profile.max_targets_per_job)),
        ("add", reverse("admin:jobs_clusterprofile_add"), None),
    ]


@pytest.mark.parametrize("who", ["viewer", "staff"])
def test_no_admin_page_of_a_profile_shows_its_private_key(client, request, local, who):
    key = local.private_key
    assert "PRIVATE KEY" in key  # the real key of the local cluster, as seed_local stores it
    editor = Client()  # a change, so that the history page has something to show
    editor.force_login(request.getfixturevalue("staff"))
    r = editor.post(reverse("admin:jobs_clusterprofile_change", args=[local.pk]),
                    profile_form(local, worker_path=local.worker_path, max_targets_per_job=local.max_targets_per_job))
    assert r.status_code == 302, r.context["adminform"].form.errors
    local.refresh_from_db()
    client.force_login(request.getfixturevalue(who))
    seen = []
    for page, url, data in profile_pages(local):
        response = client.post(url, data) if data is not None else client.get(url)
        assert_no_key(response, key, page)
        seen.append((page, response.status_code))
    codes = dict(seen)
    assert codes["change/view"] == 200 and codes["list"] == 200 and codes["history"] == 200
    assert codes["test connection"] == 200 and codes["test connection action"] == 200
    if who == "viewer":
        assert codes["delete confirmation"] == 403 and codes["add"] == 403
        # The view-only page says a key is set, without showing it.
        body = client.get(reverse("admin:jobs_clusterprofile_change", args=[local.pk])).content.decode()
        assert local.username in body and local.work_root in body and "set, stored encrypted" in body
    else:
        assert codes["delete confirmation"] == 200 and codes["invalid change"] == 200


@pytest.mark.parametrize("who", ["viewer", "staff"])
def test_the_key_cannot_be_probed_through_the_list_filters(client, request, local, who):
    """The change list takes `?field__lookup=value` filters for the model's own fields: on the key
    that would be an oracle (does the key start with "-----BEGIN OPENSSH"?)."""
    client.force_login(request.getfixturevalue(who))
    url = reverse("admin:jobs_clusterprofile_changelist")
    first_line = local.private_key.strip().splitlines()[0]
    for query in ({"private_key__startswith": first_line}, {"private_key__contains": "KEY"},
                  {"private_key": local.private_key}):
        assert client.get(url, query).status_code == 400
