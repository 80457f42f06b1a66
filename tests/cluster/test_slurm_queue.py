"""The watcher's text `squeue` (cluster/slurm/queue.py) against real Slurm 22.05 output.

Samples captured on the local cluster with the command `squeue_tasks_argv` builds:

    squeue_tasks_held.txt         `sbatch --hold --array=0-5 --gres=gpu:1` (3433) and a held plain job (3434)
    squeue_tasks_running.txt      `--array=0-4%2 --gres=gpu:1` (3610): 0 and 2 running, 1 exited 3, 3-4 throttled
    squeue_tasks_ended.txt        the same moments later: 3433 and 3434 cancelled while held, 3610 as above
    squeue_tasks_waiting.txt      `--array=0-4%2` on a busy cluster (3578): the scheduler's description
    squeue_tasks_none.txt         ids none of which is in the queue (999998,999999): exit 0, no line
    squeue_tasks_unknown_job.stderr  ONE id squeue does not know (999999): exit 1 and this line
    squeue_tasks_preempted.txt    (PreemptType=preempt/qos, PreemptMode=REQUEUE) a normal-QOS array 4791 of
                                  two 1-GPU tasks, its task 0 preempted by an urgent job; 4795 waiting behind

The StartTime and RestartCnt columns were added by hand to the first four captures (made before
the watcher asked for them: "N/A" for a task not given a node, 0 restarts); the preempted sample
was captured whole.
"""
from datetime import datetime, timezone

import pytest

from cluster import SlurmError, pending_reason
from cluster.slurm import parse_squeue_tasks, squeue_tasks_argv

from .test_slurm_parsers import sample


def rows(tasks):
    return [(t.job_id, t.task_index, t.state, t.reason, t.node, t.gpus) for t in tasks]


def test_it_asks_squeue_for_every_task_of_our_jobs_only():
    assert squeue_tasks_argv(["33", "34"]) == [
        "env", "TZ=UTC", "squeue", "--noheader", "--array", "--states=all", "--jobs=33,34",
        "--Format=ArrayJobID:|,ArrayTaskID:|,State:|,Reason:|,NodeList:|,tres-alloc:|,StartTime:|,RestartCnt:|"]


@pytest.mark.parametrize("bad", [[], ["33;rm -rf /"], ["33,34"], ["-1"], ["33 34"]])
def test_it_refuses_what_is_not_a_list_of_job_ids(bad):
    with pytest.raises(ValueError):
        squeue_tasks_argv(bad)


def test_a_held_array_is_one_pending_task_per_index():
    tasks = parse_squeue_tasks(sample("squeue_tasks_held.txt"))
    assert rows(tasks) == [("3433", i, "PENDING", "JobHeldUser", "", 0) for i in range(6)] + [
        ("3434", None, "PENDING", "JobHeldUser", "", 0)]  # not an array: no index, as in the JSON
    assert all(t.pending_array_range is None for t in tasks)
    assert pending_reason(tasks[0].reason) == "held (release it to let it start)"


def test_running_tasks_have_their_node_and_gpus_and_throttled_ones_their_reason():
    tasks = parse_squeue_tasks(sample("squeue_tasks_running.txt"))
    # What squeue --json said of the same array at the same moment, field for field.
    assert rows(tasks) == [
        ("3610", 0, "RUNNING", "None", "vm", 1),
        ("3610", 1, "FAILED", "NonZeroExitCode", "vm", 1),
        ("3610", 2, "RUNNING", "None", "vm", 1),
        ("3610", 3, "PENDING", "JobArrayTaskLimit", "", 0),  # tres-alloc shows its request: not given yet
        ("3610", 4, "PENDING", "JobArrayTaskLimit", "", 0),
    ]
    # How a task ended is sacct's to say: the queue's copy carries no exit code.
    assert all(t.exit_code is None and t.signal is None and t.elapsed_seconds is None for t in tasks)


