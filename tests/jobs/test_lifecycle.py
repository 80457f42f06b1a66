"""The job state machine (jobs/job/lifecycle.py): one table, conditional moves, published and audited
only by the call that made the move."""
import ast
from pathlib import Path

import pytest

from jobs.job import lifecycle
from jobs.job.lifecycle import TRANSITIONS, move, request_cancel
from jobs.models import AuditEntry, Job, JobStatus

from .api_helpers import make_job

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def published(monkeypatch):
    sent = []
    monkeypatch.setattr(lifecycle, "publish_job", lambda job: sent.append((str(job.id), job.status)))
    return sent


@pytest.mark.django_db
def test_it_makes_a_move_once_however_often_it_is_asked(owner, template, published,
                                                        django_capture_on_commit_callbacks):
    job = make_job(owner, template, status=JobStatus.RUNNING)
    stale = Job.objects.get(pk=job.pk)  # a second process holding the same row
    with django_capture_on_commit_callbacks(execute=True):
        assert move(job, "finish", to=JobStatus.COMPLETED)
        assert not move(stale, "finish", to=JobStatus.FAILED)
    assert Job.objects.get(pk=job.pk).status == JobStatus.COMPLETED
    assert published == [(str(job.id), JobStatus.COMPLETED)]  # the loser publishes nothing


@pytest.mark.django_db
def test_it_publishes_only_after_the_transaction_commits(owner, template, published,
                                                          django_capture_on_commit_callbacks):
    job = make_job(owner, template, status=JobStatus.PENDING)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert move(job, "started")
    assert published == []  # not yet: the page would resync to the old state
    for callback in callbacks:
        callback()
    assert published == [(str(job.id), JobStatus.RUNNING)]


@pytest.mark.django_db
@pytest.mark.parametrize("name, to", [("started", JobStatus.COMPLETED), ("retry", JobStatus.CANCELLED),
                                      ("finish", JobStatus.QUEUED)])
def test_it_refuses_a_move_the_table_does_not_have(owner, template, name, to):
    job = make_job(owner, template, status=JobStatus.RUNNING)
    with pytest.raises(ValueError):
        move(job, name, to=to)
    assert Job.objects.get(pk=job.pk).status == JobStatus.RUNNING


@pytest.mark.django_db
def test_a_move_from_a_state_outside_its_sources_changes_nothing(owner, template, published):
    job = make_job(owner, template, status=JobStatus.COMPLETED)
    assert not move(job, "lose")
    assert Job.objects.get(pk=job.pk).status == JobStatus.COMPLETED and published == []


@pytest.mark.django_db
def test_a_move_with_an_audit_action_is_audited_by_its_actor(owner, template, published):
    job = make_job(owner, template, status=JobStatus.FAILED)
    assert move(job, "retry", audit_action="job.retry", actor=owner, details={"attempt": 2}, attempt=2)
    entry = AuditEntry.objects.get(action="job.retry")
    assert entry.actor == owner and entry.target_id == str(job.id) and entry.details == {"attempt": 2}
    assert not move(job, "retry", audit_action="job.retry", actor=owner)  # lost race: no second entry
    assert AuditEntry.objects.filter(action="job.retry").count() == 1


@pytest.mark.django_db
def test_cancelling_a_queued_job_cancels_it_at_once_and_publishes(owner, template, published,
                                                                 django_capture_on_commit_callbacks):
    job = make_job(owner, template, status=JobStatus.QUEUED)
    with django_capture_on_commit_callbacks(execute=True):
        assert request_cancel(job, actor=owner)
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED and job.cancel_requested and job.finished_at
    assert published == [(str(job.id), JobStatus.CANCELLED)]
    assert AuditEntry.objects.get(action="job.cancel").details["status_before"] == "queued"


@pytest.mark.django_db
def test_a_submission_cancelled_before_sbatch_is_published(owner, template, published,
                                                            django_capture_on_commit_callbacks):
    # The submission reads the cancel flag; its move to `cancelled` reaches the live pages too.
    job = make_job(owner, template, status=JobStatus.SUBMITTING)
    Job.objects.filter(pk=job.pk).update(cancel_requested=True)
    from jobs.job.submit import submit_job

    with django_capture_on_commit_callbacks(execute=True):
        assert submit_job(str(job.id)) is None
    assert Job.objects.get(pk=job.pk).status == JobStatus.CANCELLED
    assert published == [(str(job.id), JobStatus.CANCELLED)]


def test_every_state_is_reachable_and_every_end_is_in_the_table():
    targets = {t for tr in TRANSITIONS.values() for t in tr.targets}
    sources = {s for tr in TRANSITIONS.values() for s in tr.sources}
    assert set(JobStatus.values) == targets | sources


#: the modules that make a row's conditional state change (`jobs.transitions.update_if`) themselves
MOVERS = {"jobs/job/lifecycle.py", "jobs/bookings/lifecycle.py", "jobs/webhooks/deliver.py"}


def test_no_module_moves_a_job_behind_the_table():
    """A job or a booking moves through its lifecycle's `move` (its table), and the conditional
    UPDATE (`jobs.transitions.update_if`) is called by the lifecycles (and the webhook deliveries) only."""
    offenders = []
    for path in (ROOT / "jobs").rglob("*.py"):
        name = str(path.relative_to(ROOT))
        if name in MOVERS or "migrations" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr == "update_if" or (node.func.attr == "move" and not (
                    isinstance(node.func.value, ast.Name) and node.func.value.id == "lifecycle")):
                offenders.append(f"{name}:{node.lineno}")
    assert not offenders, offenders


@pytest.mark.django_db
def test_writing_many_rows_sets_each_its_own_values_and_only_the_columns_named(owner, template):
    """`transitions.write_many` (the watcher's cycle): every row gets its own values in one round
    trip; a column not named keeps what another writer put there meanwhile (an RQ worker storing an
    output), and a row listed twice is written with its last values."""
    from jobs import transitions
    from jobs.models import Target

    job = make_job(owner, template, status="running", targets=3, tasks=1)
    rows = list(Target.objects.filter(job=job).order_by("index"))
    Target.objects.filter(job=job, index=1).update(output_file="outputs/1.jpg")  # after the rows were read
    for row, seconds in zip(rows, (0.5, 1.5, 2.5)):
        row.status, row.seconds, row.faces_swapped = "done", seconds, row.index + 1
    rows[2].seconds = 9.0
    transitions.write_many(rows + [rows[2]], ["faces_swapped", "seconds", "status"])
    got = list(Target.objects.filter(job=job).order_by("index").values_list("status", "seconds", "faces_swapped",
                                                                          "output_file"))
    assert got == [("done", 0.5, 1, ""), ("done", 1.5, 2, "outputs/1.jpg"), ("done", 9.0, 3, "")]
