"""Array limits from `scontrol show config` (real 22.05 output) and what sbatch's refusals mean."""
from pathlib import Path

import pytest

from cluster import ClusterLimits, chunk_size_for, parse_scontrol_config, sbatch_refusal

SAMPLES = Path(__file__).parent / "samples" / "22.05"


def test_it_reads_the_array_and_job_limits_of_a_real_cluster():
    limits = parse_scontrol_config((SAMPLES / "scontrol_config.txt").read_text())
    assert limits == ClusterLimits(max_array_size=1001, max_job_count=10000)
    assert limits.max_tasks == 1001


def test_it_falls_back_to_slurms_defaults_when_the_config_says_nothing():
    assert parse_scontrol_config("") == ClusterLimits(1001, 10000)
    assert parse_scontrol_config("MaxArraySize = 0\nMaxJobCount = lots\n") == ClusterLimits(1001, 10000)
    assert parse_scontrol_config("MaxArraySize            = 40001\nMaxJobCount = 5000").max_tasks == 2500


@pytest.mark.parametrize("n, chunk, max_tasks, expected", [
    (100, 10, 1001, 10),        # fits: the template's own chunk size
    (100_000, 1, 1001, 100),    # 100,000 images in at most 1,001 tasks
    (100_000, 500, 1001, 500),  # already fewer tasks than the limit
    (1001, 1, 1001, 1), (1002, 1, 1001, 2), (0, 5, 1001, 5),
])
def test_chunks_grow_so_an_array_never_passes_the_limit(n, chunk, max_tasks, expected):
    limits = ClusterLimits(max_array_size=max_tasks, max_job_count=10**6)
    size = chunk_size_for(n, chunk, limits)
    assert size == expected
    assert -(-n // size) <= max_tasks


@pytest.mark.parametrize("stderr, words", [
    ("sbatch: error: Batch job submission failed: Invalid job array specification\n", "Invalid job array specification"),
    ("sbatch: error: invalid partition specified: nosuch\nsbatch: error: Batch job submission failed: "
     "Invalid partition name specified\n", "Invalid partition name specified"),
    ((SAMPLES / "sbatch_error_gres.txt").read_text(), "Requested node configuration is not available"),
])
def test_a_refusal_for_good_is_told_in_slurms_words(stderr, words):
    assert sbatch_refusal(stderr) == words


@pytest.mark.parametrize("stderr", [
    "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation\n",
    "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)\n",
    "sbatch: error: Slurm temporarily unable to accept job, sleeping and retrying\n",
    "ssh: connect to host login port 22: Connection refused\n",
    "",
])
def test_a_failure_that_may_pass_is_not_a_refusal(stderr):
    assert sbatch_refusal(stderr) is None
