"""The watcher's decisions, from REAL captured Slurm 22.05 output, through a fake SSH runner.

The fake replaces only the one seam (`cluster.runner_for`); parsing, state mapping and the
job's final state are the real code. End-to-end runs on the real cluster live in tests/e2e.
"""
import json
import tempfile
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from cluster import parse_squeue
from cluster.slurm.accounting import STILL_QUEUED_STATES
from jobs.models import ClusterProfile, Job, JobStatus, Target, TargetStatus, Task
from jobs.watcher import poll as watcher
from tests.fake_ssh import FakeSSH, program, run_here

SAMPLES = Path(__file__).resolve().parents[1] / "cluster" / "samples" / "22.05"
EMPTY_SQUEUE = (SAMPLES / "squeue_empty.json").read_text()


def squeue_text(json_text: str, job_ids: list[str]) -> str:
    """What `squeue_tasks_argv(job_ids)` prints of the queue a canned `squeue --json` shows: one
    line per task of those jobs only (the text squeue honours --jobs). The text format itself is
    read from real output in tests/cluster/test_slurm_queue.py."""
    return "".join(f"{t.job_id}|{'N/A' if t.task_index is None else t.task_index}|{t.state}|{t.reason}|{t.node}|"
                   f"cpu=1{f',gres/gpu={t.gpus}' if t.gpus else ''}|N/A|0|\n"
                   for t in parse_squeue(json_text, job_ids=job_ids))


