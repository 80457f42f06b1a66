"""Retry what did not finish (jobs.job.retry): which targets and chunks, the API and the page, the
automatic policy in the watcher (from REAL captured Slurm output, through the CannedSlurm of
test_watcher), and the resubmission of a later attempt. The real cluster run is tests/e2e/test_retry.py."""
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from cluster.sbatch import render_script
from jobs.job import submit
from jobs.job.attempts import history, more_memory
from jobs.job.retry import retry_failed, retryable_targets
from jobs.models import AuditEntry, Job, JobStatus, Target, TargetStatus, Task
from jobs.watcher import poll as watcher
from jobs.watcher.decide import KILL_LINE_WAIT

from .api_helpers import session_client, token_client
from .test_watcher import SAMPLES, CannedSlurm, fake, make_job, settle  # noqa: F401 - fixture

MEMKILL = (SAMPLES / "sacct_memkill.json").read_text()
MEMKILL_LOG = (SAMPLES / "memkill_output.txt").read_text()


def ended_job(owner, template, status=JobStatus.PARTIALLY_FAILED):
    """6 targets in 3 chunks of 2: chunk 0 done; chunk 1: one done, one corrupt (own reason);
    chunk 2 ran out of memory (both targets failed with the task)."""
    job = make_job(owner, template, "500", tasks=3, targets_per_task=2)
    Job.objects.filter(pk=job.pk).update(status=status, done=3, failed=3, finished_at=timezone.now())
    job.refresh_from_db()
    Task.objects.filter(job=job, index__in=(0, 1)).update(state="COMPLETED")
    Task.objects.filter(job=job, index=1).update(state="FAILED", exit_code=1, reason="some images failed")
    Task.objects.filter(job=job, index=2).update(state="OUT_OF_MEMORY", reason="ran out of memory")
    Target.objects.filter(job=job, index__in=(0, 1, 2)).update(status=TargetStatus.DONE, output_file="/x")
    Target.objects.filter(job=job, index=3).update(status=TargetStatus.FAILED, message="3.jpg is truncated or corrupt")
    Target.objects.filter(job=job, index__in=(4, 5)).update(status=TargetStatus.FAILED, message="ran out of memory",
                                                            failed_with_task=True)
    return job


def test_the_user_retries_every_failed_target_and_the_watcher_only_those_of_dead_tasks(owner, template):
    job = ended_job(owner, template)
    assert [t.index for t in retryable_targets(job)] == [3, 4, 5]  # the corrupt one too: it may have been replaced
    assert [t.index for t in retryable_targets(job, auto=True)] == [4, 5]  # it would fail again
    Target.objects.filter(job=job, index=3).update(status=TargetStatus.NO_FACE)
    assert [t.index for t in retryable_targets(job)] == [4, 5]  # no face found is not a failure


def test_a_retry_is_a_new_attempt_over_just_those_chunks(owner, template, django_capture_on_commit_callbacks,
                                                         monkeypatch):
    enqueued = []
    monkeypatch.setattr("jobs.background.enqueue.enqueue_submission", lambda job: enqueued.append((job.pk, job.attempt)))
    job = ended_job(owner, template)
    with django_capture_on_commit_callbacks(execute=True):
        assert retry_failed(job, actor=owner)
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED and job.attempt == 2 and job.slurm_job_id == "" and job.finished_at is None
    assert enqueued == [(job.pk, 2)]
    first, second = history(job)
    assert first.number == 1 and first.slurm_job_id == "500" and first.ended["2"] == "OUT_OF_MEMORY"
    assert second.indexes == [1, 2] and second.array == "1-2" and second.mem == "2G" and not second.auto
    assert second.by == owner.username
    assert {t.index: t.status for t in job.targets.all()} == {0: "done", 1: "done", 2: "done", 3: "waiting",
                                                              4: "waiting", 5: "waiting"}
    assert (job.done, job.failed) == (3, 0)
    assert [(t.index, t.state, t.attempt) for t in job.tasks.all()] == [(0, "COMPLETED", 1), (1, "PENDING", 2),
                                                                        (2, "PENDING", 2)]
    assert job.slurm_name == f"ffp-{job.id}-a2"
    assert job.error == "Retrying 3 photos and videos (attempt 2)."
    entry = AuditEntry.objects.get(action="job.retry")
    assert entry.actor == owner and entry.details["attempt"] == 2 and entry.details["array"] == "1-2"
    # A second click finds nothing to retry: no third attempt.
    assert not retry_failed(job, actor=owner)


@pytest.mark.parametrize("status", [JobStatus.RUNNING, JobStatus.COMPLETED])
def test_it_is_not_retried_from_these_states(owner, template, status):
    job = ended_job(owner, template, status=status)
    assert not retry_failed(job, actor=owner)
    assert Job.objects.get(pk=job.pk).attempt == 1


