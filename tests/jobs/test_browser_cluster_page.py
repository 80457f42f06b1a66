"""The admin's Clusters page in a real browser (headless Chromium, the portal's own web server
process): per cluster and GPU type, the GPUs by state, and the nodes in plain words, with the reason
an admin gave for a drained node. English and Chinese. Screenshots: <screenshots>/admin-clusters-*.png
(tests/e2e/shots.py). The reading is the real `sinfo --json` of Slurm 26.05 with one node drained,
through the one SSH seam."""
from __future__ import annotations

from pathlib import Path

import pytest
from django.utils import timezone

from jobs.clusters import node_states
from tests.e2e.shots import SHOTS
from tests.e2e.test_browser_live import running_server

from .browser_helpers import signed_in_page

pytestmark = pytest.mark.slow

DRAINED = (Path(__file__).parent.parent / "cluster" / "samples" / "26.05" / "sinfo_drained.json").read_text()
WORDS = {"en": ("Clusters", "drained by root: maintenance"), "zh-hans": ("集群", "root")}


@pytest.fixture
def web_server(transactional_db, tmp_path):
    with running_server(tmp_path) as server:
        yield server


@pytest.mark.parametrize("language, viewport", [
    ("en", {"width": 1280, "height": 1000}),
    ("zh-hans", {"width": 1280, "height": 1000}),
])
def test_an_admin_sees_each_clusters_gpus_by_state_and_why_a_node_is_drained(web_server, staff, profile, fake_ssh,
                                                                               monkeypatch, language, viewport):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    fake_ssh(on_run=DRAINED)
    node_states.read_nodes(profile, timezone.now())  # a fresh reading: the page shows it, asks nothing
    SHOTS.mkdir(parents=True, exist_ok=True)
    with signed_in_page(web_server.url, staff, language=language, viewport=viewport) as (page, errors):
        page.goto("/admin/jobs/clusterprofile/gpus/")
        body = page.locator("#content").inner_text()
        title, drained = WORDS[language]
        assert title in page.locator("h1").inner_text()
        assert "ffp2605-n2" in body and "maintenance" in body and drained in body
        page.screenshot(path=str(SHOTS / f"admin-clusters-{language}-{viewport['width']}.png"), full_page=True)
        assert not errors, errors
