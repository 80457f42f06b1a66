"""The parsers against every real Slurm 22.05 output captured in tests/cluster/samples/."""
from pathlib import Path

import pytest

from cluster import (
    SlurmError,
    expand_array_range,
    find_job_by_name,
    gres_gpu_types,
    parse_sacct,
    parse_sacct_exit_codes,
    parse_sbatch_parsable,
    parse_scontrol_partitions,
    parse_sinfo,
    parse_squeue,
)

SAMPLES = Path(__file__).parent / "samples" / "22.05"


def sample(name: str) -> str:
    return (SAMPLES / name).read_text()


def summary(tasks):
    return [(t.job_id, t.task_index, t.state, t.node, t.exit_code, t.signal) for t in tasks]


def test_it_covers_every_sample_file():
    # A new sample without a test here is a parser nobody checked against real output.
    tested = {
        "memkill_output.txt", "sacct_array_mixed.json", "sacct_array_mixed.txt",
        "sacct_array_running.json", "sacct_array_running.txt", "sacct_by_name.json",
        "sacct_by_name_completed.json", "sacct_by_name_just_submitted.json",
        "sacct_by_name_none.json", "sacct_cancelled.json", "sacct_cancelled.txt",
        "sacct_memkill.json", "sacct_memkill.txt", "sacct_timeout.json", "sacct_timeout.txt",
        "sbatch_error_gres.txt", "sbatch_parsable.txt", "sinfo.json", "sinfo_gpu_busy.json",
        "scontrol_partitions.txt", "squeue_array_running.json", "sacct_two_memkills.json", "sacct_two_memkills.txt",
        "scontrol_config.txt",  # tests/cluster/test_slurm_limits.py
        "squeue_finished.json", "squeue_empty.json", "timeout_output.txt",
        "squeue_tasks_held.txt", "squeue_tasks_running.txt", "squeue_tasks_ended.txt",  # test_slurm_queue.py
        "squeue_tasks_waiting.txt", "squeue_tasks_none.txt", "squeue_tasks_unknown_job.stderr",
        "squeue_tasks_preempted.txt",
        "scontrol_show_res_none.txt", "scontrol_show_res_several.txt", "scontrol_res_error_busy.txt",  # test_reservations.py
        "sinfo_gpus_vm.json", "sacct_gpu_history_vm.txt", "sacct_gpu_history_running.txt",
        "sacct_single_task_array_running.json", "sacct_single_task_array_ended.json",
        "sacct_account_usage.txt",  # tests/cluster/test_account_usage.py
    }
    assert {p.name for p in SAMPLES.iterdir()} <= tested


def test_it_reads_sbatch_parsable():
    assert parse_sbatch_parsable(sample("sbatch_parsable.txt")) == "38"
    assert parse_sbatch_parsable("123;ffportal\n") == "123"


def test_it_refuses_sbatch_error_text_as_a_job_id():
    with pytest.raises(SlurmError, match="did not print a job id"):
        parse_sbatch_parsable(sample("sbatch_error_gres.txt"))


def test_it_expands_the_pending_part_of_a_running_array_in_squeue():
    tasks = parse_squeue(sample("squeue_array_running.json"), job_ids=["29"])
    assert summary(tasks) == [
        ("29", 0, "RUNNING", "vm", None, None),
        ("29", 1, "RUNNING", "vm", None, None),
        ("29", 2, "PENDING", "", None, None),
        ("29", 3, "PENDING", "", None, None),
    ]
    assert [t.reason for t in tasks] == ["None", "None", "Resources", "Resources"]
    assert [t.pending_array_range for t in tasks] == [None, None, "2-3", "2-3"]
    assert [t.gpus for t in tasks] == [1, 1, 0, 0]
    running = tasks[0]
    assert running.start_time == 1795993607
    assert running.end_time is None  # squeue's end_time of a running job is only a forecast
    assert running.elapsed_seconds is None
    assert running.name == running.comment == "ffp-26aadbe6-35f1-4e6a-b792-92b1efc447e7"


