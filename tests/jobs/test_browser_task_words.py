"""The job page's task table in a real browser, for a reader of 简体中文: the live script draws a
task's new state as the server does, plain words in the badge and Slurm's word after it, inside
Technical details (portal/server.py in its own process, headless Chromium, Redis; no cluster)."""
from __future__ import annotations

import threading
import traceback

import pytest

from jobs.models import Job, JobStatus, Task
from jobs.models.preferences import LanguagePreference
from tests.e2e.test_browser_live import running_server, wait_for

from .browser_helpers import signed_in_page

pytestmark = pytest.mark.slow


@pytest.fixture
def web_server(transactional_db, tmp_path):
    with running_server(tmp_path) as server:
        yield server


def publish_task(job, task) -> None:
    """A task event through Redis and the web server, from a thread of its own (async_to_sync
    refuses to run under Playwright's loop)."""
    errors = []

    def run():
        from django.db import connection

        from jobs.live.protocol import Publisher

        try:
            publisher = Publisher()
            publisher.task(job, task)
            publisher.flush()
        except BaseException:  # noqa: BLE001 - reported by the test
            errors.append(traceback.format_exc())
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive() and not errors, errors


def cell(page, index: int) -> list[str]:
    return page.evaluate(f"""Array.from(document.querySelectorAll('#task-rows tr[data-task-index="{index}"] td:nth-child(2) span'))
                             .map(e => e.textContent.trim())""")


def test_a_task_that_ends_reads_in_chinese_words_with_slurms_word_after_them(web_server, owner, template,
                                                                              monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    LanguagePreference.choose(owner, "zh-hans")
    job = Job.objects.create(owner=owner, template=template, template_snapshot=template.snapshot().to_json(),
                             cluster=template.cluster, name="婚礼照片", status=JobStatus.RUNNING, language="zh-hans",
                             slurm_job_id="4242", total=2)
    task = Task.objects.create(job=job, index=0, state="RUNNING", node="gpu-node-1")
    with signed_in_page(web_server.url, owner) as (page, errors):
        page.goto(f"/jobs/{job.id}")
        page.click("#technical summary")
        assert cell(page, 0) == ["运行中", "RUNNING"]  # as the server drew it
        wait_for(page, "document.getElementById('live-indicator').getAttribute('data-mode') === 'live'", 15_000)

        Task.objects.filter(pk=task.pk).update(state="COMPLETED", exit_code=0)
        task.refresh_from_db()
        publish_task(job, task)
        wait_for(page, """document.querySelector('#task-rows tr[data-task-index="0"] .task-code')
                          .textContent === 'COMPLETED'""", 15_000)
        assert cell(page, 0) == ["已完成", "COMPLETED"]  # drawn by the script, in the reader's words
        assert "集群任务" in page.inner_text("#technical") and "Slurm" not in page.inner_text("#technical")
        assert not errors, errors
