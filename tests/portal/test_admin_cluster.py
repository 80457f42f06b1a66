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
from django.contrib.messages import get_messages
from django.core.management import call_command
from django.urls import reverse

from cluster import close_all_runners
from jobs.models import ClusterProfile, Template

from .admin_helpers import template_form

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