def test_a_lost_job_retries_what_never_got_a_result(owner, template):
    job = make_job(owner, template, "77", tasks=2)
    Job.objects.filter(pk=job.pk).update(status=JobStatus.LOST)
    Target.objects.filter(job=job, index=0).update(status=TargetStatus.DONE)
    Task.objects.filter(job=job, index=0).update(state="COMPLETED")
    assert retry_failed(job)
    job.refresh_from_db()
    assert history(job)[1].indexes == [1]
    # A task that never ended is rerun too (its done targets are skipped), so the attempt can end.
    lost = make_job(owner, template, "78", tasks=2)
    Job.objects.filter(pk=lost.pk).update(status=JobStatus.LOST)
    Target.objects.filter(job=lost, index=0).update(status=TargetStatus.DONE)
    assert retry_failed(lost)
    lost.refresh_from_db()
    assert history(lost)[1].indexes == [0, 1]


def test_the_api_answers_202_with_the_job_and_409_with_a_reason(owner, template):
    api = token_client(owner)[0]
    job = ended_job(owner, template)
    r = api.post(f"/api/v1/jobs/{job.id}/retry")
    assert r.status_code == 202, r.content
    body = r.json()
    assert body["status"] == "queued" and body["attempt"] == 2 and body["attempts"][1]["array"] == "1-2"
    assert [t["status"] for t in body["tasks"]] == ["COMPLETED", "PENDING", "PENDING"]
    r = api.post(f"/api/v1/jobs/{job.id}/retry")
    assert r.status_code == 409 and "still" in r.json()["error"]


def test_the_api_refuses_strangers_and_retries_a_cancelled_job(owner, stranger, colleague, template):
    job = ended_job(owner, template, status=JobStatus.CANCELLED)
    Target.objects.filter(job=job, index__in=(4, 5)).update(status=TargetStatus.CANCELLED, failed_with_task=False)
    for other in (stranger, colleague):
        assert token_client(other)[0].post(f"/api/v1/jobs/{job.id}/retry").status_code == 404
    assert Job.objects.get(pk=job.pk).attempt == 1
    r = token_client(owner)[0].post(f"/api/v1/jobs/{job.id}/retry")
    assert r.status_code == 202, r.content
    job.refresh_from_db()
    assert job.attempt == 2 and not job.cancel_requested
    assert {t.index: t.status for t in job.targets.filter(index__gte=3)} == {3: "waiting", 4: "waiting", 5: "waiting"}


def test_the_page_offers_the_button_only_when_something_can_be_retried(owner, template):
    client = session_client(owner)
    job = ended_job(owner, template)
    page = client.get(f"/jobs/{job.id}").content.decode()
    assert 'id="job-retry"' in page and "Retry failed photos and videos" in page and "csrfmiddlewaretoken" in page
    assert client.get(f"/jobs/{job.id}/retry").status_code == 405
    r = client.post(f"/jobs/{job.id}/retry")
    assert r.status_code == 302
    job.refresh_from_db()
    assert job.attempt == 2 and job.status == JobStatus.QUEUED
    page = client.get(f"/jobs/{job.id}").content.decode()
    assert 'id="job-retry" hidden' in page and 'id="attempts"' in page  # running: only the live script shows it
    all_done = ended_job(owner, template, status=JobStatus.COMPLETED)
    Target.objects.filter(job=all_done).update(status=TargetStatus.DONE)
    assert 'id="job-retry"' not in client.get(f"/jobs/{all_done.id}").content.decode()


def test_the_page_needs_csrf(owner, template):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    job = ended_job(owner, template)
    assert client.post(f"/jobs/{job.id}/retry").status_code == 403
    assert Job.objects.get(pk=job.pk).attempt == 1


def test_more_memory_doubles_up_to_the_ceiling(owner, template):
    job = ended_job(owner, template)
    assert more_memory(job) == "4G"  # no ceiling set: twice the template's memory
    job.template_snapshot["max_mem"] = "3G"
    assert more_memory(job) == "3G"
    job.template_snapshot["max_mem"] = "2G"
    assert more_memory(job) is None
    job.template_snapshot.update(mem="200M", max_mem="")
    assert more_memory(job) == "400M"


# --- the automatic policy, in the watcher -----------------------------------------------------------


