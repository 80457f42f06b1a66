"""The admin's Clusters page in a real browser (headless Chromium, the portal's own web server
process): per cluster and GPU type, the GPUs by state, the nodes in plain words (one asleep, one
taken out of service by the GPU health check, said in the reader's words) and what wakes next (a
booking that needs the asleep node). English and Chinese. Screenshots:
<screenshots>/admin-clusters-*.png (tests/e2e/shots.py). The reading is the real `sinfo --json` of
Slurm 26.05, through the one SSH seam."""
from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from jobs.clusters import node_states
from jobs.models import Booking, BookingState, GpuType
from tests.e2e.shots import SHOTS
from tests.e2e.test_browser_live import running_server

from .browser_helpers import signed_in_page

pytestmark = pytest.mark.slow

READING = (Path(__file__).parent.parent / "cluster" / "samples" / "26.05" / "sinfo_asleep_and_health_drained.json"
           ).read_text()
WORDS = {"en": ("Clusters", "taken out of service by the GPU health check: GPU 1 is too hot (97 °C)",
                "its asleep nodes are woken at"),
         "zh-hans": ("集群", "已被 GPU 健康检查停用：GPU 1 温度过高（97 °C）", "它所需的休眠节点将在")}


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
    fake_ssh(on_run=READING)
    node_states.read_nodes(profile, timezone.now())  # a fresh reading: the page shows it, asks nothing
    starts = timezone.now().replace(second=0, microsecond=0) + timedelta(hours=2)
    Booking.objects.create(
        user=staff, task_name="Trailer, reel 2", gpu_count=2, duration_minutes=120, cluster=profile,
        gpu_type=GpuType.objects.create(cluster=profile, gres_type="h200", memory_gb=141, compute_capability="9.0"),
        starts_at=starts, ends_at=starts + timedelta(hours=2), state=BookingState.CONFIRMED,
        reservation_name="ffp-trailer", reservation_made=True)
    SHOTS.mkdir(parents=True, exist_ok=True)
    with signed_in_page(web_server.url, staff, language=language, viewport=viewport) as (page, errors):
        page.goto("/admin/jobs/clusterprofile/gpus/")
        body = page.locator("#content").inner_text()
        title, drained, wakes = WORDS[language]
        assert title in page.locator("h1").inner_text()
        assert "ffp2605-n2" in body and drained in body and wakes in body and "Trailer, reel 2" in body
        page.screenshot(path=str(SHOTS / f"admin-clusters-{language}-{viewport['width']}.png"), full_page=True)
        assert not errors, errors
