"""`decide` (jobs/watcher/decide.py) as a table: rows the portal holds + what Slurm 22.05 said (REAL
captured output, tests/cluster/samples/) + progress records + log tails -> the changes.

No database and no SSH: what a cycle of the watcher would conclude, cycle after cycle.
"""
import dataclasses
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from cluster import parse_sacct, parse_squeue
from jobs.watcher.decide import (
    KILL_LINE_WAIT,
    LOST_AFTER,
    EndAttempt,
    FetchOutputs,
    JobMove,
    JobRow,
    SlurmAnswer,
    TargetChange,
    TargetRow,
    TaskChange,
    TaskRow,
    decide,
    expected_in_queue,
)
from worker.progress import TaskProgress

SAMPLES = Path(__file__).resolve().parents[1] / "cluster" / "samples" / "22.05"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)
KILL_LOG = (SAMPLES / "memkill_output.txt").read_text()
WORKER_ONLY_LOG = "2026-11-30 19:32:25,216 WARNING worker.testhooks: test hook: growing to 500 MB\n"


def sacct(name: str, codes: str | None = None) -> dict:
    text = (SAMPLES / name).read_text()
    code_text = (SAMPLES / codes).read_text() if codes else None
    return {t.task_index or 0: t for t in parse_sacct(text, code_text)}


def squeue(name: str, job_id: str) -> dict:
    return {t.task_index or 0: t for t in parse_squeue((SAMPLES / name).read_text(), job_ids=[job_id])}


TWO_KILLS = sacct("sacct_two_memkills.json", "sacct_two_memkills.txt")  # 103_0 and 103_1: FAILED 0:9


def job(tasks=2, state="RUNNING", status="running", targets=None, **task_fields) -> JobRow:
    rows = tuple(TaskRow(index=i, state=state, **task_fields) for i in range(tasks))
    return JobRow(id="j", status=status, slurm_job_id="103", submitted_at=NOW - timedelta(minutes=2),
                  tasks=rows, targets=tuple(targets or ()))


def with_rows(row: JobRow, decision) -> JobRow:
    """The rows as `apply` leaves them after `decision` (for the next cycle of a table)."""
    tasks = {t.index: t for t in row.tasks}
    for c in decision.of(TaskChange):
        tasks[c.index] = dataclasses.replace(tasks[c.index], **c.fields)
    return dataclasses.replace(row, tasks=tuple(tasks.values()))


def task_changes(decision) -> dict[int, dict]:
    return {c.index: c.fields for c in decision.of(TaskChange)}


# ---- memory kills: the line is read in the next round trip --------------------------------------

def test_two_tasks_killed_in_the_same_cycle_one_line_present_one_missing():
    row = job()
    # Cycle 1: both FAILED 0:9. Neither is recorded yet; both logs are asked for; the attempt goes on.
    first = decide(row, SlurmAnswer(accounted=TWO_KILLS), [], {}, NOW)
    assert task_changes(first) == {0: {"log_wait_since": NOW}, 1: {"log_wait_since": NOW}}
    assert sorted(first.logs_wanted) == [0, 1] and not first.of(EndAttempt)
    # Cycle 2: task 0's log has the line, task 1's not yet: 0 is OUT_OF_MEMORY, 1 still waits.
    row = with_rows(row, first)
    second = decide(row, SlurmAnswer(accounted=TWO_KILLS), [], {0: KILL_LOG, 1: WORKER_ONLY_LOG},
                    NOW + timedelta(seconds=3))
    changes = task_changes(second)
    assert changes[0]["state"] == "OUT_OF_MEMORY" and "ran out of memory" in changes[0]["reason"]
    assert 1 not in changes and second.logs_wanted == [1] and not second.of(EndAttempt)
    # Cycle 3: task 1's line arrived (one cycle late): both are memory kills; the attempt ended.
    row = with_rows(row, second)
    third = decide(row, SlurmAnswer(accounted=TWO_KILLS), [], {1: KILL_LOG}, NOW + timedelta(seconds=6))
    assert task_changes(third)[1]["state"] == "OUT_OF_MEMORY"
    assert third.of(EndAttempt) and not third.logs_wanted
    row = with_rows(row, third)
    assert [t.state for t in row.tasks] == ["OUT_OF_MEMORY", "OUT_OF_MEMORY"]
    # Cycle 4: sacct still says FAILED 0:9 and no log is read: the decision stands (no flip back).
    fourth = decide(row, SlurmAnswer(accounted=TWO_KILLS), [], {}, NOW + timedelta(seconds=9))
    assert task_changes(fourth) == {} and fourth.of(EndAttempt)