def test_a_memory_kill_is_retried_once_with_twice_the_memory(fake, owner, template):
    job = make_job(owner, template, "37", tasks=1)
    fake(CannedSlurm(sacct=MEMKILL, log_tail=MEMKILL_LOG))
    settle(template.cluster)
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED and job.attempt == 2
    assert history(job)[1].auto and history(job)[1].mem == "4G" and history(job)[1].kinds == ["oom"]
    assert "Ran out of memory; retried automatically with 4G." in job.error
    assert job.targets.get().status == TargetStatus.WAITING
    spec = submit.sbatch_spec(job, indexes=[0])
    assert spec.mem == "4G" and spec.job_name == f"ffp-{job.id}-a2"

    # Attempt 2 runs out of memory too: no third attempt; the job ends failed, saying what was tried.
    Job.objects.filter(pk=job.pk).update(status=JobStatus.RUNNING, slurm_job_id="37", submitted_at=timezone.now())
    settle(template.cluster)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.attempt == 2
    assert "Attempt 2" in job.error and "ran out of memory" in job.error
    assert job.targets.get().failed_with_task


def test_a_memory_kill_at_the_ceiling_is_not_retried(fake, owner, template):
    template.max_mem = "2G"
    template.save()
    job = make_job(owner, template, "37", tasks=1)
    fake(CannedSlurm(sacct=MEMKILL, log_tail=MEMKILL_LOG))
    settle(template.cluster)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.attempt == 1


def test_the_end_waits_for_the_memory_kill_line(fake, owner, template):
    """slurmstepd may write "exceeded memory limit" just after sacct says FAILED 0:9: the task's log
    is read on the next cycle, and read again while the line may still come."""
    job = make_job(owner, template, "37", tasks=1)
    slurm = CannedSlurm(sacct=MEMKILL, log_tail="")
    runner = fake(slurm)
    watcher.poll_profile(template.cluster)  # sacct says FAILED 0:9: its log is asked for
    watcher.poll_profile(template.cluster)  # the log has no line yet: read again next cycle
    job.refresh_from_db()
    task = job.tasks.get()
    assert job.status == JobStatus.RUNNING and task.state == "RUNNING" and task.log_wait_since is not None
    assert all(batch[-1][0] == "tail" for batch in runner.batches[1:]) and len(runner.batches) == 2
    slurm.log_tail = MEMKILL_LOG
    watcher.poll_profile(template.cluster)
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED and history(job)[0].ended == {"0": "OUT_OF_MEMORY"}


def test_a_sigkill_without_the_memory_line_ends_failed_once_the_wait_is_over(fake, owner, template):
    job = make_job(owner, template, "37", tasks=1)
    fake(CannedSlurm(sacct=MEMKILL, log_tail="some other output\n"))
    watcher.poll_profile(template.cluster)
    Task.objects.filter(job=job).update(log_wait_since=timezone.now() - KILL_LINE_WAIT - timedelta(seconds=1))
    watcher.poll_profile(template.cluster)
    job.refresh_from_db()
    task = job.tasks.get()
    assert task.state == "FAILED" and "signal 9" in task.reason and task.log_wait_since is None
    assert job.status == JobStatus.FAILED and job.attempt == 1  # not a memory kill: not retried


def test_a_node_failure_is_retried_once_with_the_same_memory(fake, owner, template):
    doc = json.loads(MEMKILL)
    for rec in doc["jobs"]:
        rec["state"]["current"] = "NODE_FAIL"
    job = make_job(owner, template, "37", tasks=1)
    fake(CannedSlurm(sacct=json.dumps(doc)))
    settle(template.cluster)
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED and history(job)[1].mem == "2G"
    assert "compute node failed" in job.error


def test_a_timeout_is_explained_not_retried(fake, owner, template):
    job = make_job(owner, template, "32", tasks=1)
    fake(CannedSlurm(sacct=(SAMPLES / "sacct_timeout.json").read_text()))
    settle(template.cluster)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.attempt == 1
    assert "choose a template with a longer time limit" in job.tasks.get().reason
    assert job.targets.get().failed_with_task  # a user's Retry may still take it


# --- resubmission of a later attempt ----------------------------------------------------------------


#: a cluster that takes the submission: sbatch answers 901; each query of the first round trip finds nothing
SUBMITS = {"on_run": {"sbatch": "901\n"}, "on_batch": json.dumps({"meta": {}, "errors": [], "jobs": []})}


