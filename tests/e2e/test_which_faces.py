"""Which faces are replaced is the user's choice per job, and the worker on the real cluster follows
it: the largest face only, or only faces like a reference photo (a group photo keeps its other people)."""
from jobs.models import JobStatus
from tests.e2e.conftest import SAMPLES, fill, run_rq, watch_until
from tests.e2e.test_end_to_end import start


def test_the_largest_face_only_and_a_reference_person_only(api, local, folder, redis_queue):
    fill(folder, {"group.jpg": SAMPLES / "t1.jpg", "hanks.png": SAMPLES / "Tom_Hanks_54745.png"})
    largest = start(api, folder, name="largest only", face_selector="one")
    with open(SAMPLES / "Tom_Hanks_54745.png", "rb") as person:
        like_him = start(api, folder, name="Tom only", face_selector="reference", reference=person)
    assert largest.snapshot.face_selector == "one" and like_him.snapshot.face_selector == "reference"
    assert like_him.reference_face
    run_rq(redis_queue)
    for job in (largest, like_him):
        job = watch_until(job, {JobStatus.COMPLETED, JobStatus.PARTIALLY_FAILED, JobStatus.FAILED})
        assert job.status == JobStatus.COMPLETED, (job.error, [(t.name, t.status, t.message) for t in job.targets.all()])
        swapped = {t.name: (t.faces_found, t.faces_swapped) for t in job.targets.all()}
        if job.pk == largest.pk:
            # six people in the group photo: only one of them changes
            assert swapped["group.jpg"][0] >= 5 and swapped["group.jpg"][1] == 1
            assert swapped["hanks.png"][1] == 1
        else:
            # the person of the reference photo changes; the group photo (other people) is left as it is
            assert swapped["hanks.png"][1] == 1
            assert swapped["group.jpg"][1] == 0
