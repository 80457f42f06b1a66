"""`sacct` only for jobs with a task that left the queue (cluster/slurm/accounting.py).

The command is a small POSIX shell + awk program: it is run here for real, by this machine's `sh`
(dash) and each installed awk, with stand-in `squeue` and `sacct` programs on the PATH that print
canned answers and record how they were called. No cluster, no SSH.
"""
import shutil
import subprocess
from pathlib import Path

import pytest

from cluster import SlurmError
from cluster.slurm import AccountingAnswer, accounting_when_needed_argv, parse_accounting_when_needed

MARK = "0123456789abcdef"
SAMPLES = Path(__file__).resolve().parent / "samples" / "22.05"
AWKS = [name for name in ("mawk", "gawk", "busybox") if shutil.which(name)]


class StandIns:
    """`squeue` printing `queued` (one JOB_INDEX per line, or failing), `sacct` printing canned text;
    each call's arguments are appended to calls.txt."""

    def __init__(self, root: Path, awk: str = "mawk"):
        self.bin = root / "bin"
        self.bin.mkdir()
        self.calls = root / "calls.txt"
        self.queued = root / "queued.txt"
        self.queued.write_text("")
        self._program("squeue", f'cat "{self.queued}"')
        self._program("sacct", """case "$*" in *--json*) echo '{"jobs": []}' ;; *) echo '33|0:0' ;; esac""")
        if awk == "busybox":
            self._program("awk", 'exec busybox awk "$@"')
        else:
            (self.bin / "awk").symlink_to(shutil.which(awk))

    def _program(self, name: str, body: str) -> None:
        path = self.bin / name
        path.write_text(f'#!/bin/sh\necho "{name} $*" >> "{self.calls}"\n{body}\n')
        path.chmod(0o755)

    def fail_squeue(self) -> None:
        self._program("squeue", 'echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1')

    def run(self, argv: list[str]) -> AccountingAnswer:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30,
                              env={"PATH": f"{self.bin}:/usr/bin:/bin"})
        assert done.returncode == 0, done.stderr
        return parse_accounting_when_needed(done.stdout, MARK)

    def called(self) -> list[str]:
        return self.calls.read_text().splitlines() if self.calls.exists() else []


@pytest.fixture(params=AWKS)
def cluster_bin(tmp_path, request):
    return StandIns(tmp_path, request.param)


# ---- the command line ---------------------------------------------------------------------------

def test_it_passes_job_ids_and_expected_tasks_as_separate_arguments():
    argv = accounting_when_needed_argv({"34": [], "33": [0, 1, 2, 5]}, MARK)
    assert argv[:2] == ["sh", "-c"] and argv[3] == "sh"
    assert argv[4:8] == [MARK, "33,34", "33:0-2,5 34:", "0"]
    assert accounting_when_needed_argv({"33": [1]}, MARK, every_job=True)[7] == "1"


@pytest.mark.parametrize("expected", [{"33;reboot": [0]}, {"33_2": [0]}, {"33\n34": [0]}, {}])
def test_it_refuses_anything_but_whole_slurm_job_ids(expected):
    with pytest.raises(ValueError):
        accounting_when_needed_argv(expected, MARK)


@pytest.mark.parametrize("mark", ["", "short", "0123456789ABCDEF", "0123456789abcdef;"])
def test_it_refuses_a_mark_that_is_not_plain_hex(mark):
    with pytest.raises(ValueError):
        accounting_when_needed_argv({"33": [0]}, mark)


# ---- what runs on the cluster -------------------------------------------------------------------

def test_when_every_expected_task_is_queued_sacct_does_not_run(cluster_bin):
    cluster_bin.queued.write_text("33_0\n33_1\n33_2\n34_0\n99_0\n")
    answer = cluster_bin.run(accounting_when_needed_argv({"33": [0, 1, 2], "34": [0]}, MARK))
    assert answer == AccountingAnswer()
    assert [c.split()[0] for c in cluster_bin.called()] == ["squeue"]
    assert "--jobs=33,34" in cluster_bin.called()[0] and "--array" in cluster_bin.called()[0]


def test_sacct_is_asked_only_about_the_job_whose_task_left_the_queue(cluster_bin):
    cluster_bin.queued.write_text("33_0\n33_2\n34_0\n")  # 33_1 ended
    answer = cluster_bin.run(accounting_when_needed_argv({"33": [0, 1, 2], "34": [0]}, MARK))
    assert answer.asked == ("33",)
    assert (answer.sacct_rc, answer.sacct_json.strip()) == (0, '{"jobs": []}')
    assert (answer.codes_rc, answer.codes.strip()) == (0, "33|0:0")
    sacct_calls = [c for c in cluster_bin.called() if c.startswith("sacct")]
    assert sacct_calls == ["sacct --json --jobs=33",
                           "sacct --noheader --parsable2 --allocations --format=JobIDRaw,ExitCode --jobs=33"]


def test_a_job_whose_tasks_all_ended_is_not_asked_about(cluster_bin):
    cluster_bin.queued.write_text("")
    assert cluster_bin.run(accounting_when_needed_argv({"33": [], "34": [3]}, MARK)).asked == ("34",)


def test_when_squeue_fails_every_job_with_an_expected_task_is_asked_about(cluster_bin):
    cluster_bin.fail_squeue()
    answer = cluster_bin.run(accounting_when_needed_argv({"33": [0], "34": [1], "35": []}, MARK))
    assert answer.asked == ("33", "34")


def test_on_the_slower_beat_every_job_is_asked_about_without_asking_squeue(cluster_bin):
    cluster_bin.queued.write_text("33_0\n")
    answer = cluster_bin.run(accounting_when_needed_argv({"33": [0], "35": []}, MARK, every_job=True))
    assert answer.asked == ("33", "35")
    assert [c.split()[0] for c in cluster_bin.called()] == ["sacct", "sacct"]


def test_a_large_array_is_compared_task_by_task(cluster_bin):
    cluster_bin.queued.write_text("".join(f"40_{i}\n" for i in range(2000) if i != 1234))
    assert cluster_bin.run(accounting_when_needed_argv({"40": list(range(2000))}, MARK)).asked == ("40",)
    cluster_bin.queued.write_text("".join(f"40_{i}\n" for i in range(2000)))
    assert cluster_bin.run(accounting_when_needed_argv({"40": list(range(2000))}, MARK)).asked == ()


# ---- reading what it printed --------------------------------------------------------------------

def test_it_reads_sacct_output_that_looks_like_markers_only_at_the_start_of_a_line():
    json_text = '{"jobs": [{"name": "x\\n' + MARK + ':sacct:0"}]}'
    text = f"{MARK}:asked:33\n{json_text}\n{MARK}:sacct:1\n33|3:0\n{MARK}:codes:0\n"
    answer = parse_accounting_when_needed(text, MARK)
    assert answer == AccountingAnswer(asked=("33",), sacct_rc=1, sacct_json=json_text, codes_rc=0, codes="33|3:0")


@pytest.mark.parametrize("text", ["", "sacct: error\n", f"{MARK}:asked:33\n{{}}\n", f"{MARK}:asked:33\n{{}}\n{MARK}:sacct:0\n",
                                  "fedcba9876543210:asked:\n"])
def test_output_cut_short_is_an_error_not_an_empty_answer(text):
    with pytest.raises(SlurmError):
        parse_accounting_when_needed(text, MARK)
