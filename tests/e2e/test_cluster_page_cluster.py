"""The admins' view of a REAL cluster (26.05, two nodes): an admin drains a node with scontrol, and
the portal's reading (sinfo over SSH, jobs.clusters.node_states) counts its GPUs as draining with
the admin's reason, on the Clusters page and in `ffportal_gpus`, and queues the admins' email once.
The node is resumed whatever happens."""
import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from jobs.clusters import node_states
from jobs.ops.collectors import ClusterGpuCollector
from tests.e2e import sites


def gpus_metric() -> dict[tuple[str, str, str], float]:
    return {(s.labels["cluster"], s.labels["type"], s.labels["state"]): s.value
            for family in ClusterGpuCollector().collect() if family.name == "ffportal_gpus" for s in family.samples}


# In the newer clusters' run (scripts/test.sh), one at a time with the tests that kill, drain or put
# 26.05's nodes to sleep.
@pytest.mark.parametrize("site", ["26.05"], indirect=True, ids=sites.site_id)
def test_a_drained_node_shows_as_draining_with_its_reason(site, monkeypatch):
    profile, node = site.profile, site.nodes[-1]  # the a100 node
    emails = []
    monkeypatch.setattr("jobs.background.enqueue.enqueue_node_email", lambda *args: emails.append(args))
    node_states.read_nodes(profile)  # the node takes work: the reading the change is seen against
    try:
        site.slurm("scontrol", "update", f"nodename={node}", "state=drain", "reason=e2e test")
        nodes = {n["name"]: n for n in node_states.read_nodes(profile)}
        assert nodes[node]["condition"] in ("drained", "draining") and nodes[node]["reason"] == "e2e test"
        [(profile_id, stopped, _seen_at)] = emails
        assert (profile_id, stopped["name"]) == (profile.pk, node)

        reading = node_states.cluster_gpus(profile)
        assert reading.by_type["a100"]["draining"] == 2 and reading.by_type["a100"]["free"] == 0
        assert gpus_metric()[(profile.slug, "a100", "draining")] == 2

        admin = Client()
        admin.force_login(User.objects.create_superuser("e2e-clusters-admin", "a@example.org", "admin-pass-123"))
        body = admin.get(reverse("admin:jobs_clusterprofile_gpus")).content.decode()
        assert f"{node}: e2e test" in body and "e2e test" in body
        node_states.read_nodes(profile)
        assert len(emails) == 1  # still drained: not emailed again
    finally:
        site.slurm("scontrol", "update", f"nodename={node}", "state=resume")
    nodes = {n["name"]: n for n in node_states.read_nodes(profile)}
    # resumed: no longer drained (a node slurmd just re-registered may still read "not answering")
    assert nodes[node]["condition"] not in ("drained", "draining") and nodes[node]["reason"] != "e2e test", nodes[node]