def test_a_sigkill_whose_line_never_comes_is_a_plain_failure_after_the_wait():
    row = with_rows(job(tasks=1), decide(job(tasks=1), SlurmAnswer(accounted=TWO_KILLS), [], {}, NOW))
    waiting = decide(row, SlurmAnswer(accounted=TWO_KILLS), [], {0: WORKER_ONLY_LOG}, NOW + KILL_LINE_WAIT / 2)
    assert task_changes(waiting) == {} and waiting.logs_wanted == [0]
    late = decide(row, SlurmAnswer(accounted=TWO_KILLS), [], {0: WORKER_ONLY_LOG},
                  NOW + KILL_LINE_WAIT + timedelta(seconds=1))
    fields = task_changes(late)[0]
    assert fields["state"] == "FAILED" and "signal 9" in fields["reason"] and fields["log_wait_since"] is None
    assert late.of(EndAttempt)


def test_a_failure_with_an_exit_code_is_decided_on_the_first_read_of_its_log():
    answer = SlurmAnswer(accounted=sacct("sacct_array_mixed.json", "sacct_array_mixed.txt"))  # 33_2 exit 3
    row = dataclasses.replace(job(tasks=4), slurm_job_id="33")
    first = decide(row, answer, [], {}, NOW)
    assert first.logs_wanted == [2] and task_changes(first)[2] == {"log_wait_since": NOW}
    second = decide(with_rows(row, first), answer, [], {2: "Traceback ...\n"}, NOW + timedelta(seconds=3))
    assert task_changes(second)[2]["state"] == "FAILED" and task_changes(second)[2]["exit_code"] == 3
    assert second.of(EndAttempt)


def test_a_gpu_out_of_memory_in_the_log_is_said_in_plain_words():
    answer = SlurmAnswer(accounted=sacct("sacct_array_mixed.json", "sacct_array_mixed.txt"))
    row = dataclasses.replace(job(tasks=4, log_wait_since=NOW), slurm_job_id="33")
    decision = decide(row, answer, [], {2: "RuntimeError: CUDA out of memory. Tried to allocate"}, NOW)
    assert task_changes(decision)[2]["reason"] == "ran out of GPU memory"


# ---- other ends -------------------------------------------------------------------------------

@pytest.mark.parametrize("state, reason", [("NODE_FAIL", "the compute node failed"),
                                           ("TIMEOUT", "hit the time limit; choose a template with a longer time limit"),
                                           ("CANCELLED", "cancelled")])
def test_other_ends_are_recorded_at_once_in_plain_words(state, reason):
    ended = {i: dataclasses.replace(t, state=state, signal=None) for i, t in TWO_KILLS.items()}
    decision = decide(job(), SlurmAnswer(accounted=ended), [], {}, NOW)
    assert {i: (f["state"], f["reason"]) for i, f in task_changes(decision).items()} == {0: (state, reason),
                                                                                      1: (state, reason)}
    assert decision.of(EndAttempt) and not decision.logs_wanted


def test_a_timeout_from_real_output():
    answer = SlurmAnswer(accounted=sacct("sacct_timeout.json", "sacct_timeout.txt"))
    decision = decide(job(tasks=1), answer, [], {}, NOW)
    assert task_changes(decision)[0]["state"] == "TIMEOUT" and decision.of(EndAttempt)


# ---- queue and accounting disagree, or do not answer -------------------------------------------

def test_squeue_is_fresher_for_waiting_and_running_tasks():
    answer = SlurmAnswer(queued=squeue("squeue_array_running.json", "29"),
                         accounted=sacct("sacct_array_running.json"))
    row = dataclasses.replace(job(tasks=4, state="PENDING", status="pending"), slurm_job_id="29")
    decision = decide(row, answer, [], {}, NOW)
    changes = task_changes(decision)
    assert changes[0]["state"] == "RUNNING" and changes[2]["reason"] == "waiting for a free GPU"
    assert decision.of(JobMove) == [JobMove("started", {"started_at": NOW})]


def test_a_task_still_completing_in_squeue_has_ended_when_sacct_says_so():
    completing = {i: dataclasses.replace(t, state="COMPLETING") for i, t in TWO_KILLS.items()}
    ended = {i: dataclasses.replace(t, state="COMPLETED", signal=None, exit_code=0) for i, t in TWO_KILLS.items()}
    decision = decide(job(), SlurmAnswer(queued=completing, accounted=ended), [], {}, NOW)
    assert {f["state"] for f in task_changes(decision).values()} == {"COMPLETED"} and decision.of(EndAttempt)


