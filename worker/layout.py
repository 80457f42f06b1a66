"""The job folder: where one job's files lie on the cluster, defined once.

The portal stages a job into a folder of its own and the worker writes under it:

    <root>/
      manifest.json               the job's manifest (`worker.manifest`)
      job.sbatch                  the batch script of attempt 1; job-a<N>.sbatch for attempt N > 1
      sources/<i>-<name>          source face images, numbered so equal names cannot collide
      targets/<name>              uploaded targets (a target folder on cluster storage stays where it is)
      out/                        the manifest's `output_dir`
        outputs/<output>          one result per target
        progress/task-<N>.json    one progress record per array task (`worker.progress`)
        posters/<output>.jpg      a running video's poster: one of its swapped frames, small
      logs/slurm_<A>_<a>.out      stdout+stderr of array task <a> of Slurm job <A>

Paths are plain POSIX strings built with `posixpath`: the portal computes them for a REMOTE
machine, so nothing here touches a filesystem and the local OS's separator never leaks in.
"""
from __future__ import annotations

import posixpath
from dataclasses import dataclass

MANIFEST_NAME = "manifest.json"
#: the sbatch `--output`/`--error` file name: Slurm expands %A (array job id) and %a (task index)
LOG_NAME_PATTERN = "slurm_%A_%a.out"
#: every progress record's file name matches this glob (a record being written is a dot-file: it does not)
PROGRESS_RECORD_GLOB = "task-*.json"


def progress_record_name(task_index: int) -> str:
    """The file name of array task `task_index`'s progress record inside the progress folder."""
    return f"task-{int(task_index)}.json"


@dataclass(frozen=True)
class OutputFolder:
    """A manifest's `output_dir`: everything the worker writes lies under it."""

    root: str

    @property
    def outputs(self) -> str:
        return posixpath.join(self.root, "outputs")

    def output(self, name: str) -> str:
        """The result of the target whose manifest `output` is `name`."""
        return posixpath.join(self.outputs, name)

    @property
    def progress(self) -> str:
        return posixpath.join(self.root, "progress")

    def progress_record(self, task_index: int) -> str:
        return posixpath.join(self.progress, progress_record_name(task_index))

    @property
    def posters(self) -> str:
        return posixpath.join(self.root, "posters")

    def poster(self, name: str) -> str:
        """A running video's poster (a JPEG of one of its swapped frames) for the output `name`."""
        return posixpath.join(self.posters, f"{posixpath.basename(name)}.jpg")


@dataclass(frozen=True)
class JobFolder:
    """One job's folder on the cluster, rooted at `root` (e.g. `<work_root>/jobs/<job uuid>`)."""

    root: str

    @property
    def manifest(self) -> str:
        return posixpath.join(self.root, MANIFEST_NAME)

    # -- inputs --------------------------------------------------------------------------------
    @property
    def sources(self) -> str:
        return posixpath.join(self.root, "sources")

    def source(self, i: int, name: str) -> str:
        """Source image number `i`: its file name (any folder part dropped) prefixed with `i-`."""
        return posixpath.join(self.sources, f"{int(i)}-{posixpath.basename(name)}")

    def reference(self, name: str) -> str:
        """The photo of the person whose faces are replaced (face selector "reference")."""
        return posixpath.join(self.sources, f"reference-{posixpath.basename(name)}")

    @property
    def targets(self) -> str:
        return posixpath.join(self.root, "targets")

    def target(self, name: str) -> str:
        """An uploaded target, stored under its output name (unique within the job)."""
        return posixpath.join(self.targets, name)

    # -- what the worker writes ----------------------------------------------------------------
    @property
    def out(self) -> str:
        """The manifest's `output_dir`."""
        return posixpath.join(self.root, "out")

    @property
    def out_folder(self) -> OutputFolder:
        return OutputFolder(self.out)

    @property
    def outputs(self) -> str:
        return self.out_folder.outputs

    def output(self, name: str) -> str:
        """The result of the target whose manifest `output` is `name`."""
        return self.out_folder.output(name)

    @property
    def progress(self) -> str:
        return self.out_folder.progress

    def progress_record(self, task_index: int) -> str:
        return self.out_folder.progress_record(task_index)

    def poster(self, name: str) -> str:
        """A running video's poster for the output `name` (see OutputFolder.poster)."""
        return self.out_folder.poster(name)

    # -- Slurm ---------------------------------------------------------------------------------
    @property
    def logs(self) -> str:
        return posixpath.join(self.root, "logs")

    def log(self, slurm_job_id: str | int, task_index: int) -> str:
        """The log Slurm writes for array task `task_index` of Slurm job `slurm_job_id` (the
        array's own id, `%A`), i.e. what `log_pattern` expands to."""
        return posixpath.join(self.logs, f"slurm_{slurm_job_id}_{int(task_index)}.out")

    @property
    def log_pattern(self) -> str:
        """The value for sbatch's `--output`/`--error`: the logs folder with any `%` doubled (so
        Slurm does not expand it) followed by `LOG_NAME_PATTERN`. Expands to `log(A, a)`."""
        return self.logs.rstrip("/").replace("%", "%%") + "/" + LOG_NAME_PATTERN

    def script(self, attempt: int = 1) -> str:
        """The batch script of `attempt`: job.sbatch for the first, job-a<N>.sbatch after."""
        attempt = int(attempt)
        return posixpath.join(self.root, "job.sbatch" if attempt <= 1 else f"job-a{attempt}.sbatch")

    @property
    def subdirs(self) -> tuple[str, ...]:
        """The folders to create before a job's first task runs, parents before children. Slurm
        does not create the log folder (a task whose `--output` folder is missing fails at once)."""
        return (self.sources, self.targets, self.outputs, self.progress, self.logs)
