"""POST /cancel, POST /retry and GET /results.zip of /api/v1/jobs/<id>."""
import io
import zipfile

import pytest

from jobs.models import Job, JobStatus, Target

from .api_helpers import DETAIL_KEYS, make_job, token_client


@pytest.fixture
def api(owner):
    return token_client(owner)[0]


def test_it_cancels_a_queued_job(api, owner, template):
    job = make_job(owner, template, targets=2)
    r = api.post(f"/api/v1/jobs/{job.id}/cancel")
    assert r.status_code == 200
    assert set(r.json()) == DETAIL_KEYS
    assert r.json()["status"] == "cancelled"
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED and job.cancel_requested and job.finished_at


def test_it_asks_the_cluster_to_cancel_a_running_job(api, owner, template, monkeypatch,
                                                     django_capture_on_commit_callbacks):
    enqueued = []

    class FakeQueue:
        def enqueue(self, func, *args, **kwargs):
            enqueued.append((func, args))

    monkeypatch.setattr("jobs.background.enqueue.queue", lambda: FakeQueue())
    job = make_job(owner, template, status=JobStatus.RUNNING)
    with django_capture_on_commit_callbacks(execute=True):  # scancel is enqueued once the flag commits
        r = api.post(f"/api/v1/jobs/{job.id}/cancel")
    assert r.status_code == 200
    assert r.json()["status"] == "running"  # until Slurm confirms; the watcher records "cancelled"
    assert enqueued == [("jobs.job.submit.cancel_on_cluster", (str(job.id),))]
    job.refresh_from_db()
    assert job.cancel_requested


def test_it_refuses_to_cancel_twice(api, owner, template):
    job = make_job(owner, template)
    assert api.post(f"/api/v1/jobs/{job.id}/cancel").status_code == 200
    r = api.post(f"/api/v1/jobs/{job.id}/cancel")
    assert r.status_code == 409
    assert set(r.json()) == {"error"}


@pytest.mark.parametrize("status", [JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.PARTIALLY_FAILED])
def test_it_refuses_to_cancel_a_finished_job(api, owner, template, status):
    job = make_job(owner, template, status=status)
    assert api.post(f"/api/v1/jobs/{job.id}/cancel").status_code == 409
    job.refresh_from_db()
    assert job.status == status and not job.cancel_requested


def test_it_refuses_a_retry_when_nothing_failed_for_its_task(api, owner, template):
    job = make_job(owner, template, status=JobStatus.PARTIALLY_FAILED)
    r = api.post(f"/api/v1/jobs/{job.id}/retry")
    assert r.status_code == 409
    assert "Nothing to retry" in r.json()["error"]
    assert Job.objects.get(pk=job.pk).status == JobStatus.PARTIALLY_FAILED


def test_it_streams_the_results_as_a_zip(api, owner, template):
    job = make_job(owner, template, status=JobStatus.COMPLETED, targets=3)
    outputs = job.media_dir / "outputs"
    outputs.mkdir(parents=True)
    for index in (0, 2):
        path = outputs / f"{index:03d}.jpg"
        path.write_bytes(f"output {index}".encode())
        Target.objects.filter(job=job, index=index).update(output_file=str(path))

    r = api.get(f"/api/v1/jobs/{job.id}/results.zip")
    assert r.status_code == 200
    assert r["Content-Type"] == "application/zip"
    assert "attachment" in r["Content-Disposition"]
    with zipfile.ZipFile(io.BytesIO(b"".join(r.streaming_content))) as zf:
        assert zf.namelist() == ["000-swapped.jpg", "002-swapped.jpg"]  # names that say what they are
        assert zf.read("002-swapped.jpg") == b"output 2"