def test_a_task_gone_from_squeue_but_not_yet_in_sacct_keeps_its_state():
    running = {0: dataclasses.replace(TWO_KILLS[0], state="RUNNING", signal=None)}
    decision = decide(job(), SlurmAnswer(accounted=running), [], {}, NOW)  # task 1 in neither
    assert 1 not in task_changes(decision) and not decision.of(EndAttempt)


def test_a_task_waiting_for_its_log_that_left_both_keeps_waiting():
    row = job(log_wait_since=NOW)
    running = {0: dataclasses.replace(TWO_KILLS[0], state="RUNNING", signal=None)}
    decision = decide(row, SlurmAnswer(accounted=running), [], {}, NOW)
    assert 1 in decision.logs_wanted and not decision.of(EndAttempt)


def test_a_requeued_task_runs_again():
    row = job(state="NODE_FAIL")
    requeued = {i: dataclasses.replace(t, state="PENDING", signal=None, reason="BeginTime") for i, t in TWO_KILLS.items()}
    decision = decide(row, SlurmAnswer(accounted=requeued), [], {}, NOW)
    assert {f["state"] for f in task_changes(decision).values()} == {"PENDING"} and not decision.of(EndAttempt)


def test_a_stale_squeue_never_undoes_an_end():
    row = job(state="COMPLETED")
    stale = {i: dataclasses.replace(t, state="RUNNING", signal=None) for i, t in TWO_KILLS.items()}
    ended = {i: dataclasses.replace(t, state="COMPLETED", signal=None, exit_code=0) for i, t in TWO_KILLS.items()}
    decision = decide(row, SlurmAnswer(queued=stale, accounted=ended), [], {}, NOW)
    assert task_changes(decision) == {} and decision.of(EndAttempt)


@pytest.mark.parametrize("answered, age, lost", [(True, LOST_AFTER + timedelta(seconds=1), True),
                                                 (True, LOST_AFTER - timedelta(seconds=1), False),
                                                 (False, LOST_AFTER * 10, False)])
def test_a_job_unknown_to_both_is_lost_only_when_both_answered_long_after_submission(answered, age, lost):
    row = dataclasses.replace(job(), submitted_at=NOW - age)
    decision = decide(row, SlurmAnswer(answered=answered), [], {}, NOW)
    assert (decision.of(JobMove) == [JobMove("lose", {"finished_at": NOW})]) is lost


def test_slurmctld_answering_with_an_error_changes_nothing():
    # squeue failed (rc != 0): poll passes answered=False and what sacct alone said.
    decision = decide(job(), SlurmAnswer(accounted={}, answered=False), [], {}, NOW)
    assert decision.changes == []


# ---- cycles that did not ask sacct about the job ------------------------------------------------

def test_the_cluster_compares_only_tasks_the_portal_believes_queued_or_running():
    row = dataclasses.replace(job(tasks=0), tasks=(
        TaskRow(0, state="COMPLETED"), TaskRow(1, state="RUNNING"), TaskRow(2, state="PENDING"),
        TaskRow(3, state="RUNNING", log_wait_since=NOW), TaskRow(4, state="OUT_OF_MEMORY")))
    assert expected_in_queue(row) == [1, 2, 3]  # 3 waits for its log: sacct's FAILED is read again


def test_a_job_missing_from_the_queue_is_never_lost_on_a_cycle_that_did_not_ask_sacct():
    row = dataclasses.replace(job(), submitted_at=NOW - LOST_AFTER * 10)
    assert decide(row, SlurmAnswer(asked_accounting=False), [], {}, NOW).changes == []


def test_a_cycle_that_did_not_ask_sacct_records_no_end_from_the_queue_alone():
    cancelled = squeue("squeue_finished.json", "29")  # squeue's copy of ended tasks: no exit codes
    row = dataclasses.replace(job(tasks=4), slurm_job_id="29")
    decision = decide(row, SlurmAnswer(queued=cancelled, asked_accounting=False), [], {}, NOW)
    assert task_changes(decision) == {} and not decision.of(EndAttempt)


def test_squeue_alone_still_moves_waiting_and_running_tasks():
    row = dataclasses.replace(job(tasks=4, state="PENDING", status="pending"), slurm_job_id="29")
    answer = SlurmAnswer(queued=squeue("squeue_array_running.json", "29"), asked_accounting=False)
    decision = decide(row, answer, [], {}, NOW)
    assert task_changes(decision)[0]["state"] == "RUNNING"
    assert decision.of(JobMove) == [JobMove("started", {"started_at": NOW})]


