"""What a job runs with: its template as it was at Start, frozen and versioned.

Stored as JSON on `Job.template_snapshot`, read back through `Job.snapshot` as a typed
`TemplateSnapshot`. Later edits of the template never change a job that has started; a template
deleted after Start leaves its jobs readable. Reading is lenient (unknown keys are ignored, missing
ones take their defaults), so a snapshot written by an older portal still reads.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from jobs.bilingual import in_language
from worker.choices import EngineName, FaceSelector

#: bump when a field changes meaning (adding a field with a default needs no bump)
SNAPSHOT_VERSION = 1
#: a snapshot taken before seconds_per_image existed
DEFAULT_SECONDS_PER_IMAGE = 3.0


@dataclasses.dataclass(frozen=True)
class TemplateSnapshot:
    slug: str = ""
    name: str = ""
    name_zh: str = ""  # the admin's Chinese name ("": none; readers of Chinese see `name`)
    cluster: str = ""  # the cluster profile's slug
    partition: str = ""
    gres: str = ""  # "gpu:h200:1", "" for no GPU
    gpu_count: int = 0
    cpus_per_task: int = 1
    mem: str = ""  # memory per task, Slurm's text ("4G"); "" for the partition's default
    max_mem: str = ""  # ceiling of the automatic out-of-memory retry; "" for twice `mem`
    time_limit: str = ""
    chunk_size: int = 1
    array_limit: int | None = None
    container_image: str = ""
    engine: EngineName = "auto"
    face_selector: FaceSelector = "many"
    qos: str = ""
    seconds_per_image: float = DEFAULT_SECONDS_PER_IMAGE
    watermark: str = ""  # visible text on every result ("": none)
    self_check: bool = True  # each photo's result looked at again (worker.selfcheck)
    #: the pinned model set as the manifest carries it ({"set", "folder", "files"}; {}: not pinned)
    model_set: dict = dataclasses.field(default_factory=dict)
    version: int = SNAPSHOT_VERSION

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> "TemplateSnapshot":
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in (data or {}).items() if k in known and v is not None}
        snapshot = cls(**values)
        # Numbers as numbers whatever the JSON held; a chunk is at least one target.
        return dataclasses.replace(
            snapshot, gpu_count=int(snapshot.gpu_count or 0), cpus_per_task=max(1, int(snapshot.cpus_per_task or 1)),
            chunk_size=max(1, int(snapshot.chunk_size or 1)),
            array_limit=int(snapshot.array_limit) if snapshot.array_limit else None,
            seconds_per_image=float(snapshot.seconds_per_image))

    def name_in(self, language: str | None = None) -> str:
        """The template's name as it was at Start, in `language` (None: the active one)."""
        return in_language(self.name, self.name_zh, language)

    @property
    def shown_name(self) -> str:
        return self.name_in()

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
