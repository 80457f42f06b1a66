"""The content check on the REAL local cluster: a real job with the check on, refusing the face
labels (so a real refusal happens without indecent images), has its face result held back on the
node: deleted there, never fetched, the target failed in plain words, the refusal audited; a photo
without a face passes the same check and is delivered. The worker runs the real NudeNet model from
the repo's .venv (scripts/cluster/env.sh: FFP_PYTHON)."""
from __future__ import annotations

import os

import numpy as np
from PIL import Image

from jobs.models import AuditEntry, JobStatus, SafetyPolicy, TargetStatus
from tests.e2e.conftest import SAMPLES, fill, run_rq, watch_until
from tests.e2e.test_end_to_end import start

ENDED = {JobStatus.COMPLETED, JobStatus.PARTIALLY_FAILED, JobStatus.FAILED}


def test_a_refused_result_is_held_back_on_the_node_and_audited(api, local, folder, redis_queue):
    # Results only: the source (a face) would itself be refused by these labels.
    SafetyPolicy.objects.create(pk=1, enabled=True, check_sources=False, check_outputs=True,
                                refuse="FACE_FEMALE, FACE_MALE", min_score=0.3)
    fill(folder, {"astronaut.png": SAMPLES / "astronaut.png"})
    Image.fromarray(np.full((120, 160, 3), 128, np.uint8)).save(folder / "wall.png")
    os.chmod(folder / "wall.png", 0o644)

    job = start(api, folder, name="checked")
    run_rq(redis_queue)
    job.refresh_from_db()
    assert job.slurm_job_id, job.error
    job = watch_until(job, ENDED)

    targets = {t.name: t for t in job.targets.all()}
    held, wall = targets["astronaut.png"], targets["wall.png"]
    assert job.status == JobStatus.PARTIALLY_FAILED, (job.error, [(t.name, t.status, t.message) for t in targets.values()])
    assert held.status == TargetStatus.FAILED and not held.output_file
    assert held.message == "the result was held back by the content check and deleted; it is not delivered"
    assert wall.status == TargetStatus.NO_FACE and wall.output_file  # checked, passed, delivered
    assert not os.path.exists(job.folder.output("astronaut.png"))  # deleted on the node (shared storage here)
    [entry] = AuditEntry.objects.filter(action="content_check.refused")
    assert entry.target_id == str(job.pk) and entry.details["kind"] == "output"
    assert entry.details["target_index"] == held.index and entry.details["labels"][0][0] in ("FACE_FEMALE", "FACE_MALE")
    assert "astronaut" not in str(entry.details)