def test_a_later_attempt_submits_one_array_over_the_chosen_chunks(owner, template, monkeypatch, settings, fake_ssh):
    runner = fake_ssh(**SUBMITS)
    monkeypatch.setattr("jobs.background.enqueue.enqueue_submission", lambda job: None)
    settings.FFP_TEST_ALLOCATE_MB = {1: 400}  # attempt 1 only: not in attempt 2's script
    job = ended_job(owner, template)
    Target.objects.filter(job=job, index=2).update(status=TargetStatus.FAILED, failed_with_task=True)
    assert retry_failed(job, actor=owner)
    assert submit.submit_job(str(job.id)) == "901"
    job.refresh_from_db()
    assert job.status == JobStatus.PENDING and job.slurm_job_id == "901" and history(job)[1].slurm_job_id == "901"
    assert any(f"--name=ffp-{job.id}-a2" in a or f"ffp-{job.id}-a2" in a for a in runner.batches[0][1])
    root = job.folder.root
    rm = next(a for a in runner.commands if a[0] == "rm")
    assert rm[-2:] == [f"{root}/out/progress/task-1.json", f"{root}/out/progress/task-2.json"]
    script = runner.written[f"{root}/job-a2.sbatch"].decode()
    assert "--array=1-2" in script and f'--job-name="ffp-{job.id}-a2"' in script and "FFP_TEST_ALLOCATE_MB" not in script
    assert f"{root}/manifest.json" in script
    assert not Task.objects.filter(job=job).exclude(index__in=(0, 1, 2)).exists()  # no new Task rows


def test_the_test_allocation_reaches_only_the_named_attempt(owner, template, settings):
    job = make_job(owner, template, "5", tasks=1)
    assert "FFP_TEST_ALLOCATE_MB" not in render_script(submit.sbatch_spec(job, 1))
    settings.FFP_TEST_ALLOCATE_MB = {1: 400}
    assert "export FFP_TEST_ALLOCATE_MB=400" in render_script(submit.sbatch_spec(job, 1))


def test_submitted_at_is_fresh_for_the_new_attempt(owner, template, monkeypatch, fake_ssh):
    """The lost-job rule counts from the attempt's own submission, not the first one's."""
    fake_ssh(**SUBMITS)
    monkeypatch.setattr("jobs.background.enqueue.enqueue_submission", lambda job: None)
    job = ended_job(owner, template)
    Job.objects.filter(pk=job.pk).update(submitted_at=timezone.now() - timedelta(hours=2))
    assert retry_failed(job)
    submit.submit_job(str(job.id))
    job.refresh_from_db()
    assert timezone.now() - job.submitted_at < timedelta(minutes=1)


def damaged_folder_job(owner, template):
    """A folder job whose target 3 was damaged (the watcher's words for a file in the user's folder)."""
    from jobs.results.target_words import target_message
    from jobs.watcher.decide import target_fields
    from worker.progress import TargetRecord

    job = ended_job(owner, template)
    Job.objects.filter(pk=job.pk).update(target_folder="/srv/ffportal/storage/shoot",
                                         submitted_at=timezone.now() - timedelta(hours=1))
    job.refresh_from_db()
    record = TargetRecord(index=3, target="3.jpg", output="3.jpg", status="failed", message="3.jpg is truncated",
                          code="damaged", params={"name": "3.jpg"})
    fields = target_fields(record, job.target_folder)
    assert fields["message"] == ("3.jpg in /srv/ffportal/storage/shoot is damaged: export it again into the same "
                                 "folder, then choose Retry failed")
    assert "upload it again" in target_message("damaged", {"name": "3.jpg"}, "")  # an uploaded file: upload again
    Target.objects.filter(job=job, index=3).update(message=fields["message"], cluster_path="/srv/ffportal/storage/shoot/3.jpg")
    Target.objects.filter(job=job, index__in=(4, 5)).update(status=TargetStatus.DONE, failed_with_task=False)
    return job


def test_a_damaged_folder_file_still_the_same_is_not_retried_and_retry_says_why(owner, template, fake_ssh):
    from jobs.job.retry import retry_refusal

    job = damaged_folder_job(owner, template)
    before = int((timezone.now() - timedelta(days=2)).timestamp())
    runner = fake_ssh(on_run={"stat": f"{before} /srv/ffportal/storage/shoot/3.jpg\0"})
    assert not retry_failed(job, actor=owner)
    assert runner.commands[-1][:4] == ["stat", "--printf", "%Y %n\\0", "--"]
    assert retry_refusal(job) == ("1 damaged file is still the same: export it again into /srv/ffportal/storage/shoot "
                                  "first, then choose Retry failed.")
    job.refresh_from_db()
    assert job.attempt == 1
    r = session_client(owner).post(f"/jobs/{job.id}/retry", HTTP_ACCEPT_LANGUAGE="zh-hans", follow=True)
    assert "1 个损坏的文件仍然没有变化" in r.content.decode()


def test_a_damaged_folder_file_exported_again_is_retried(owner, template, fake_ssh):
    job = damaged_folder_job(owner, template)
    after = int(timezone.now().timestamp())
    fake_ssh(on_run={"stat": f"{after} /srv/ffportal/storage/shoot/3.jpg\0"})
    assert retry_failed(job, actor=owner)
    job.refresh_from_db()
    assert job.attempt == 2 and Target.objects.get(job=job, index=3).status == TargetStatus.WAITING
