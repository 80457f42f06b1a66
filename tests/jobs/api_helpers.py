"""Helpers shared by the JSON API's tests (tests/jobs/test_api_*.py)."""
from __future__ import annotations

from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from jobs.models import ApiToken, Job, JobStatus, Target, Task

#: the exact keys docs/api.md lists for `GET /api/v1/jobs/<id>`
DETAIL_KEYS = {"id", "name", "status", "template", "slurm_job_id", "progress", "tasks", "outputs", "error",
               "attempt", "attempts",  # attempt(s): added with Retry (docs/api.md)
               "tasks_next", "outputs_next",  # added for big jobs: the rest of the tasks / outputs
               "expected_start", "expected_finish",  # added with priorities (issue 13)
               "files_deleted_at",  # added with retention (issue 14)
               "models",  # added with model versions (issue 14): [{"name", "sha256"}] the tasks loaded
               "container_image",  # added with containers (issue 25): {"image", "sha256"} or null
               "team",  # added with teams (issue 28): the Slurm account of the team it runs for, or ""
               "owner"}  # added with team leads (issue 28): whose job it is
SUMMARY_KEYS = DETAIL_KEYS - {"tasks", "outputs", "attempt", "attempts", "tasks_next", "outputs_next",
                              "expected_start", "expected_finish", "files_deleted_at", "models", "container_image"}


def token_client(user, **client_kwargs) -> tuple[Client, str]:
    """A client that sends `Authorization: Token <key>` on every request, and the key."""
    _, key = ApiToken.issue(user)
    return Client(HTTP_AUTHORIZATION=f"Token {key}", **client_kwargs), key


def session_client(user, **client_kwargs) -> Client:
    client = Client(**client_kwargs)
    client.force_login(user)
    return client


def image(name: str, data: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="image/jpeg")


def make_job(owner, template, *, status: str = JobStatus.QUEUED, name: str = "", targets: int = 0,
             tasks: int = 0) -> Job:
    """A job as Start and the watcher would leave it, without uploads (the API reads rows only)."""
    job = Job.objects.create(owner=owner, name=name, template=template, template_snapshot=template.snapshot().to_json(),
                             cluster=template.cluster, status=status, total=targets)
    Target.objects.bulk_create(
        Target(job=job, index=i, name=f"shot/{i:03d}.jpg", output_name=f"{i:03d}.jpg", task_index=i // 2)
        for i in range(targets)
    )
    Task.objects.bulk_create(Task(job=job, index=i) for i in range(tasks))
    return job
