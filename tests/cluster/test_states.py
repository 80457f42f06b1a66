"""State words, memory kills and the plain-language reasons users see."""
from pathlib import Path

import pytest

from cluster import (
    ACTIVE_STATES,
    TERMINAL_STATES,
    SlurmTask,
    base_state,
    effective_state,
    is_memory_kill,
    is_terminal,
    parse_sacct,
    parse_squeue,
    pending_reason,
    plain_reason,
)

SAMPLES = Path(__file__).parent / "samples" / "22.05"
MEMKILL_LOG = (SAMPLES / "memkill_output.txt").read_text()


def task(state, **kw):
    return SlurmTask(job_id="7", task_index=0, state=state, **kw)


@pytest.mark.parametrize("raw, base", [
    ("RUNNING", "RUNNING"), ("CANCELLED by 1001", "CANCELLED"), ("cancelled", "CANCELLED"),
    ("RUNNING+COMPLETING", "RUNNING"), (["PENDING", "REQUEUED"], "PENDING"),
    ("OUT_OF_MEMORY", "OUT_OF_MEMORY"), ("COMPLETING", "COMPLETING"), ("", "UNKNOWN"),
])
def test_it_finds_the_base_state(raw, base):
    assert base_state(raw) == base


@pytest.mark.parametrize("state, terminal", [
    ("COMPLETED", True), ("FAILED", True), ("CANCELLED", True), ("TIMEOUT", True),
    ("OUT_OF_MEMORY", True), ("NODE_FAIL", True), ("PREEMPTED", True), ("BOOT_FAIL", True),
    ("DEADLINE", True), ("CANCELLED by 0", True),
    ("PENDING", False), ("RUNNING", False), ("COMPLETING", False), ("SUSPENDED", False),
    ("REQUEUED", False), ("CONFIGURING", False), ("SOMETHING_NEW", False),
])
def test_it_tells_terminal_states(state, terminal):
    assert is_terminal(state) is terminal


def test_it_keeps_the_two_sets_apart():
    assert not TERMINAL_STATES & ACTIVE_STATES


def test_it_recognises_the_jobacct_memory_kill_from_the_real_samples():
    (killed,) = parse_sacct((SAMPLES / "sacct_memkill.json").read_text())
    assert is_memory_kill(killed, MEMKILL_LOG)
    assert effective_state(killed, MEMKILL_LOG) == "OUT_OF_MEMORY"
    assert plain_reason(killed, MEMKILL_LOG) == \
        "ran out of memory (stopped by the cluster for using more than the template's memory)"
    # Same record without the log: a plain failure by SIGKILL, not guessed to be memory.
    assert effective_state(killed) == "FAILED"
    assert plain_reason(killed) == "was stopped by the system (signal 9)"
    # squeue's view of the same job agrees.
    in_queue = [t for t in parse_squeue((SAMPLES / "squeue_finished.json").read_text()) if t.job_id == "37"]
    assert effective_state(in_queue[0], MEMKILL_LOG) == "OUT_OF_MEMORY"


def test_it_reports_cgroup_out_of_memory():
    oom = task("OUT_OF_MEMORY")
    assert is_memory_kill(oom) and effective_state(oom) == "OUT_OF_MEMORY"
    assert plain_reason(oom) == "ran out of memory"


def test_it_does_not_call_a_scancel_a_memory_kill():
    cancelled = task("CANCELLED", signal=15)
    assert not is_memory_kill(cancelled, "Exceeded job memory limit")
    assert effective_state(task("COMPLETED"), MEMKILL_LOG) == "COMPLETED"


