"""The job page's bar and sentence as the live script redraws them, in a real browser (headless
Chromium, the portal's web server, no cluster): a one-video job's bar moves with its frames, and a
cancelled job's sentence says what was cancelled. The messages are the server's own
(jobs.live.protocol), handed to the page's script after its connection is stopped, so nothing else
redraws the page meanwhile.
"""
from __future__ import annotations

import json

import pytest
from django.core.serializers.json import DjangoJSONEncoder
from django.urls import reverse

from jobs.live.protocol import job_snapshot
from jobs.models import Job, JobStatus, Target, TargetStatus
from jobs.shapes import live_job, live_target
from tests.e2e.shots import SHOTS
from tests.e2e.test_browser_live import running_server, wait_for
from tests.jobs.browser_helpers import signed_in_page
from tests.jobs.test_pages_jobs import make_job

pytestmark = pytest.mark.slow


@pytest.fixture
def web_server(transactional_db, tmp_path):
    with running_server(tmp_path) as server:
        yield server


def plain(message: dict) -> dict:
    return json.loads(json.dumps(message, cls=DjangoJSONEncoder))


def bar(page) -> dict:
    return page.evaluate("""({done: document.querySelector('#job-progress .progress-done').style.width,
                             pct: document.querySelector('#progress-text .pct').textContent,
                             text: document.getElementById('progress-text').textContent.replace(/\\s+/g, ' ').trim()})""")


@pytest.mark.parametrize("lang, cancelled_words", [("en", "1 cancelled"), ("zh-hans", "已取消 1 个")])
def test_the_live_bar_moves_with_a_videos_frames_and_a_cancel_is_said(web_server, owner, template, monkeypatch,
                                                                      lang, cancelled_words):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    job = make_job(owner, template, status=JobStatus.RUNNING, slurm_job_id="77", total=1)
    video = Target.objects.create(job=job, index=0, name="clip.mp4", output_name="clip.mp4", task_index=0,
                                  status=TargetStatus.RUNNING, frames_done=450, frames_total=900, seconds=30)
    with signed_in_page(web_server.url, owner, lang, viewport={"width": 1280, "height": 900}) as (page, errors):
        page.goto(reverse("job-detail", args=[job.id]))
        assert bar(page)["done"] == "50%" and bar(page)["pct"] == "50%"  # the server's page
        wait_for(page, "window.ffpLive && window.ffpLive.conn", 10_000)
        page.evaluate("window.ffpLive.conn.stop()")
        handle = "(m) => window.ffpLive.handle(m)"

        # the snapshot: half the frames
        page.evaluate(handle, plain(job_snapshot(job)))
        assert (bar(page)["done"], bar(page)["pct"]) == ("50%", "50%")
        # a frame report: three quarters, the bar follows without a new job message
        Target.objects.filter(pk=video.pk).update(frames_done=675)
        video.refresh_from_db()
        page.evaluate(handle, plain({"type": "output", "job_id": str(job.id), "target": live_target(video)}))
        assert (bar(page)["done"], bar(page)["pct"]) == ("75%", "75%")

        # cancelled: 10 photos done, the video stopped; the sentence says so and agrees with 91 %
        for i in range(1, 11):
            Target.objects.create(job=job, index=i, name=f"p{i}.jpg", output_name=f"p{i}.jpg", status=TargetStatus.DONE)
        Target.objects.filter(pk=video.pk).update(status=TargetStatus.CANCELLED, frames_done=None)
        Job.objects.filter(pk=job.pk).update(status=JobStatus.CANCELLED, total=11, done=10)
        job.refresh_from_db()
        page.evaluate(handle, plain({"type": "job", "job": live_job(job), "task_summary": {}}))
        got = bar(page)
        assert got["pct"] == "91%" and got["done"] == "91%"
        assert cancelled_words in got["text"], got["text"]
        page.screenshot(path=str(SHOTS / f"progress-cancelled-{lang}.png"), clip={"x": 0, "y": 0, "width": 1280, "height": 400})
        assert not errors, errors