def test_it_keeps_every_job_when_not_asked_to_filter():
    # 22.05's squeue --json ignores --jobs: other jobs (here the check job 28) come along.
    tasks = parse_squeue(sample("squeue_array_running.json"))
    assert [(t.job_id, t.task_index, t.state) for t in tasks][0] == ("28", None, "COMPLETED")
    assert len(tasks) == 5


def test_it_decodes_squeues_raw_wait_status_of_finished_jobs():
    tasks = {(t.job_id, t.task_index): t for t in parse_squeue(sample("squeue_finished.json"))}
    assert (tasks["33", 2].state, tasks["33", 2].exit_code, tasks["33", 2].reason) == \
        ("FAILED", 3, "NonZeroExitCode")  # raw 768
    assert (tasks["33", 3].state, tasks["33", 3].exit_code) == ("COMPLETED", 0)  # runs as job 33
    assert (tasks["29", 0].state, tasks["29", 0].signal) == ("CANCELLED", 15)
    assert (tasks["32", None].state, tasks["32", None].signal, tasks["32", None].reason) == \
        ("TIMEOUT", 15, "TimeLimit")
    assert (tasks["37", None].state, tasks["37", None].signal) == ("FAILED", 9)  # memory kill
    assert tasks["32", None].elapsed_seconds == 81
    # Refused at submission: never ran, so its raw "1" is not SIGHUP.
    refused = tasks["39", None]
    assert (refused.state, refused.reason, refused.exit_code, refused.signal) == \
        ("FAILED", "BadConstraints", None, None)
    # Tasks 2-3 were cancelled while still pending: expanded, never ran.
    assert [(t.task_index, t.state, t.node) for t in (tasks["29", 2], tasks["29", 3])] == \
        [(2, "CANCELLED", ""), (3, "CANCELLED", "")]


def test_it_reads_an_empty_queue():
    assert parse_squeue(sample("squeue_empty.json")) == []


def test_it_expands_the_hex_bitmap_of_pending_tasks_in_sacct():
    tasks = parse_sacct(sample("sacct_array_running.json"))
    assert summary(tasks) == [
        ("29", 0, "RUNNING", "vm", None, None),
        ("29", 1, "RUNNING", "vm", None, None),
        ("29", 2, "PENDING", "", None, None),  # array.task "0xC": bits 2 and 3
        ("29", 3, "PENDING", "", None, None),
    ]
    assert tasks[2].pending_array_range == "2-3"
    assert [t.gpus for t in tasks] == [1, 1, 0, 0]
    assert tasks[0].elapsed_seconds == 1 and tasks[2].elapsed_seconds is None


def test_it_marks_lost_exit_codes_unknown_without_the_text_twin():
    # 22.05's JSON says {"status": "SUCCESS", "return_code": 0} for task 2, which exited 3.
    tasks = parse_sacct(sample("sacct_array_mixed.json"))
    assert summary(tasks) == [
        ("33", 0, "COMPLETED", "vm", 0, None),
        ("33", 1, "COMPLETED", "vm", 0, None),
        ("33", 2, "FAILED", "vm", None, None),
        ("33", 3, "COMPLETED", "vm", 0, None),
    ]


def test_it_takes_exit_codes_from_sacct_text():
    tasks = parse_sacct(sample("sacct_array_mixed.json"), sample("sacct_array_mixed.txt"))
    assert [(t.task_index, t.state, t.exit_code) for t in tasks] == [
        (0, "COMPLETED", 0), (1, "COMPLETED", 0), (2, "FAILED", 3), (3, "COMPLETED", 0)]
    assert [(t.start_time, t.end_time, t.elapsed_seconds) for t in tasks][2] == \
        (1795993619, 1795993620, 1)