def test_tasks_cancelled_while_held_stay_listed_as_cancelled():
    tasks = {(t.job_id, t.task_index): t for t in parse_squeue_tasks(sample("squeue_tasks_ended.txt"))}
    assert len(tasks) == 12
    assert {tasks[("3433", i)].state for i in range(6)} == {"CANCELLED"}
    assert (tasks[("3434", None)].state, tasks[("3434", None)].node) == ("CANCELLED", "")
    assert tasks[("3610", 1)].state == "FAILED"


def test_the_schedulers_description_of_waiting_for_resources_reads_as_resources():
    tasks = parse_squeue_tasks(sample("squeue_tasks_waiting.txt"))
    assert [t.task_index for t in tasks] == [0, 1, 2, 3, 4]
    assert {t.reason for t in tasks} == {"Resources"}  # squeue --json said "Resources" of the same job
    assert pending_reason(tasks[0].reason) == "waiting for a free GPU"
    other = parse_squeue_tasks("40|0|PENDING|ReqNodeNotAvail, UnavailableNodes:vm||cpu=1|N/A|0|\n")
    assert pending_reason(other[0].reason) == "waiting: the nodes are reserved or unavailable"


def test_none_of_the_jobs_in_the_queue_is_an_empty_answer():
    assert parse_squeue_tasks(sample("squeue_tasks_none.txt")) == []
    # One id squeue no longer knows: exit 1, yet an answer ("not in the queue"), not a failure.
    assert parse_squeue_tasks("", rc=1, stderr=sample("squeue_tasks_unknown_job.stderr")) == []


def test_squeue_that_did_not_answer_is_an_error_not_an_empty_queue():
    with pytest.raises(SlurmError, match="Unable to contact slurm controller"):
        parse_squeue_tasks("", rc=1, stderr="slurm_load_jobs error: Unable to contact slurm controller "
                                               "(connect failure)\n")


@pytest.mark.parametrize("line", [
    "3610|0|RUNNING|None|vm|cpu=1|",  # columns short: another format
    "JOBID|TASK|STATE|REASON|NODELIST|TRES|START_TIME|RESTARTS|",  # a header
    "3610|0|RUNNING|None|vm|cpu=1|N/A|0|extra|",
])
def test_it_refuses_lines_of_another_shape(line):
    with pytest.raises(SlurmError, match="unexpected shape"):
        parse_squeue_tasks(line + "\n")


def test_a_collapsed_pending_range_is_expanded_should_squeue_print_one():
    tasks = parse_squeue_tasks("33|[2-4%1]|PENDING|JobArrayTaskLimit||cpu=1|N/A|0|\n")
    assert [(t.task_index, t.pending_array_range) for t in tasks] == [(2, "2-4%1"), (3, "2-4%1"), (4, "2-4%1")]


def utc(text):
    return int(datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp())


def test_a_preempted_task_is_pending_again_with_a_restart_and_slurms_start_estimates_are_read():
    tasks = {(t.job_id, t.task_index): t for t in parse_squeue_tasks(sample("squeue_tasks_preempted.txt"))}
    preempted, still_running = tasks[("4791", 0)], tasks[("4791", 1)]
    assert (preempted.state, preempted.reason, preempted.restarts) == ("PENDING", "BeginTime", 1)
    assert preempted.start_time == utc("2026-12-01T04:32:10")  # held back two minutes after the requeue
    assert (still_running.state, still_running.restarts, still_running.start_time) == (
        "RUNNING", 0, utc("2026-12-01T04:30:05"))
    # The backfill scheduler's estimate for tasks waiting behind them.
    assert {tasks[("4795", i)].start_time for i in (0, 1)} == {utc("2026-12-01T04:46:00")}
    assert tasks[("4795", 0)].restarts == 0


def test_a_task_without_an_estimate_has_no_start_time():
    tasks = parse_squeue_tasks(sample("squeue_tasks_held.txt"))
    assert {t.start_time for t in tasks} == {None} and {t.restarts for t in tasks} == {0}
