""""Try it on a few photos" in a real browser (headless Chromium, the portal's own web server process,
files sent over tus): the preview starts without leaving New job, its results appear by the button as
they are made (the worker's results played by the test: no cluster here), a flagged one says so,
and Start then runs the whole job with every file still chosen; its flagged photo is tried again
with another face photo from the job page. English and Chinese, desktop and phone. Screenshots:
<screenshots>/new-job-preview-*.png, result-needs-a-look-*.png and look-again-*.png (tests/e2e/shots.py)."""
from __future__ import annotations

import shutil

import pytest
from PIL import Image

from jobs.models import Job, JobStatus, TargetStatus
from tests.e2e.shots import SHOTS
from tests.e2e.test_browser_live import running_server, wait_for
from worker.selfcheck import NOT_TAKEN

from .browser_helpers import signed_in_page

pytestmark = pytest.mark.slow


@pytest.fixture
def web_server(transactional_db, tmp_path):
    with running_server(tmp_path) as server:
        yield server


def finish_with_results(preview: Job, picture) -> None:
    """What the watcher leaves after the worker's run: each photo done, its result and thumbnail
    fetched, the second one flagged by the worker's own look."""
    thumbs, outputs = preview.media_dir / "thumbs", preview.media_dir / "outputs"
    thumbs.mkdir(parents=True, exist_ok=True)
    outputs.mkdir(parents=True, exist_ok=True)
    for target in preview.targets.order_by("index"):
        shutil.copyfile(picture, outputs / target.output_name)
        Image.open(picture).resize((160, 160)).save(thumbs / target.output_name)
        target.status, target.faces_swapped = TargetStatus.DONE, 1
        target.output_file, target.thumbnail_file = str(outputs / target.output_name), str(thumbs / target.output_name)
        if target.index == 1:
            target.self_check, target.self_check_faces = NOT_TAKEN, 1
        target.save()
    preview.recount()
    Job.objects.filter(pk=preview.pk).update(status=JobStatus.COMPLETED)


@pytest.mark.parametrize("language, viewport, words", [
    ("en", {"width": 1280, "height": 1000},
     {"button": "Try it on a few photos", "ended": "The preview has ended.",
      "flag": "The new face did not take", "look": "1 result needs a look",
      "again": "Add another face photo in step 1"}),
    ("zh-hans", {"width": 390, "height": 844},
     {"button": "先用几张照片试试", "ended": "预览已结束。", "flag": "新的脸没有换上", "look": "1 个结果需要查看",
      "again": "请在第 1 步添加另一张脸部照片"}),
])
def test_a_preview_shows_its_results_by_the_button_and_start_runs_everything(web_server, owner, template, jpeg_bytes,
                                                                             tmp_path, monkeypatch, language,
                                                                             viewport, words):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    face = tmp_path / "anna.jpg"
    face.write_bytes(jpeg_bytes)
    photos = []
    for i in range(4):
        photos.append(tmp_path / f"shot-{i + 1}.jpg")
        photos[-1].write_bytes(jpeg_bytes)
    SHOTS.mkdir(parents=True, exist_ok=True)
    with signed_in_page(web_server.url, owner, viewport=viewport, locale=language) as (page, errors):
        page.context.add_cookies([{"name": "django_language", "value": language, "url": web_server.url}])
        page.goto("/jobs/new")
        wait_for(page, "!document.querySelector('#zone-source .choose').hidden", 10_000)
        page.set_input_files("#id_source", str(face))
        page.set_input_files("#id_targets", [str(p) for p in photos])
        wait_for(page, "document.querySelectorAll('.upload-item.upload-ready').length === 5", 30_000)
        page.fill("#id_name", "Beach day")
        page.check("#id_consent")
        button = page.locator("#preview-button")
        assert button.inner_text() == words["button"] and button.is_enabled()
        button.click()

        wait_for(page, "!document.getElementById('preview-panel').hidden", 10_000)
        wait_for(page, "document.querySelector('#preview-panel a') !== null", 10_000)
        preview = Job.objects.get(is_preview=True)
        assert preview.total == 3 and page.url.endswith("/jobs/new")  # still on the form
        finish_with_results(preview, face)
        wait_for(page, "document.querySelectorAll('#preview-panel .preview-results img').length === 3", 15_000)
        panel = page.locator("#preview-panel").inner_text()
        assert words["ended"] in panel and words["flag"] in panel
        page.locator("#preview-panel").scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / f"new-job-preview-{language}-{viewport['width']}.png"), full_page=True)
        # every file is still chosen: Start runs the whole job
        assert page.locator(".upload-item.upload-ready").count() == 5
        page.locator("#start-button").click()
        page.wait_for_url("**/jobs/*", timeout=15_000)
        whole = Job.objects.get(is_preview=False)
        assert whole.total == 4 and whole.name == "Beach day"
        # the flagged result's own page says what happened and what to try
        page.goto(f"/jobs/{preview.id}/targets/1")
        assert words["flag"] in page.locator("#target-look").inner_text()
        page.screenshot(path=str(SHOTS / f"result-needs-a-look-{language}-{viewport['width']}.png"), full_page=True)
        page.goto(f"/jobs/{preview.id}?show=look#targets")
        assert page.locator("#target-grid li").count() == 1
        # the whole job ends with one flagged photo: tried again with another face photo
        finish_with_results(whole, face)
        page.goto(f"/jobs/{whole.id}")
        assert words["look"] in page.locator("#job-look-again").inner_text()
        page.locator("#job-look-again-button").click()
        page.wait_for_url("**/jobs/new?again=*", timeout=15_000)
        wait_for(page, "document.querySelectorAll('#zone-target .upload-item.upload-ready').length === 1", 15_000)
        assert page.locator("#zone-source .upload-item").count() == 0  # another face is the point
        assert words["again"] in page.locator("#look-again").inner_text()
        other = tmp_path / "bella.jpg"
        other.write_bytes(jpeg_bytes)
        page.set_input_files("#id_source", str(other))
        wait_for(page, "document.querySelectorAll('#zone-source .upload-item.upload-ready').length === 1", 30_000)
        page.screenshot(path=str(SHOTS / f"look-again-{language}-{viewport['width']}.png"), full_page=True)
        page.check("#id_consent")
        page.locator("#start-button").click()
        page.wait_for_url(lambda url: "/jobs/new" not in url and str(whole.id) not in url, timeout=15_000)
        again = Job.objects.filter(is_preview=False).exclude(pk=whole.pk).get()
        assert [t.name for t in again.targets.all()] == ["shot-2.jpg"]
        assert [s.original_name for s in again.sources.all()] == ["bella.jpg"]
        assert not errors, errors