def test_an_attempt_whose_ends_were_recorded_earlier_ends_when_its_outputs_are_in_without_sacct():
    # The tasks' ends came from sacct in an earlier cycle; the job has left squeue since, and sacct
    # is not asked about a job with no task left to compare: the fetched outputs end the attempt.
    row = job(tasks=1, state="COMPLETED", targets=[TargetRow(0, 0, status="done", has_output=True)])
    decision = decide(row, SlurmAnswer(asked_accounting=False), [], {}, NOW)
    assert decision.of(EndAttempt) and not decision.of(JobMove)
    waiting = job(tasks=1, state="COMPLETED", targets=[TargetRow(0, 0, status="done", fetch_asked_at=NOW)])
    assert not decide(waiting, SlurmAnswer(asked_accounting=False), [], {}, NOW).of(EndAttempt)


# ---- progress records and outputs --------------------------------------------------------------

def record(task_index, targets):
    return TaskProgress.from_dict({"job": "j", "task_index": task_index, "targets": targets})


def test_targets_follow_the_workers_records_and_outputs_are_fetched_before_the_end():
    targets = [TargetRow(index=0, task_index=0), TargetRow(index=1, task_index=1)]
    row = job(targets=targets)
    done = {i: dataclasses.replace(t, state="COMPLETED", signal=None, exit_code=0) for i, t in TWO_KILLS.items()}
    records = [record(0, [{"index": 0, "target": "/a", "output": "a.jpg", "status": "done"}]),
               record(1, [{"index": 1, "target": "/b", "output": "b.jpg", "status": "failed",
                           "message": "stopped before this target finished", "stopped_by_task_end": True}])]
    decision = decide(row, SlurmAnswer(accounted=done), records, {}, NOW)
    assert {c.index: c.fields["status"] for c in decision.of(TargetChange)} == {0: "done", 1: "failed"}
    assert decision.of(TargetChange)[1].fields["failed_with_task"] is True
    assert decision.of(FetchOutputs) == [FetchOutputs((0,))]
    assert not decision.of(EndAttempt)  # "completed" means the results can be downloaded
    fetched = dataclasses.replace(row, targets=(TargetRow(0, 0, status="done", has_output=True),
                                                TargetRow(1, 1, status="failed", failed_with_task=True)))
    assert decide(fetched, SlurmAnswer(accounted=done), records, {}, NOW).of(EndAttempt)


def test_an_outstanding_fetch_is_asked_for_again_only_after_a_while():
    done = {0: dataclasses.replace(TWO_KILLS[0], state="COMPLETED", signal=None, exit_code=0)}
    asked = job(tasks=1, targets=[TargetRow(0, 0, status="done", fetch_asked_at=NOW - timedelta(seconds=10))])
    assert not decide(asked, SlurmAnswer(accounted=done), [], {}, NOW).of(FetchOutputs)
    long_ago = job(tasks=1, targets=[TargetRow(0, 0, status="done", fetch_asked_at=NOW - timedelta(hours=1))])
    assert decide(long_ago, SlurmAnswer(accounted=done), [], {}, NOW).of(FetchOutputs) == [FetchOutputs((0,))]


def test_a_task_given_a_computer_that_is_being_woken_waits_saying_so_and_when_it_should_start():
    """Power saving: Slurm gave the task a powered-down node and runs ResumeProgram; squeue says
    CONFIGURING (its StartTime: when it was given the node). The job is not "running" yet."""
    from cluster import SlurmTask
    from jobs.watcher.decide import ExpectedStart

    given = int((NOW - timedelta(seconds=20)).timestamp())
    queued = {0: SlurmTask("103", 0, "CONFIGURING", node="ffp2605-n2", start_time=given),
              1: SlurmTask("103", 1, "PENDING", reason="Resources")}
    row = job(state="PENDING", status="pending")
    decision = decide(row, SlurmAnswer(queued=queued, accounted={}, boot_seconds=120), [], {}, NOW)
    changes = {c.index: c.fields for c in decision.of(TaskChange)}
    assert changes[0]["state"] == "CONFIGURING"
    assert changes[0]["reason"] == "starting a cluster computer, about 2 minutes"
    assert not decision.of(JobMove)  # nothing runs yet: the job is still waiting
    assert [c.when for c in decision.of(ExpectedStart)] == [NOW + timedelta(seconds=100)]  # given + 120 s boot