def test_it_reads_exit_codes_in_both_text_forms():
    assert parse_sacct_exit_codes("36|3:0\n37|0:9\n29|0:0\n") == \
        {"36": (3, None), "37": (None, 9), "29": (0, None)}
    codes = parse_sacct_exit_codes(sample("sacct_memkill.txt"))  # header line, steps skipped
    assert codes == {"37": (None, 9)}


def test_it_reads_a_cancelled_array():
    tasks = parse_sacct(sample("sacct_cancelled.json"), sample("sacct_cancelled.txt"))
    assert summary(tasks) == [
        ("29", 0, "CANCELLED", "vm", 0, None),
        ("29", 1, "CANCELLED", "vm", 0, None),
        ("29", 2, "CANCELLED", "", 0, None),  # never started: "None assigned"
        ("29", 3, "CANCELLED", "", 0, None),
    ]
    assert {t.comment for t in tasks} == {"ffp-26aadbe6-35f1-4e6a-b792-92b1efc447e7"}
    assert tasks[2].start_time is None and tasks[2].end_time == 1795993609


def test_it_reads_the_memory_kill_as_failed_by_signal_9():
    (task,) = parse_sacct(sample("sacct_memkill.json"))
    assert (task.job_id, task.task_index, task.state, task.exit_code, task.signal) == \
        ("37", None, "FAILED", None, 9)
    assert parse_sacct(sample("sacct_memkill.json"), sample("sacct_memkill.txt")) == [task]


def test_it_reads_a_timeout():
    (task,) = parse_sacct(sample("sacct_timeout.json"), sample("sacct_timeout.txt"))
    assert (task.job_id, task.state, task.exit_code, task.elapsed_seconds, task.gpus) == \
        ("32", "TIMEOUT", 0, 81, 0)
    assert "DUE TO TIME LIMIT" in sample("timeout_output.txt")


def test_it_reads_lookups_by_name():
    (done,) = parse_sacct(sample("sacct_by_name_completed.json"))
    assert (done.job_id, done.state, done.name, done.comment) == (
        "38", "COMPLETED", "ffp-9b9a6b34-0e66-454e-a753-78640e008933",
        "ffp-9b9a6b34-0e66-454e-a753-78640e008933")
    # "Nothing found" arrives as an error entry (9003): it means an empty answer.
    assert parse_sacct(sample("sacct_by_name_none.json")) == []
    assert parse_sacct(sample("sacct_by_name_just_submitted.json")) == []
    assert len(parse_sacct(sample("sacct_by_name.json"))) == 4


def test_it_finds_a_submitted_job_by_name():
    name = "ffp-26aadbe6-35f1-4e6a-b792-92b1efc447e7"
    assert find_job_by_name(sample("squeue_array_running.json"), None, name) == "29"
    assert find_job_by_name("", sample("sacct_by_name.json"), name) == "29"
    assert find_job_by_name(sample("squeue_empty.json"),
                            sample("sacct_by_name_completed.json"),
                            "ffp-9b9a6b34-0e66-454e-a753-78640e008933") == "38"
    assert find_job_by_name(sample("squeue_empty.json"), sample("sacct_by_name_none.json"),
                            name) is None


def test_it_reads_sinfo():
    (node,) = parse_sinfo(sample("sinfo.json"))
    assert (node.name, node.state, node.partitions, node.cpus, node.gpus, node.gres) == \
        ("vm", "idle", ["gpu", "cpu"], 2, 2, "gpu:h200:2")


def test_it_reads_free_gpus_and_gpu_types_from_sinfo():
    (idle,) = parse_sinfo(sample("sinfo.json"))
    assert (idle.gpu_types, idle.gpus, idle.gpus_used, idle.gpus_free) == (["h200"], 2, 0, 2)
    (busy,) = parse_sinfo(sample("sinfo_gpu_busy.json"))  # one GPU held by a running job
    assert (busy.state, busy.gres, busy.gpus_used, busy.gpus_free) == ("mixed", "gpu:h200:2", 1, 1)


