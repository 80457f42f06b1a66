"""Which model files a job's tasks used, kept on the job from the tasks' progress records.

Every task writes the files its engine loaded (name + SHA-256) into its record (`worker.progress`,
`models`); the watcher passes the records it reads here each cycle. The job keeps the union over
all its tasks and attempts, so a job whose tasks ran on two versions of a file (the models folder
was replaced under an unpinned template while it ran) shows both.
"""
from __future__ import annotations

from typing import Iterable

from jobs.models import Job
from worker.progress import TaskProgress


def models_in(records: Iterable[TaskProgress], known: Iterable[dict] = ()) -> list[dict]:
    """The union of `known` and the records' model files: [{"name", "sha256"}], sorted, each once."""
    seen = {(m["name"], m["sha256"]) for m in known if isinstance(m, dict) and {"name", "sha256"} <= set(m)}
    for record in records:
        for m in record.models or []:
            if isinstance(m, dict) and isinstance(m.get("name"), str) and isinstance(m.get("sha256"), str):
                seen.add((m["name"], m["sha256"]))
    return [{"name": name, "sha256": sha} for name, sha in sorted(seen)]


def record_models_used(job: Job, records: list[TaskProgress]) -> bool:
    """Store what the records add to `job.models_used`; True when something new was stored.
    Only the watcher writes the field, once per job and cycle, so a plain update is enough."""
    used = models_in(records, job.models_used or [])
    if used == (job.models_used or []):
        return False
    Job.objects.filter(pk=job.pk).update(models_used=used)
    job.models_used = used
    return True