@pytest.mark.parametrize("kw, log, reason", [
    (dict(state="TIMEOUT"), "", "hit the time limit; choose a template with a longer time limit"),
    (dict(state="NODE_FAIL"), "", "the compute node failed"),
    (dict(state="CANCELLED", signal=15), "", "cancelled"),
    (dict(state="PREEMPTED"), "", "was paused for more urgent work"),
    (dict(state="BOOT_FAIL"), "", "the compute node failed to start"),
    (dict(state="DEADLINE"), "", "could not finish before its deadline"),
    (dict(state="FAILED", exit_code=1), "", "some photos or videos failed (see each one's message)"),
    (dict(state="FAILED", exit_code=2), "", "the worker could not start on the compute node (an admin can read why in the task's log)"),
    (dict(state="FAILED", exit_code=1),
     "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB", "ran out of GPU memory"),
    (dict(state="FAILED", exit_code=2), "onnxruntime: Failed to allocate: out of memory",
     "ran out of GPU memory"),
    (dict(state="FAILED", exit_code=255),  # Apptainer 1.4.5's words, the image removed after submission
     "FATAL:   could not open image /srv/ffportal/images/worker.sif: failed to retrieve path for "
     "/srv/ffportal/images/worker.sif: lstat /srv/ffportal/images/worker.sif: no such file or directory\n",
     "the worker's container could not start on the compute node (an admin can read why in the task's log)"),
    (dict(state="FAILED", exit_code=255), "INFO:    fuse2fs not found\nFATAL:   container creation failed: "
     "image driver mount failure\n",
     "the worker's container could not start on the compute node (an admin can read why in the task's log)"),
    (dict(state="FAILED", exit_code=255), "", "failed (exit code 255; an admin can read why in the task's log)"),
    (dict(state="FAILED", exit_code=143), "", "was stopped before it finished"),
    (dict(state="FAILED", exit_code=7), "", "failed (exit code 7; an admin can read why in the task's log)"),
    (dict(state="FAILED"), "", "failed (an admin can read why in the task's log)"),  # 22.05's JSON lost the code
    (dict(state="FAILED", reason="BadConstraints"), "",
     "the template asks for resources the cluster does not have"),
    (dict(state="COMPLETED", exit_code=0), "", ""),
    (dict(state="RUNNING"), "", ""),
    (dict(state="PENDING", reason="Resources"), "", "waiting for a free GPU"),
])
def test_it_says_what_happened_in_plain_words(kw, log, reason):
    state = kw.pop("state")
    assert plain_reason(task(state, **kw), log) == reason


@pytest.mark.parametrize("reason, words", [
    ("Resources", "waiting for a free GPU"),
    ("Priority", "waiting for other jobs ahead in the queue"),
    ("Reservation", "waiting for your GPU booking to start"),
    ("ReqNodeNotAvail, May be reserved for other job", "waiting: the nodes are reserved or unavailable"),
    ("QOSMaxJobsPerUserLimit", "your group's limit of running jobs is reached"),
    ("AssocGrpGRES", "your group's limit of running jobs is reached"),
    ("AssocGrpGRESRunMinutes", "your group's limit of running jobs is reached"),
    ("JobArrayTaskLimit", "waiting: the template limits how many batches of a job run at once"),
    ("BeginTime", "waiting for its scheduled start time"),
    ("Dependency", "waiting for another job to finish first"),
    ("PartitionTimeLimit", "the template's time limit is longer than the partition allows"),
    ("None", "waiting to be scheduled"),
    ("(Resources)", "waiting for a free GPU"),
    ("FrobnicatorBusy", "waiting (the cluster says: FrobnicatorBusy)"),
])
def test_it_explains_why_a_task_waits(reason, words):
    assert pending_reason(reason) == words


def test_it_names_the_array_limit_when_known():
    assert pending_reason("JobArrayTaskLimit", array_limit=2) == \
        "waiting: the template runs at most 2 batches of a job at once"


def test_it_speaks_the_readers_language_when_given_a_translator():
    """The portal passes its gettext: whole sentences are looked up, numbers put in afterwards."""
    said = []

    def translate(text):
        said.append(text)
        return "<" + text + ">"

    assert plain_reason(task("TIMEOUT"), "", translate) == "<hit the time limit; choose a template with a longer time limit>"
    assert plain_reason(task("FAILED", exit_code=7), "", translate) == \
        "<failed (exit code 7; an admin can read why in the task's log)>"
    assert said[-1] == "failed (exit code %(code)s; an admin can read why in the task's log)"
    assert pending_reason("JobArrayTaskLimit", 3, translate) == "<waiting: the template runs at most 3 batches of a job at once>"