def test_it_counts_no_free_gpus_on_a_drained_node():
    (node,) = parse_sinfo(sample("sinfo.json"))
    node.state_flags = ["DRAIN"]
    assert node.gpus_free == 0
    node.state_flags, node.state = [], "down"
    assert node.gpus_free == 0


@pytest.mark.parametrize("gres, types", [
    ("gpu:h200:2", ["h200"]), ("gpu:2", []), ("gpu:h200:1(IDX:1),gpu:a100:2(IDX:0-1)", ["h200", "a100"]),
    ("gpu:3090:1", ["3090"]), ("shard:4", []), ("", []),
])
def test_it_names_the_gpu_types_of_a_gres(gres, types):
    assert gres_gpu_types(gres) == types


def test_it_reads_partitions_from_scontrol():
    gpu, cpu = parse_scontrol_partitions(sample("scontrol_partitions.txt"))
    assert (gpu.name, gpu.state, gpu.is_default, gpu.max_time, gpu.nodes, gpu.total_cpus, gpu.gpus) == \
        ("gpu", "UP", True, "UNLIMITED", "vm", 2, 2)
    assert (cpu.name, cpu.is_default) == ("cpu", False)
    (empty,) = parse_scontrol_partitions("PartitionName=spare State=DOWN Nodes=(null) TotalCPUs=0 TotalNodes=0 TRES=(null)\n")
    assert (empty.name, empty.state, empty.nodes, empty.gpus) == ("spare", "DOWN", "", 0)
    assert parse_scontrol_partitions("No partitions in the system\n") == []


def test_it_refuses_output_that_is_not_slurm_json():
    with pytest.raises(SlurmError, match="did not print JSON"):
        parse_squeue("slurm_load_jobs error: Unable to contact slurm controller")
    with pytest.raises(SlurmError, match="Invalid user"):
        parse_sacct('{"errors": [{"error_number": 1, "description": "Invalid user"}], "jobs": []}')


@pytest.mark.parametrize("text, expected", [
    ("2-3", [2, 3]), ("1-3%1", [1, 2, 3]), ("0-6:2,9", [0, 2, 4, 6, 9]), ("[4-5]", [4, 5]),
    ("0xC", [2, 3]), ("0x1", [0]), ("7", [7]),
])
def test_it_expands_array_ranges(text, expected):
    assert expand_array_range(text) == expected


def test_it_refuses_absurd_array_ranges():
    with pytest.raises(SlurmError):
        expand_array_range("0-4000000000")
    with pytest.raises(SlurmError):
        expand_array_range("3-1")


def test_it_reads_two_tasks_memory_killed_at_the_same_moment():
    # Captured from the real cluster: an array of two tasks, both over --mem=250M, killed together.
    tasks = parse_sacct((SAMPLES / "sacct_two_memkills.json").read_text(),
                        (SAMPLES / "sacct_two_memkills.txt").read_text())
    assert [(t.job_id, t.task_index, t.state, t.exit_code, t.signal) for t in tasks] == [
        ("103", 0, "FAILED", None, 9), ("103", 1, "FAILED", None, 9)]


def test_sacct_prints_a_running_single_task_array_without_its_index():
    # A single-task array (`--array=1`, a retry of one chunk) while its task runs: array id 0, no
    # task id, and PENDING; once it has ended, its index and its true state. The watcher reads the
    # first as the attempt's one task (jobs.watcher.poll._by_job), never as index 0.
    running = parse_sacct(sample("sacct_single_task_array_running.json"))
    ended = parse_sacct(sample("sacct_single_task_array_ended.json"))
    assert [(t.job_id, t.task_index, t.state) for t in running] == [("6", None, "PENDING")]
    assert [(t.job_id, t.task_index, t.state, t.exit_code) for t in ended] == [("6", 1, "COMPLETED", 0)]
