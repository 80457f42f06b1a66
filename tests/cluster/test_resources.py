"""What a job asks Slurm for: memory text, and the Slurm fields a template and a batch script share."""
import pytest

from cluster import SbatchSpec, check_slurm_fields, mem_mb, mem_text, validate_mem


@pytest.mark.parametrize("text, mb", [
    ("4G", 4096), ("4g", 4096), ("500M", 500), ("500m", 500), ("2048", 2048), ("16384M", 16384),
    ("1T", 1048576), ("3t", 3145728), ("2048K", 2), ("1536K", 1), ("1K", 1), ("0004G", 4096),
    (" 4G ", 4096),
])
def test_it_reads_memory_text_in_mb(text, mb):
    assert mem_mb(text) == mb


@pytest.mark.parametrize("text", [
    "", "  ", None, "0", "0G", "4GB", "-1G", "1.5G", "abc", "G", "4 G", "4G;x",
])
def test_it_reads_no_amount_from_what_slurm_would_not_take(text):
    assert mem_mb(text) is None


@pytest.mark.parametrize("mb, text", [
    (4096, "4G"), (8192, "8G"), (1024, "1G"), (1048576, "1024G"), (500, "500M"), (1536, "1536M"),
    (1, "1M"),
])
def test_it_writes_mb_as_memory_text(mb, text):
    assert mem_text(mb) == text
    assert mem_mb(text) == mb


@pytest.mark.parametrize("mb", [0, -1024, 1.5, "4G", True])
def test_it_writes_no_memory_text_for_what_is_not_an_amount(mb):
    with pytest.raises(ValueError):
        mem_text(mb)


@pytest.mark.parametrize("text", ["4G", "4g", "500", "500M", "1T", "2048K", " 8G ", "0", "4 G", "4GB", ""])
def test_it_validates_memory_exactly_where_it_reads_an_amount(text):
    if mem_mb(text) is None:
        with pytest.raises(ValueError, match="must be a positive amount"):
            validate_mem(text)
    else:
        assert mem_mb(validate_mem(text)) == mem_mb(text)


GOOD = dict(partition="gpu", time_limit="00:30:00", cpus_per_task=4, mem="4G", max_mem="16G",
            gres="gpu:h200:1", qos="high", array_limit=2, chunk_size=10, container_image="/img/ff.sif")


def test_it_finds_nothing_wrong_with_good_fields():
    assert check_slurm_fields(**GOOD) == {}


@pytest.mark.parametrize("over", [
    dict(mem="", max_mem="", gres="", qos="", array_limit=None, chunk_size=None, container_image=""),
    dict(partition="gpu-a100_v2.1"), dict(qos="normal"), dict(time_limit="1-12:00:00"),
    dict(time_limit="30"), dict(mem="500M"), dict(mem="2048"), dict(gres="gpu:1"),
    dict(gres="gpu:a100:2,shard:1"), dict(cpus_per_task=1), dict(array_limit=1), dict(chunk_size=1),
    dict(container_image="docker://ghcr.io/x/ff:1.0 with space"),
])
def test_it_accepts_good_values(over):
    assert check_slurm_fields(**{**GOOD, **over}) == {}


@pytest.mark.parametrize("over, field, words", [
    (dict(partition=""), "partition", "partition is required"),
    (dict(partition="gpu;rm"), "partition", "not a Slurm partition name"),
    (dict(partition="a b"), "partition", "not a Slurm partition name"),
    (dict(partition="gpu\n"), "partition", "not a Slurm partition name"),
    (dict(qos="a b"), "qos", "not a Slurm QOS name"),
    (dict(qos="hi,lo"), "qos", "not a Slurm QOS name"),
    (dict(qos="high\n"), "qos", "not a Slurm QOS name"),
    (dict(time_limit=""), "time_limit", "not a Slurm time"),
    (dict(time_limit="0"), "time_limit", "longer than zero"),
    (dict(time_limit="UNLIMITED"), "time_limit", "not a Slurm time"),
    (dict(time_limit="1h"), "time_limit", "not a Slurm time"),
    (dict(mem="0"), "mem", "positive amount"),
    (dict(mem="4GB"), "mem", "positive amount"),
    (dict(mem="4 G"), "mem", "positive amount"),
    (dict(mem="4G\n#SBATCH"), "mem", "positive amount"),
    (dict(max_mem="-1G"), "max_mem", "positive amount"),
    (dict(gres="gpu:h200:0"), "gres", "must look like gpu:h200:1"),
    (dict(gres="gpu h200"), "gres", "must look like gpu:h200:1"),
    (dict(gres="gpu:1\n,gpu:2"), "gres", "must look like gpu:h200:1"),
    (dict(cpus_per_task=0), "cpus_per_task", "CPUs per task must be a whole number >= 1"),
    (dict(cpus_per_task=None), "cpus_per_task", "CPUs per task must be a whole number >= 1"),
    (dict(cpus_per_task=True), "cpus_per_task", "CPUs per task must be a whole number >= 1"),
    (dict(array_limit=0), "array_limit", "tasks at once must be a whole number >= 1"),
    (dict(chunk_size=0), "chunk_size", "images per task must be a whole number >= 1"),
    (dict(chunk_size=-3), "chunk_size", "images per task must be a whole number >= 1"),
    (dict(container_image="a\nb"), "container_image", "single line"),
    (dict(container_image="a\rb"), "container_image", "single line"),
    (dict(container_image="a\0b"), "container_image", "single line"),
])
def test_it_names_the_field_and_the_reason_for_a_bad_value(over, field, words):
    errors = check_slurm_fields(**{**GOOD, **over})
    assert list(errors) == [field]
    assert words in errors[field]


def test_it_reports_every_bad_field_at_once():
    errors = check_slurm_fields(partition="a b", time_limit="0", cpus_per_task=0, mem="x", qos="q q")
    assert sorted(errors) == ["cpus_per_task", "mem", "partition", "qos", "time_limit"]


def spec(**fields):
    return SbatchSpec(
        job_name="ffp-1", comment="ffp-1", partition=fields["partition"], time_limit=fields["time_limit"],
        cpus_per_task=fields["cpus_per_task"], mem=fields["mem"], gres=fields["gres"], qos=fields["qos"],
        array_indexes=[0, 1], array_limit=fields["array_limit"], log_dir="/w/logs", log_name="slurm_%A_%a.out", workdir="/w",
        command=["true"], container_image=fields["container_image"])


@pytest.mark.parametrize("over", [
    {}, dict(partition=""), dict(partition="gpu;rm"), dict(qos="a b"), dict(time_limit="0"), dict(mem="0"),
    dict(mem=""), dict(mem="4 G"), dict(gres="gpu:h200:0"), dict(cpus_per_task=0), dict(array_limit=0),
    dict(array_limit=None), dict(container_image="a\rb"),
])
def test_a_batch_script_takes_exactly_the_fields_a_template_may_hold(over):
    fields = {**GOOD, "max_mem": "", "chunk_size": None, **over}
    errors = check_slurm_fields(**fields)
    if errors:
        with pytest.raises(ValueError) as refused:
            spec(**fields)
        assert all(message in str(refused.value) for message in errors.values())
    else:
        assert spec(**fields).partition == fields["partition"]
