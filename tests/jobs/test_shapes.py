"""One set of JSON shapes: the live pages get the API's job, task and target, plus page extras."""
import pytest

from jobs.live.protocol import Publisher, job_snapshot
from jobs.models import Job, JobStatus, Task
from jobs.shapes import job_detail, job_summary, live_job, live_task, task_shape, with_details

from .api_helpers import make_job

pytestmark = pytest.mark.django_db


def test_the_live_snapshot_carries_the_apis_job_and_tasks(owner, template):
    job = make_job(owner, template, status=JobStatus.RUNNING, targets=3, tasks=2)
    Task.objects.filter(job=job, index=1).update(state="OUT_OF_MEMORY", reason="ran out of memory", exit_code=None)
    api = job_detail(with_details(Job.objects.filter(pk=job.pk)).get())
    live = job_snapshot(job)
    assert {k: live["job"][k] for k in job_summary(job)} == {k: v for k, v in api.items() if k in job_summary(job)}
    assert [{k: t[k] for k in task_shape(Task(index=0))} for t in live["tasks"]] == api["tasks"]
    assert live["job"]["template"] == "quick-gpu" and live["job"]["template_name"] == "Quick GPU"
    task = job.tasks.get(index=1)
    assert live_task(task) == {**task_shape(task), "elapsed_seconds": None}
    assert live_job(job)["status_label"] == "running"


def test_a_batch_sends_only_the_last_job_event_of_each_job(owner, template, monkeypatch):
    sent = []

    async def fake_send_all(layer, messages):
        sent.extend(messages)

    monkeypatch.setattr("jobs.live.protocol._send_all", fake_send_all)
    job = make_job(owner, template, status=JobStatus.PENDING)
    other = make_job(owner, template, status=JobStatus.PENDING)
    pub = Publisher()
    pub.job(job)
    job.status = JobStatus.RUNNING
    pub.job(other)
    pub.job(job)
    assert pub.flush() == 4  # two jobs, each to its own group and the owner's list
    assert [(group, m["job"]["id"], m["job"]["status"]) for group, m in sent] == [
        (f"job.{other.id}", str(other.id), "pending"), (f"user.{owner.id}", str(other.id), "pending"),
        (f"job.{job.id}", str(job.id), "running"), (f"user.{owner.id}", str(job.id), "running")]


@pytest.mark.parametrize("name", ["job-output", "job-thumb", "job-target", "job-input", "api-job-output"])
@pytest.mark.parametrize("prefix", ["/", "/portal/"])
def test_a_targets_url_is_the_one_reverse_makes(name, prefix):
    import uuid

    from django.urls import reverse, set_script_prefix

    from jobs.shapes import target_url

    job_id = uuid.uuid4()
    set_script_prefix(prefix)
    try:
        for index in (0, 7, 12345):
            assert target_url(name, job_id, index) == reverse(name, args=[job_id, index])
    finally:
        set_script_prefix("/")
