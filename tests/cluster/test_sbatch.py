"""Batch scripts: exact rendering, validation, and hostile values that must stay data."""
import dataclasses
import shlex
import subprocess

import pytest

from cluster import (
    SbatchSpec,
    compress_ranges,
    render_script,
    time_limit_seconds,
    validate_gres,
    validate_mem,
    validate_time_limit,
)

HOSTILE = ["a b", "it's", 'say "hi"', "$(touch {pwned})", "`touch {pwned}`", "x;touch {pwned}",
           "名字 😀", "line\nbreak", "back\\slash", "#not-a-comment", "--flag", "*", ""]


def spec(**over):
    base = dict(
        job_name="ffp-1234", comment="ffp-1234", partition="gpu", time_limit="00:30:00",
        cpus_per_task=4, mem="4G", gres="gpu:h200:1", array_indexes=[0, 1, 2, 3, 7, 9, 10],
        array_limit=2, log_dir="/work/jobs/1234/logs", log_name="slurm_%A_%a.out", workdir="/work/jobs/1234",
        command=["/opt/venv/bin/python", "-m", "worker", "run", "--manifest",
                 "/work/jobs/1234/manifest.json"],
        env={"FACEFUSION_MODELS_DIR": "/models"}, qos="high", reservation="vfx_deadline",
        account="vfx",
    )
    base.update(over)
    return SbatchSpec(**base)


def test_it_renders_the_whole_script():
    assert render_script(spec()) == """\
#!/bin/bash
#SBATCH --job-name="ffp-1234"
#SBATCH --comment="ffp-1234"
#SBATCH --partition=gpu
#SBATCH --time=00:30:00
#SBATCH --cpus-per-task=4
#SBATCH --mem=4G
#SBATCH --gres=gpu:h200:1
#SBATCH --array=0-3,7,9-10%2
#SBATCH --output="/work/jobs/1234/logs/slurm_%A_%a.out"
#SBATCH --error="/work/jobs/1234/logs/slurm_%A_%a.out"
#SBATCH --chdir="/work/jobs/1234"
#SBATCH --qos=high
#SBATCH --reservation=vfx_deadline
#SBATCH --account=vfx
set -euo pipefail
umask 077
export FACEFUSION_MODELS_DIR=/models
exec /opt/venv/bin/python -m worker run --manifest /work/jobs/1234/manifest.json
"""


def test_a_requeueable_job_asks_slurm_to_requeue_it_rather_than_end_it():
    # Preempted by urgent work (PreemptMode=REQUEUE), a task goes back to the queue only if the
    # job allows it; the worker then skips what the earlier run finished.
    lines = render_script(spec(requeue=True)).splitlines()
    assert lines[lines.index("#SBATCH --account=vfx") + 1] == "#SBATCH --requeue"
    assert "#SBATCH --requeue" not in render_script(spec())


def test_it_leaves_out_what_is_not_set_and_wraps_a_container():
    script = render_script(spec(gres="", mem="", qos="", reservation="", account="", env={},
                                array_limit=None, array_indexes=[0, 1, 2],
                                container_image="/images/face fusion.sif",
                                container_binds=["/models:/models:ro", "/work/jobs/1234:/job"]))
    assert script == """\
#!/bin/bash
#SBATCH --job-name="ffp-1234"
#SBATCH --comment="ffp-1234"
#SBATCH --partition=gpu
#SBATCH --time=00:30:00
#SBATCH --cpus-per-task=4
#SBATCH --array=0-2
#SBATCH --output="/work/jobs/1234/logs/slurm_%A_%a.out"
#SBATCH --error="/work/jobs/1234/logs/slurm_%A_%a.out"
#SBATCH --chdir="/work/jobs/1234"
set -euo pipefail
umask 077
exec apptainer exec --nv --bind /models:/models:ro --bind /work/jobs/1234:/job \
'/images/face fusion.sif' /opt/venv/bin/python -m worker run --manifest /work/jobs/1234/manifest.json
"""


@pytest.mark.parametrize("indexes, text", [
    ([0, 1, 2, 3, 7, 9, 10], "0-3,7,9-10"), ([5], "5"), ([3, 1, 2, 2], "1-3"), ([0, 2, 4], "0,2,4"),
])
def test_it_compresses_array_indexes(indexes, text):
    assert compress_ranges(indexes) == text


def _c_isspace(byte: int) -> bool:
    return byte in b" \t\n\v\f\r"


def sbatch_directive_args(line: str) -> list[str]:
    """sbatch 22.05's #SBATCH parser (src/sbatch/opt.c `_get_argument`), ported byte for byte:
    unquoted whitespace splits, an unquoted '#' ends the line, '...' and "..." group, a backslash
    escapes the next byte (inside quotes too)."""
    assert line.startswith("#SBATCH")
    data, pos, args = line[len("#SBATCH"):].encode(), 0, []
    while True:
        while pos < len(data) and _c_isspace(data[pos]):
            pos += 1
        out, escape, quote = bytearray(), False, None
        while pos < len(data) and (quote or not _c_isspace(data[pos])):
            c = data[pos]
            if escape:
                escape = False
            elif c == ord("\\"):
                escape, pos = True, pos + 1
                continue
            elif quote:
                if c == quote:
                    quote, pos = None, pos + 1
                    continue
            elif c in b"\"'":
                quote, pos = c, pos + 1
                continue
            elif c == ord("#"):
                break
            out.append(c)
            pos += 1
        assert quote is None, "unmatched quote: sbatch would stop with a fatal error"
        if not out:
            return args
        args.append(out.decode())


