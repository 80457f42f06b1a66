""""Delete job and files" in a real browser (headless Chromium, the portal's own web server process):
the confirmation says what goes, "Keep the files" keeps them, confirming deletes them and the page
turns into the tombstone. The cluster side is tests/e2e/test_retention_cluster.py's."""
from __future__ import annotations

import pytest

from jobs.models import Job
from tests.e2e.test_browser_live import running_server

from .browser_helpers import signed_in_page
from .test_retention import finished_job

pytestmark = pytest.mark.slow


@pytest.fixture
def web_server(transactional_db, tmp_path):
    with running_server(tmp_path) as server:
        yield server


def test_the_owner_confirms_and_the_page_becomes_the_tombstone(web_server, owner, template, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    job = finished_job(owner, template)
    with signed_in_page(web_server.url, owner) as (page, errors):
        page.goto(f"/jobs/{job.id}")

        page.locator("#job-delete button").click()
        dialog = page.locator("#delete-dialog")
        assert dialog.is_visible() and "cannot be undone" in dialog.inner_text()
        dialog.get_by_role("button", name="Keep the files").click()
        assert not dialog.is_visible() and job.media_dir.is_dir()
        assert Job.objects.get(pk=job.pk).files_deleted_at is None

        page.locator("#job-delete button").click()
        with page.expect_navigation():
            dialog.get_by_role("button", name="Delete job and files").click()
        assert "Files deleted on" in page.locator("#job-files-deleted").inner_text()
        assert page.locator("#job-delete").count() == 0 and page.locator("#job-download").count() == 0
        assert not job.media_dir.exists()
        assert Job.objects.get(pk=job.pk).files_deleted_at is not None
        assert errors == []
