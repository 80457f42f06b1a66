"""GPU-seconds per Slurm account (cluster/slurm/account_usage.py): the sacct command, by list
equality, and its parser, on REAL output captured from the local 22.05 and 26.05 clusters (the
expected sums were added up from those files by hand, with awk, not by the parser)."""
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from cluster.errors import SlurmError
from cluster.slurm.account_usage import account_usage_argv, parse_account_usage

SAMPLES = Path(__file__).parent / "samples"
SHANGHAI = ZoneInfo("Asia/Shanghai")


def test_it_asks_every_users_allocations_of_the_accounts_clipped_to_the_window_in_utc():
    since = datetime(2026, 11, 1, tzinfo=SHANGHAI)  # 2026-10-31 16:00 UTC
    until = datetime(2026, 11, 30, 23, 0, tzinfo=SHANGHAI)
    assert account_usage_argv(["vfx", "post", "vfx"], since, until) == [
        "env", "TZ=UTC", "sacct", "--allusers", "--allocations", "--duplicates", "--truncate", "--state=RUNNING",
        "--accounts=post,vfx", "--starttime=2026-10-31T16:00:00", "--endtime=2026-11-30T15:00:00",
        "--parsable2", "--noheader", "--format=Account,ElapsedRaw,AllocTRES"]


@pytest.mark.parametrize("accounts", [[], ["VFX"], ["vfx,post"], ["a b"], ["vfx;id"], ["x" * 31]])
def test_it_refuses_accounts_slurm_would_not_keep(accounts):
    at = datetime(2026, 11, 1, tzinfo=timezone.utc)
    with pytest.raises(ValueError):
        account_usage_argv(accounts, at, at + timedelta(days=1))


def test_it_refuses_an_empty_or_naive_window():
    at = datetime(2026, 11, 1, tzinfo=timezone.utc)
    with pytest.raises(ValueError):
        account_usage_argv(["vfx"], at, at)
    with pytest.raises(ValueError):
        account_usage_argv(["vfx"], datetime(2026, 11, 1), datetime(2026, 11, 2))


@pytest.mark.parametrize("version, expected", [
    ("22.05", {"post": 84, "ffportal": 0}),  # one ffportal job got a GPU and ran 0 s; arrays of 1 GPU
    ("26.05", {"post": 696, "ffportal": 10}),  # three 2-GPU jobs of 1-2 s each
])
def test_it_sums_gpu_seconds_per_account_from_real_output(version, expected):
    assert parse_account_usage((SAMPLES / version / "sacct_account_usage.txt").read_text()) == expected


def test_it_counts_gpus_times_elapsed_and_nothing_for_cpu_only_or_never_started_allocations():
    text = ("vfx|100|billing=1,cpu=1,gres/gpu=2,mem=2G,node=1\n"  # a 2-GPU array task
            "vfx|50|billing=4,cpu=4,gres/gpu:h200=4,gres/gpu=4,mem=8G,node=1\n"  # typed and untyped: 4 GPUs
            "vfx|3600|billing=1,cpu=1,mem=2G,node=1\n"  # CPU only
            "post|0|\n"  # cancelled as it started: no TRES
            "\n")
    assert parse_account_usage(text) == {"vfx": 400, "post": 0}
    assert parse_account_usage("") == {}


@pytest.mark.parametrize("line", ["Account|ElapsedRaw|AllocTRES", "vfx|12", "vfx|soon|gres/gpu=1", "vfx|1|2|3"])
def test_it_refuses_lines_it_cannot_read(line):
    with pytest.raises(SlurmError):
        parse_account_usage(line + "\n")
