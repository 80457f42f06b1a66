"""A job's template snapshot (jobs/models/snapshot.py) and the choices the portal takes from the worker."""
import dataclasses

import pytest

from jobs.models import Job, Target, TargetStatus, Template, TemplateSnapshot
from jobs.models.job import OK_TARGET_STATUSES
from jobs.models.template import ENGINE_CHOICES, FACE_SELECTOR_CHOICES
from worker import choices

from .api_helpers import make_job


@pytest.mark.django_db
def test_a_job_reads_its_snapshot_typed_and_never_the_edited_template(owner, template):
    job = make_job(owner, template)
    template.mem, template.partition = "64G", "other"
    template.save()
    snap = Job.objects.get(pk=job.pk).snapshot
    assert isinstance(snap, TemplateSnapshot) and snap == TemplateSnapshot.from_json(job.template_snapshot)
    assert (snap.mem, snap.partition, snap.slug, snap.chunk_size, snap.version) == ("2G", "gpu", "quick-gpu", 2, 1)


def test_an_older_snapshot_still_reads():
    # Written before seconds_per_image, max_mem and versions existed; with a key this portal no longer knows.
    old = {"slug": "s", "name": "S", "partition": "gpu", "time_limit": "00:10:00", "chunk_size": "4", "mem": "2G",
           "array_limit": None, "retired_key": 1}
    snap = TemplateSnapshot.from_json(old)
    assert (snap.chunk_size, snap.seconds_per_image, snap.max_mem, snap.version) == (4, 3.0, "", 1)
    assert TemplateSnapshot.from_json(snap.to_json()) == snap
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.mem = "1G"


def test_the_choices_are_the_workers():
    assert [value for value, _label in ENGINE_CHOICES] == list(choices.ENGINE_NAMES)
    assert [value for value, _label in FACE_SELECTOR_CHOICES] == list(choices.FACE_SELECTORS)
    # the worker's, plus the portal's own: not started yet, and stopped by a cancel
    assert set(TargetStatus.values) == {"waiting", "cancelled", *choices.TARGET_STATUSES}
    assert set(OK_TARGET_STATUSES) == set(choices.SUCCESS_STATUSES)
    assert Template._meta.get_field("engine").choices == ENGINE_CHOICES
    assert Target._meta.get_field("status").choices == TargetStatus.choices