@pytest.mark.parametrize("value", [v.format(pwned="/tmp/pwned") for v in HOSTILE if "\n" not in v and v])
def test_it_quotes_hostile_names_comments_and_paths_for_sbatch(value):
    log_value = value.replace("\\", "")  # a backslash is refused there (next test)
    name = value.replace("'", "")  # refused in names (below)
    script = render_script(spec(job_name=name or "x", comment=value, log_dir="/logs/" + log_value,
                                workdir="/work/" + value))
    lines = {line.split("=", 1)[0]: line for line in script.splitlines() if line.startswith("#SBATCH")}
    assert sbatch_directive_args(lines["#SBATCH --job-name"]) == ["--job-name=" + (name or "x")]
    assert sbatch_directive_args(lines["#SBATCH --comment"]) == ["--comment=" + value]
    assert sbatch_directive_args(lines["#SBATCH --chdir"]) == ["--chdir=/work/" + value]
    # Slurm expands %-patterns in the log name: a user's '%' is doubled, ours are not.
    log = "/logs/" + log_value.replace("%", "%%") + "/slurm_%A_%a.out"
    assert sbatch_directive_args(lines["#SBATCH --output"]) == ["--output=" + log]


@pytest.mark.parametrize("field", ["job_name", "comment", "log_dir", "workdir"])
@pytest.mark.parametrize("bad", ["a\nb", "a\rb", "tab\there", "nul\0", "x hetjob y", "PackJob"])
def test_it_refuses_what_no_quoting_makes_safe_in_a_directive(field, bad):
    value = bad if field in ("job_name", "comment") else "/x/" + bad
    with pytest.raises(ValueError):
        spec(**{field: value})


def test_it_refuses_a_single_quote_in_the_job_name():
    # sacct --name never finds such a name, and submission looks jobs up by name.
    with pytest.raises(ValueError, match="look such a"):
        spec(job_name="it's")


def test_it_refuses_a_backslash_in_the_log_folder():
    with pytest.raises(ValueError, match="backslash"):
        spec(log_dir="/logs/a\\b")


def test_it_doubles_a_percent_in_the_log_folder():
    assert '--output="/logs/100%%/slurm_%A_%a.out"' in render_script(spec(log_dir="/logs/100%/"))


def test_it_keeps_hostile_command_arguments_as_data_in_bash(tmp_path):
    pwned = tmp_path / "pwned"
    args = [v.format(pwned=pwned) for v in HOSTILE]
    script = render_script(spec(command=["printf", "%s\\0", *args],
                                env={"HOSTILE": "$(touch {})'\"".format(pwned)}))
    command_line = script[script.index("\nexec ") + 1:]  # an argument may span lines
    assert shlex.split(command_line) == ["exec", "printf", "%s\\0", *args]
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    done = subprocess.run(["bash", "-c", script], capture_output=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(b"\0")[:-1] == [a.encode() for a in args]
    assert not pwned.exists()


def test_it_exports_hostile_environment_values_verbatim(tmp_path):
    value = "$(touch {}) ; 'q' \"dq\" 名字\nline2".format(tmp_path / "pwned")
    script = render_script(spec(command=["printenv", "HOSTILE"], env={"HOSTILE": value}))
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert done.stdout == value + "\n"
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("over", [
    dict(env={"BAD-NAME": "x"}), dict(env={"X\n": "x"}), dict(env={"X": "a\0b"}), dict(command=[]),
    dict(command=["a\0b"]), dict(partition="gpu;rm"), dict(partition="gpu\n"), dict(qos="a b"),
    dict(gres="gpu:1\n,gpu:2"), dict(container_image="a\rb"), dict(cpus_per_task=0),
    dict(cpus_per_task=True), dict(array_indexes=[]), dict(array_indexes=[-1]),
    dict(array_limit=0), dict(log_dir="relative/logs"), dict(workdir=""), dict(job_name=""),
    dict(container_binds=["/a:/b:/c"]), dict(container_binds=["/a,b"]), dict(time_limit=""),
    dict(container_binds=["relative"]), dict(container_binds=["/a:ro"]), dict(container_binds=["/a:/b:rx"]),
])
def test_it_refuses_invalid_specs(over):
    with pytest.raises(ValueError):
        spec(**over)


def test_it_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec().job_name = "other"


@pytest.mark.parametrize("value, seconds", [
    ("30", 1800), ("05:00", 300), ("00:30:00", 1800), ("2-00", 172800), ("1-12:30", 131400),
    ("1-00:00:10", 86410),
])
def test_it_reads_slurm_time_limits(value, seconds):
    assert time_limit_seconds(value) == seconds
    assert validate_time_limit(value) == value


@pytest.mark.parametrize("value", ["0", "00:00:00", "UNLIMITED", "infinite", "1h", "-1", "", "1:2:3:4"])
def test_it_refuses_missing_or_endless_time_limits(value):
    with pytest.raises(ValueError):
        validate_time_limit(value)


def test_it_validates_memory_and_gres():
    assert validate_mem("4g") == "4G" and validate_mem("500") == "500"
    for bad in ("0", "4GB", "-1G", "", "4 G"):
        with pytest.raises(ValueError):
            validate_mem(bad)
    for good in ("", "gpu:h200:1", "gpu:1", "gpu", "gpu:a100", "gpu:a100:2,shard:1"):
        assert validate_gres(good) == good
    for bad in ("gpu:h200:0", "gpu h200", "gpu:h200:1;x", "GPU:1:1:1"):
        with pytest.raises(ValueError):
            validate_gres(bad)
