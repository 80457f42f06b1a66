"""The job folder's paths are exactly the ones the portal stages and the worker writes."""
import posixpath

import pytest

from worker.layout import LOG_NAME_PATTERN, JobFolder, OutputFolder, progress_record_name
from worker.manifest import EngineOptions, Manifest, Target

ROOT = "/scratch/ffp/jobs/5f0c2a4e-0000-4000-8000-000000000001"


@pytest.fixture
def folder():
    return JobFolder(ROOT)


def test_it_names_the_inputs(folder):
    assert folder.manifest == ROOT + "/manifest.json"
    assert folder.sources == ROOT + "/sources"
    assert folder.source(0, "face.jpg") == ROOT + "/sources/0-face.jpg"
    # the portal passes a stored upload's name, which may carry its media folders
    assert folder.source(2, "users/7/jobs/x/sources/face.jpg") == ROOT + "/sources/2-face.jpg"
    assert folder.targets == ROOT + "/targets"
    assert folder.target("a.jpg") == ROOT + "/targets/a.jpg"


def test_it_names_what_the_worker_writes(folder):
    assert folder.out == ROOT + "/out"
    assert folder.outputs == ROOT + "/out/outputs"
    assert folder.output("clip.mp4") == ROOT + "/out/outputs/clip.mp4"
    assert folder.progress == ROOT + "/out/progress"
    assert folder.progress_record(17) == ROOT + "/out/progress/task-17.json"
    assert folder.out_folder == OutputFolder(ROOT + "/out")
    assert progress_record_name(3) == "task-3.json"


def test_it_names_the_logs_as_slurm_expands_the_output_pattern(folder):
    assert folder.logs == ROOT + "/logs"
    assert LOG_NAME_PATTERN == "slurm_%A_%a.out"
    assert folder.log_pattern == ROOT + "/logs/slurm_%A_%a.out"
    assert folder.log("81234", 5) == ROOT + "/logs/slurm_81234_5.out"
    expanded = folder.log_pattern.replace("%A", "81234").replace("%a", "5")
    assert expanded == folder.log(81234, 5)


def test_it_keeps_a_percent_in_the_folder_from_being_expanded_by_slurm():
    folder = JobFolder("/scratch/100%/jobs/j")
    assert folder.log_pattern == "/scratch/100%%/jobs/j/logs/slurm_%A_%a.out"
    assert folder.log(7, 0) == "/scratch/100%/jobs/j/logs/slurm_7_0.out"


def test_it_names_each_attempts_batch_script(folder):
    assert folder.script() == folder.script(1) == ROOT + "/job.sbatch"
    assert folder.script(2) == ROOT + "/job-a2.sbatch"
    assert folder.script(11) == ROOT + "/job-a11.sbatch"


def test_it_lists_the_folders_to_create_parents_first(folder):
    assert folder.subdirs == (ROOT + "/sources", ROOT + "/targets", ROOT + "/out/outputs",
                              ROOT + "/out/progress", ROOT + "/logs")


def test_it_builds_the_same_paths_as_the_portal_spelled_out(folder):
    # Each path spelled out with posixpath, piece by piece, as staging, sbatch and the watcher expect it.
    root = ROOT
    assert folder.manifest == posixpath.join(root, "manifest.json")
    assert folder.source(1, "f.png") == posixpath.join(root, "sources", f"{1}-{posixpath.basename('f.png')}")
    assert folder.target("x.jpg") == posixpath.join(root, "targets", "x.jpg")
    assert folder.out == posixpath.join(root, "out")
    assert folder.progress == posixpath.join(root, "out", "progress")
    assert folder.progress_record(4) == posixpath.join(root, "out", "progress", f"task-{4}.json")
    assert folder.output("o.jpg") == posixpath.join(root, "out", "outputs", "o.jpg")
    assert folder.log("99", 3) == posixpath.join(root, "logs", f"slurm_{'99'}_{3}.out")
    assert folder.log_pattern == posixpath.join(root, "logs").rstrip("/").replace("%", "%%") + "/slurm_%A_%a.out"
    assert folder.script(3) == posixpath.join(root, f"job-a{3}.sbatch")
    assert [folder.sources, folder.targets, folder.outputs, folder.progress, folder.logs] == [
        posixpath.join(root, sub) for sub in ("sources", "targets", "out/outputs", "out/progress", "logs")]


def test_the_worker_writes_where_the_layout_says():
    folder = JobFolder(ROOT)
    m = Manifest(job="j", sources=(folder.source(0, "f.jpg"),), targets=(Target(folder.target("a.jpg"), "a.jpg"),),
                 chunks=((0,),), output_dir=folder.out, engine=EngineOptions(name="classic"))
    assert str(m.outputs_dir) == folder.outputs
    assert str(m.progress_dir) == folder.progress
    assert str(m.output_path(0)) == folder.output("a.jpg")


def test_it_is_a_value():
    assert JobFolder("/a") == JobFolder("/a") and hash(JobFolder("/a")) == hash(JobFolder("/a"))
    with pytest.raises(AttributeError):
        JobFolder("/a").root = "/b"  # type: ignore[misc]