class CannedSlurm:
    """Answers the watcher's run_batch([squeue, accounting query, find progress, sinfo, tail...])
    with canned texts: a responder for tests/fake_ssh.py's FakeSSH (the `fake` fixture installs it).

    The watcher's `squeue` gets the tasks of the jobs it asked about in the canned `squeue --json`,
    as text; or `squeue_failure` (exit status, stderr) when set; `sinfo` names `dead_nodes`. The accounting query (`sh -c ...`)
    runs for real on this machine, with stand-in `squeue` and `sacct` programs: `squeue` lists the
    tasks the canned queue shows queued or running, `sacct` prints the canned texts. `accounted`
    records the jobs each cycle asked sacct about. A fetched file holds `output`.
    """

    def __init__(self, sacct="", codes="", progress="", squeue=EMPTY_SQUEUE, log_tail="",
                 squeue_failure=None, dead_nodes="", output=b"\xff\xd8 swapped"):
        self.answers = {"squeue": squeue, "sacct": sacct, "codes": codes, "find": progress, "sinfo": dead_nodes,
                        "date": "", "true": ""}  # no clock: every cycle reads every record
        self.log_tail = log_tail
        self.squeue_failure = squeue_failure
        self.output = output
        self.accounted = []

    def __call__(self, argv):
        name = program(argv)  # `env TZ=UTC squeue ...` runs squeue
        if name == "sh":
            return self._accounting(argv)
        if name == "squeue":
            return self._queue(argv)
        return self.log_tail if name == "tail" else self.answers[name]

    def _queue(self, argv):
        if self.squeue_failure:
            rc, stderr = self.squeue_failure
            return rc, "", stderr
        ids = next(a for a in argv if a.startswith("--jobs=")).split("=", 1)[1].split(",")
        return squeue_text(self.answers["squeue"], ids)

    def _accounting(self, argv):
        with tempfile.TemporaryDirectory() as tmp:
            bin_dir = Path(tmp)
            queued = [f"{t.job_id}_{t.task_index}" if t.task_index is not None else t.job_id
                      for t in parse_squeue(self.answers["squeue"]) if t.state in STILL_QUEUED_STATES]
            for name, text in (("queued", "\n".join(queued)), ("sacct.json", self.answers["sacct"]),
                               ("codes.txt", self.answers["codes"])):
                (bin_dir / name).write_text(text)
            programs = {"squeue": f'cat "{tmp}/queued"; echo',
                        "sacct": f'echo "$*" >> "{tmp}/asked"; case "$*" in *--json*) cat "{tmp}/sacct.json" ;; '
                                 f'*) cat "{tmp}/codes.txt" ;; esac'}
            for name, body in programs.items():
                (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
                (bin_dir / name).chmod(0o755)
            done = run_here(argv, env={"PATH": f"{tmp}:/usr/bin:/bin"}, timeout=30)
            asked = (bin_dir / "asked").read_text().split() if (bin_dir / "asked").exists() else []
        jobs = sorted({a.split("=", 1)[1] for a in asked if a.startswith("--jobs=")})
        self.accounted.append(",".join(jobs))
        return done


def make_job(owner, template, slurm_id, tasks, targets_per_task=1, **fields):
    job = Job.objects.create(owner=owner, template=template, template_snapshot=template.snapshot().to_json(),
                             cluster=template.cluster, status=JobStatus.RUNNING, slurm_job_id=slurm_id,
                             submitted_at=timezone.now() - timedelta(minutes=1), total=tasks * targets_per_task,
                             **fields)
    for n in range(tasks):
        Task.objects.create(job=job, index=n, state="RUNNING")
        for k in range(targets_per_task):
            i = n * targets_per_task + k
            Target.objects.create(job=job, index=i, name=f"{i}.jpg", output_name=f"{i}.jpg", task_index=n)
    return job


def record(job, task_index, targets):
    doc = {"version": 1, "job": str(job.id), "task_index": task_index, "state": "finished", "targets": targets}
    path = job.folder.progress_record(task_index)
    return f"{path}\t{json.dumps(doc)}\n"


def done(i):
    return {"index": i, "target": f"/in/{i}.jpg", "output": f"{i}.jpg", "status": "done", "faces_found": 1, "faces_swapped": 1,
            "seconds": 0.2, "message": ""}


def settle(profile, cycles: int = 3) -> None:
    """Poll as the watcher's loop would: a task seen FAILED has its log read on the next cycle (in
    that cycle's one round trip), and a job ends once its outputs are fetched, so an ended array
    settles within three cycles."""
    for _ in range(cycles):
        watcher.poll_profile(profile)


#: what a `run` gets from the watcher's fake cluster: a cycle is one round trip
ONE_EXEC = AssertionError("the watcher makes ONE exec per cycle (run_batch), not run()")


@pytest.fixture
def fake(fake_ssh, monkeypatch, inline_rq):
    """`fake(slurm)`: install a FakeSSH answering each cycle's batch with `slurm` (a CannedSlurm)
    as the one SSH seam and return it; RQ tasks (output fetches) run inline. The watcher starts as
    a new process would: the every-job accounting is due at once."""
    monkeypatch.setattr(watcher, "_last_full_accounting", {})

    def install(slurm: CannedSlurm) -> FakeSSH:
        return fake_ssh(on_run=ONE_EXEC, on_batch=slurm, serve=slurm.output)

    return install


def test_it_polls_every_active_job_in_one_round_trip(fake, owner, template):
    slurm = CannedSlurm()
    runner = fake(slurm)
    for sid in ("101", "102", "103"):
        make_job(owner, template, sid, tasks=1)
    watcher.poll_profile(template.cluster)
    assert len(runner.batches) == 1
    squeue, accounting, clock, find, changed, sinfo = runner.batches[0]
    assert squeue[:3] == ["env", "TZ=UTC", "squeue"] and accounting[0] == "sh" and find[0] == "find"
    assert clock[0] == "date" and changed == ["true"]  # new to this watcher: every record is read
    assert sinfo[:4] == ["sinfo", "--noheader", "--Node", "--states=down,fail,no_respond"]
    assert slurm.accounted == ["101,102,103"]


@pytest.mark.parametrize("language, words, reason", [
    ("", "1 of 4 photos and videos failed", "exit code 3"),
    ("zh-hans", "4 个照片和视频中有 1 个失败", "退出码 3"),  # started from a Chinese page: written in Chinese
])
def test_it_ends_partially_failed_when_one_task_failed(fake, owner, template, language, words, reason):
    job = make_job(owner, template, "33", tasks=4)
    Job.objects.filter(pk=job.pk).update(language=language)
    job.refresh_from_db()
    progress = "".join(record(job, n, [done(n)]) for n in (0, 1, 3))
    progress += record(job, 2, [{**done(2), "status": "failed", "faces_swapped": 0,
                                 "message": "2.jpg is truncated or corrupt (broken data stream)",
                                 "code": "damaged", "params": {"name": "2.jpg"}}])
    runner = fake(CannedSlurm(sacct=(SAMPLES / "sacct_array_mixed.json").read_text(),
                              codes=(SAMPLES / "sacct_array_mixed.txt").read_text(), progress=progress))
    watcher.poll_profile(template.cluster)
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING and job.tasks.get(index=2).state == "RUNNING"  # its log is read next
    assert [argv[0] for argv in runner.batches[-1]] == ["env", "sh", "date", "find", "true", "sinfo"]
    watcher.poll_profile(template.cluster)
    assert [argv[0] for argv in runner.batches[-1]] == ["env", "sh", "date", "find", "true", "sinfo", "tail"]
    assert runner.batches[-1][-1][-1] == job.folder.log("33", 2)
    job.refresh_from_db()
    assert job.status == JobStatus.PARTIALLY_FAILED
    assert (job.done, job.failed) == (3, 1) and words in job.error
    task2 = job.tasks.get(index=2)
    assert task2.state == "FAILED" and task2.exit_code == 3  # from the text sacct: the JSON loses it
    assert reason in task2.reason
    # the worker's sentence, named by its code, in the job's language
    assert job.targets.get(index=2).message == {
        "": "2.jpg is damaged or cut off; export it again or upload it again",
        "zh-hans": "2.jpg 已损坏或不完整；请重新导出或重新上传"}[language]
    assert sorted(runner.fetched) == sorted(job.folder.output(f"{i}.jpg") for i in (0, 1, 3))
    assert all(t.output_file for t in job.targets.filter(status=TargetStatus.DONE))


def test_it_reads_a_memory_kill_as_out_of_memory_not_failed(fake, owner, template):
    template.max_mem = template.mem  # at its ceiling: not retried automatically (tests/jobs/test_retry.py)
    template.save()
    job = make_job(owner, template, "37", tasks=1)
    fake(CannedSlurm(sacct=(SAMPLES / "sacct_memkill.json").read_text(),
                     log_tail=(SAMPLES / "memkill_output.txt").read_text()))
    settle(template.cluster)
    job.refresh_from_db()
    task = job.tasks.get()
    assert task.state == "OUT_OF_MEMORY" and "ran out of memory" in task.reason
    assert job.status == JobStatus.FAILED
    target = job.targets.get()
    assert target.status == TargetStatus.FAILED and "ran out of memory" in target.message


def test_it_explains_a_timeout_in_plain_words(fake, owner, template):
    job = make_job(owner, template, "32", tasks=1)
    fake(CannedSlurm(sacct=(SAMPLES / "sacct_timeout.json").read_text()))
    settle(template.cluster)
    job.refresh_from_db()
    assert job.tasks.get().state == "TIMEOUT"
    assert "time limit" in job.tasks.get().reason and job.status == JobStatus.FAILED


def test_it_ends_cancelled_and_keeps_what_was_done(fake, owner, template):
    job = make_job(owner, template, "29", tasks=4, cancel_requested=True)
    fake(CannedSlurm(sacct=(SAMPLES / "sacct_cancelled.json").read_text(), progress=record(job, 0, [done(0)])))
    settle(template.cluster)
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED and job.done == 1
    assert job.targets.get(index=0).output_file


def test_a_job_gone_from_squeue_is_not_assumed_done(fake, owner, template):
    job = make_job(owner, template, "4242", tasks=1)
    fake(CannedSlurm(sacct=json.dumps({"meta": {}, "errors": [], "jobs": []})))
    watcher.poll_profile(template.cluster)
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING  # recently submitted: accounting may lag, wait
    Job.objects.filter(pk=job.pk).update(submitted_at=timezone.now() - timedelta(minutes=30))
    watcher.poll_profile(template.cluster)
    job.refresh_from_db()
    assert job.status == JobStatus.LOST and "no longer knows this job" in job.error


def test_a_job_squeue_no_longer_knows_is_not_in_the_queue(fake, owner, template):
    # 22.05 asked about ONE job it no longer holds: exit 1, "Invalid job id specified". That is an
    # answer: with sacct not knowing the job either, long after submission, the job is lost.
    job = make_job(owner, template, "4242", tasks=1)
    Job.objects.filter(pk=job.pk).update(submitted_at=timezone.now() - timedelta(minutes=30))
    fake(CannedSlurm(sacct=json.dumps({"meta": {}, "errors": [], "jobs": []}),
                     squeue_failure=(1, (SAMPLES / "squeue_tasks_unknown_job.stderr").read_text())))
    watcher.poll_profile(template.cluster)
    job.refresh_from_db()
    assert job.status == JobStatus.LOST


def test_a_job_is_never_lost_while_slurmctld_does_not_answer(fake, owner, template):
    job = make_job(owner, template, "4242", tasks=1)
    Job.objects.filter(pk=job.pk).update(submitted_at=timezone.now() - timedelta(minutes=30))
    fake(CannedSlurm(sacct=json.dumps({"meta": {}, "errors": [], "jobs": []}),
                     squeue_failure=(1, "slurm_load_jobs error: Unable to contact slurm controller "
                                        "(connect failure)\n")))
    watcher.poll_profile(template.cluster)
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING and not job.error


def test_it_records_an_unreachable_cluster_and_changes_no_job(fake_ssh, owner, template):
    job = make_job(owner, template, "33", tasks=1)
    fake_ssh.unreachable("cannot reach the cluster at 127.0.0.1:2222: connection refused")
    result = watcher.poll_profile(template.cluster)
    assert "connection refused" in result.error
    profile = ClusterProfile.objects.get(pk=template.cluster.pk)
    assert profile.unreachable_since is not None and "connection refused" in profile.last_error
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING


# ---- sacct only for jobs with a task that left the queue ----------------------------------------

def test_while_every_task_is_queued_the_watcher_follows_the_queue_without_sacct(fake, owner, template):
    job = make_job(owner, template, "29", tasks=4)
    slurm = CannedSlurm(squeue=(SAMPLES / "squeue_array_running.json").read_text(),
                        sacct=(SAMPLES / "sacct_array_running.json").read_text())
    runner = fake(slurm)
    watcher.poll_profile(template.cluster)  # a freshly started watcher asks sacct about every job
    Task.objects.filter(job=job).update(state="PENDING", reason="")
    result = watcher.poll_profile(template.cluster)
    assert slurm.accounted == ["29", ""] and result.accounted == 0
    assert len(runner.batches) == 2  # still one exec per cycle
    states = dict(job.tasks.values_list("index", "state"))
    assert states == {0: "RUNNING", 1: "RUNNING", 2: "PENDING", 3: "PENDING"}
    assert job.tasks.get(index=2).reason == "waiting for a free GPU"


def test_a_task_that_left_the_queue_is_read_from_sacct_in_the_same_cycle(fake, owner, template):
    job = make_job(owner, template, "29", tasks=4, cancel_requested=True)
    slurm = CannedSlurm(squeue=(SAMPLES / "squeue_array_running.json").read_text(),
                        sacct=(SAMPLES / "sacct_array_running.json").read_text())
    runner = fake(slurm)
    settle(template.cluster, cycles=2)
    assert slurm.accounted[-1] == ""
    slurm.answers.update(squeue=(SAMPLES / "squeue_finished.json").read_text(),
                          sacct=(SAMPLES / "sacct_cancelled.json").read_text(),
                          codes=(SAMPLES / "sacct_cancelled.txt").read_text())
    watcher.poll_profile(template.cluster)
    assert slurm.accounted[-1] == "29" and len(runner.batches) == 3
    assert set(job.tasks.values_list("state", flat=True)) == {"CANCELLED"}
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED


def test_on_the_slower_beat_sacct_is_asked_about_every_job(fake, owner, template, monkeypatch):
    make_job(owner, template, "29", tasks=4)
    slurm = CannedSlurm(squeue=(SAMPLES / "squeue_array_running.json").read_text(),
                        sacct=(SAMPLES / "sacct_array_running.json").read_text())
    runner = fake(slurm)
    settle(template.cluster, cycles=2)
    assert slurm.accounted == ["29", ""]
    monkeypatch.setattr(watcher, "ACCOUNTING_EVERY", 0.0)  # the beat is due (a task requeued after its end shows only there)
    watcher.poll_profile(template.cluster)
    assert slurm.accounted[-1] == "29" and len(runner.batches) == 3
