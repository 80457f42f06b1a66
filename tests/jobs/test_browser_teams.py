"""New job for a member of two teams, in a real browser (headless Chromium, the portal's own web
server process): "For which team" is there, starts on the team of their last job, and Start runs the
job for the team chosen. English and Chinese, desktop and phone. Screenshots:
<screenshots>/new-job-team-*.png (tests/e2e/shots.py)."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from jobs.models import Job, Team
from tests.e2e.shots import SHOTS
from tests.e2e.test_browser_live import running_server, wait_for

from .browser_helpers import signed_in_page

pytestmark = pytest.mark.slow


@pytest.fixture
def web_server(transactional_db, tmp_path):
    with running_server(tmp_path) as server:
        yield server


@pytest.mark.parametrize("language, viewport, label", [
    ("en", {"width": 1280, "height": 1000}, "For which team"),
    ("zh-hans", {"width": 390, "height": 844}, "为哪个团队运行"),
])
def test_a_member_of_two_teams_chooses_the_team_at_start(web_server, owner, team, template, jpeg_bytes, tmp_path,
                                                          monkeypatch, language, viewport, label):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    Team.objects.create(group=team, slurm_account="vfx")
    post = Group.objects.create(name="post")
    owner.groups.add(post)
    Team.objects.create(group=post, slurm_account="post")
    face, photo = tmp_path / "anna.jpg", tmp_path / "shot.jpg"
    face.write_bytes(jpeg_bytes)
    photo.write_bytes(jpeg_bytes)
    SHOTS.mkdir(parents=True, exist_ok=True)
    with signed_in_page(web_server.url, owner, language=language, viewport=viewport) as (page, errors):
        page.goto("/jobs/new")
        assert page.locator("label[for=id_team]").inner_text() == label
        assert page.locator("#id_team option:checked").inner_text() == "post"  # the first by name
        wait_for(page, "!document.querySelector('#zone-source .choose').hidden", 10_000)
        page.set_input_files("#id_source", str(face))
        page.set_input_files("#id_targets", [str(photo)])
        wait_for(page, "document.querySelectorAll('.upload-item.upload-ready').length === 2", 30_000)
        page.select_option("#id_team", label="vfx")
        page.check("#id_consent")
        page.locator("#id_team").scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / f"new-job-team-{language}-{viewport['width']}.png"), full_page=True)
        page.locator("#start-button").click()
        page.wait_for_url("**/jobs/*-*", timeout=15_000)
        job = Job.objects.get()
        assert (job.team.slurm_account, job.slurm_account) == ("vfx", "vfx")
        page.goto("/jobs/new")  # the next job starts on the team of the last one
        assert page.locator("#id_team option:checked").inner_text() == "vfx"
        assert not errors, errors
