"""A task whose computer died: Slurm requeues it (NODE_FAIL, JobRequeue=1) and the owner reads "a
cluster computer failed; the work continues on another", never "failed" nor "paused for urgent work".

The queue is REAL Slurm 24.11 output (tests/cluster/samples/24.11/squeue_tasks_node_failed.txt,
captured by hand: array 29's two tasks ran on ffp2411-n1, `scripts/cluster/newer.sh 24.11 kill-node 1`
killed every process of that node, and after SlurmdTimeout Slurm marked it down and requeued both:
PENDING, BeginTime, restart count 1, exactly what a preempted task shows). What tells the two apart is
the node the task last ran on: `sinfo` of the dead nodes, in the watcher's same round trip."""
import dataclasses
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from django.utils import translation

from cluster.slurm import dead_nodes_argv, parse_dead_nodes, parse_squeue_tasks
from jobs.watcher.decide import JobRow, SlurmAnswer, TargetChange, TargetRow, TaskChange, TaskRow, decide
from worker.progress import TargetRecord, TaskProgress

SAMPLES = Path(__file__).resolve().parents[1] / "cluster" / "samples" / "24.11"
QUEUE = {t.task_index: t for t in parse_squeue_tasks((SAMPLES / "squeue_tasks_node_failed.txt").read_text())}
NOW = datetime(2026, 12, 2, 4, 51, 10, tzinfo=timezone.utc)
FAILED_NODE = "a cluster computer failed; the work continues on another"
PAUSED = "paused to make room for urgent work; continues automatically"


def running_on(node: str, targets=()) -> JobRow:
    return JobRow(id="j", status="running", slurm_job_id="29", submitted_at=NOW - timedelta(minutes=2),
                  tasks=tuple(TaskRow(index=i, state="RUNNING", node=node, gpus=1) for i in (0, 1)),
                  targets=tuple(targets))


def reasons(decision) -> dict[int, str]:
    return {c.index: c.fields.get("reason") for c in decision.of(TaskChange)}


def test_the_watcher_asks_which_nodes_are_dead_and_reads_each_once():
    assert dead_nodes_argv() == ["sinfo", "--noheader", "--Node", "--states=down,fail,no_respond", "--format=%N"]
    # a node in two partitions is printed twice
    assert parse_dead_nodes("ffp2411-n1\nffp2411-n1\n") == frozenset({"ffp2411-n1"})
    assert parse_dead_nodes("") == frozenset()


def test_tasks_requeued_from_a_dead_node_say_their_computer_failed():
    answer = SlurmAnswer(queued=QUEUE, asked_accounting=False, dead_nodes=frozenset({"ffp2411-n1"}))
    decision = decide(running_on("ffp2411-n1"), answer, [], {}, NOW)
    assert reasons(decision) == {0: FAILED_NODE, 1: FAILED_NODE}
    assert all(c.fields["state"] == "PENDING" for c in decision.of(TaskChange))
    assert not any(type(c).__name__ in ("EndAttempt", "JobMove") for c in decision.changes)


def test_the_same_queue_with_every_node_well_is_urgent_work():
    answer = SlurmAnswer(queued=QUEUE, asked_accounting=False, dead_nodes=frozenset({"another-node"}))
    assert reasons(decide(running_on("ffp2411-n1"), answer, [], {}, NOW)) == {0: PAUSED, 1: PAUSED}


def test_it_keeps_saying_so_after_the_node_came_back_until_the_task_runs_again():
    waiting = JobRow(id="j", status="running", slurm_job_id="29", submitted_at=NOW - timedelta(minutes=2),
                     tasks=tuple(TaskRow(index=i, state="PENDING", node="ffp2411-n1", reason=FAILED_NODE)
                                 for i in (0, 1)))
    decision = decide(waiting, SlurmAnswer(queued=QUEUE, asked_accounting=False), [], {}, NOW + timedelta(minutes=1))
    assert reasons(decision) == {}  # nothing to change: still the same words


def test_the_photo_the_worker_was_stopped_on_waits_again_with_the_same_words_in_chinese_too():
    record = TaskProgress(job="j", task_index=0, targets=[
        TargetRecord(index=0, target="/in/0.jpg", output="0.jpg", status="done", seconds=1.0),
        TargetRecord(index=1, target="/in/1.jpg", output="1.jpg", status="failed", stopped_by_task_end=True,
                     message="stopped: the task hit its time limit or was cancelled", code="stopped_with_task")])
    targets = [TargetRow(index=0, task_index=0, status="running"), TargetRow(index=1, task_index=0, status="running")]
    answer = SlurmAnswer(queued=QUEUE, asked_accounting=False, dead_nodes=frozenset({"ffp2411-n1"}))
    for language, words in (("en", FAILED_NODE), ("zh-hans", "集群中的一台计算机出现故障；工作会在另一台上继续")):
        with translation.override(language):
            decision = decide(running_on("ffp2411-n1", targets), answer, [record], {}, NOW)
        fields = {c.index: c.fields for c in decision.of(TargetChange)}
        assert fields[0]["status"] == "done"
        assert fields[1]["status"] == "waiting" and fields[1]["message"] == words
        assert not fields[1].get("failed_with_task")
        assert reasons(decision)[0] == words


@pytest.mark.parametrize("dead", ["", "ffp2411-n2\n"])
def test_a_requeued_task_whose_node_is_well_waits_and_is_never_ended(dead):
    answer = SlurmAnswer(queued=QUEUE, asked_accounting=False, dead_nodes=parse_dead_nodes(dead))
    decision = decide(running_on("ffp2411-n1"), answer, [], {}, NOW)
    assert {(c.fields["state"], c.fields["reason"]) for c in decision.of(TaskChange)} == {("PENDING", PAUSED)}


def test_a_task_already_running_again_on_another_node_says_so_until_it_ends():
    # Slurm 26.05 reran a requeued task at once: the first cycle after the failure sees it RUNNING
    # on the other node, restart count 1, its old node down.
    rerun = dataclasses.replace(QUEUE[0], state="RUNNING", reason="None", node="ffp2411-n2")
    answer = SlurmAnswer(queued={0: rerun}, asked_accounting=False, dead_nodes=frozenset({"ffp2411-n1"}))
    decision = decide(running_on("ffp2411-n1"), answer, [], {}, NOW)
    assert [(c.index, c.fields.get("state"), c.fields["reason"], c.fields["node"]) for c in decision.of(TaskChange)] == [
        (0, None, FAILED_NODE, "ffp2411-n2")]
    # Later cycles, the node back or not: the same words while it runs; a plain run says nothing.
    moved = JobRow(id="j", status="running", slurm_job_id="29", submitted_at=NOW - timedelta(minutes=2),
                   tasks=(TaskRow(index=0, state="RUNNING", node="ffp2411-n2", reason=FAILED_NODE),))
    assert decide(moved, SlurmAnswer(queued={0: rerun}, asked_accounting=False), [], {}, NOW).of(TaskChange) == []
    fresh = dataclasses.replace(rerun, restarts=0)
    assert reasons(decide(running_on("ffp2411-n2"), SlurmAnswer(queued={0: fresh}, asked_accounting=False,
                                                                dead_nodes=frozenset({"ffp2411-n1"})), [], {}, NOW)) == {}
