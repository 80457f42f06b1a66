"""Slurm commands are argument lists built by pure functions: tested by list equality."""
import subprocess
import sys

import pytest

from cluster import (
    sacct_argv,
    sacct_exit_codes_argv,
    sbatch_argv,
    scancel_argv,
    scontrol_partitions_argv,
    sinfo_argv,
    squeue_argv,
)


def test_it_builds_sbatch_for_a_staged_script_and_for_stdin():
    assert sbatch_argv("/work/jobs/1/job.sh") == ["sbatch", "--parsable", "/work/jobs/1/job.sh"]
    assert sbatch_argv() == ["sbatch", "--parsable"]
    # Options must come before the script: after it they would be the script's own arguments.
    assert sbatch_argv("/w/job.sh", ["--hold"]) == ["sbatch", "--parsable", "--hold", "/w/job.sh"]


def test_it_refuses_a_script_path_that_reads_as_an_option():
    with pytest.raises(ValueError):
        sbatch_argv("--wrap=rm -rf /")


def test_it_builds_squeue():
    assert squeue_argv() == ["squeue", "--json"]
    assert squeue_argv(["12", "13_2"], user="ffportal") == [
        "squeue", "--json", "--jobs=12,13_2", "--user=ffportal"]


def test_it_builds_sacct_by_ids_without_a_start_time():
    # With -j sacct looks back to the epoch on its own.
    assert sacct_argv(["12", "13"]) == ["sacct", "--json", "--jobs=12,13"]


def test_it_looks_back_a_week_when_looking_up_by_name():
    # Without -j sacct only looks back to midnight: a retry just after midnight would miss the job.
    assert sacct_argv(name="ffp-1b2c") == ["sacct", "--json", "--name=ffp-1b2c", "--starttime=now-7days"]
    assert sacct_argv(name="ffp-1b2c", user="ffportal", start="now-30days") == [
        "sacct", "--json", "--name=ffp-1b2c", "--user=ffportal", "--starttime=now-30days"]


def test_it_builds_the_exit_code_query():
    assert sacct_exit_codes_argv(["33"]) == [
        "sacct", "--noheader", "--parsable2", "--allocations", "--format=JobIDRaw,ExitCode",
        "--jobs=33"]


def test_it_builds_scancel_and_sinfo():
    assert scancel_argv(["12", "13_4"]) == ["scancel", "12", "13_4"]
    assert sinfo_argv() == ["sinfo", "--json"]
    assert scontrol_partitions_argv() == ["scontrol", "show", "partition", "--oneliner"]


@pytest.mark.parametrize("bad", ["12;rm", "-1", "12,13", "", "12 13", "abc", "12_", "12\n"])
def test_it_refuses_what_is_not_a_job_id(bad):
    with pytest.raises(ValueError):
        squeue_argv([bad])
    with pytest.raises(ValueError):
        scancel_argv([bad])


def test_it_refuses_names_slurm_would_split_on_commas():
    with pytest.raises(ValueError):
        sacct_argv(name="a,b")
    with pytest.raises(ValueError):
        sacct_argv(name="")
    with pytest.raises(ValueError):  # slurmdbd never matches a name with a '
        sacct_argv(name="it's")
    with pytest.raises(ValueError):
        scancel_argv([])


def test_it_imports_neither_django_nor_the_worker():
    # In a fresh interpreter: this test process already has Django loaded by pytest-django.
    code = ("import sys, cluster; bad = sorted(m for m in sys.modules "
            "if m.split('.')[0] in ('django', 'worker')); print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
