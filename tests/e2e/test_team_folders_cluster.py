"""Team folders on the REAL local cluster (22.05 on this host, real SSH, real Slurm; docs/teams.md):
a team's job on its team folder runs, charged to the team's account, and keeps its files in the
work root's folder of that team (`<work_root>/teams/<account>/jobs/<id>`); a link in a shared folder
that leads into ANOTHER team's folder (inside the same storage root) is refused when the folder is
listed, and again on the node when a photo is swapped for such a link after the listing: the other
photos finish, the linked ones fail with a plain message, and nothing of the other team's folder
is read. The Slurm accounts made are removed afterwards: slurmdbd outlives the test."""
import json
import os
import uuid
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User

from jobs.models import JobStatus, TargetStatus, Team, Template
from tests.e2e import sites
from tests.e2e.conftest import SAMPLES, fill, run_rq, watch_until
from tests.e2e.test_end_to_end import slurm, start
from tests.e2e.test_symlinks import relink_while_held
from tests.e2e.test_teams_cluster import forget

FINAL = {JobStatus.COMPLETED, JobStatus.PARTIALLY_FAILED, JobStatus.FAILED}
#: what the listing and the worker say of a link into another team's folder: as of one leading outside
LINK_OUTSIDE = "skipped: it is a link that leads outside the folders you may use"


@pytest.fixture
def teams(local, folder):
    """Team A (the demo user's: the `api` fixture's user) with its folder `<folder>/a`, team B (not
    theirs) with `<folder>/b`, both inside the cluster's storage root; each its own new account."""
    a, b = (f"e2e-{uuid.uuid4().hex[:8]}" for _ in range(2))
    made = []
    for account in (a, b):
        (folder / account).mkdir()
        os.chmod(folder / account, 0o755)
        group = Group.objects.create(name=f"Team {account}")
        made.append(Team.objects.create(group=group, slurm_account=account, target_roots=[str(folder / account)]))
    User.objects.get(username="demo").groups.add(made[0].group)
    site = sites.site("22.05")
    try:
        yield made[0], made[1]
    finally:  # the other tests' teams are as seed_local left them; slurmdbd forgets the accounts
        for team in made:
            team.group.delete()
        forget(site, site.profile.username, a)


def manifest_on_the_cluster(job) -> dict:
    return json.loads(Path(job.folder.manifest).read_text())


def test_a_team_job_on_its_team_folder_runs_in_the_teams_folder_of_the_work_root(api, local, folder, teams,
                                                                                 redis_queue):
    mine, theirs = teams
    fill(folder / mine.slurm_account, {"a.jpg": SAMPLES / "t1.jpg", "b.png": SAMPLES / "astronaut.png"})
    job = start(api, folder / mine.slurm_account, template="cpu-small", team=mine.slurm_account)
    assert (job.team, job.slurm_account) == (mine, mine.slurm_account)
    run_rq(redis_queue)
    job.refresh_from_db()
    assert job.slurm_job_id, job.error
    root = Path(local.work_root, "teams", mine.slurm_account, "jobs", str(job.id))
    assert job.folder.root == str(root) and root.is_dir()
    assert not Path(local.work_root, "jobs", str(job.id)).exists()  # where a job of no team lives
    manifest = manifest_on_the_cluster(job)
    assert manifest["target_roots"] == [*local.target_roots, str(folder / mine.slurm_account)]
    assert str(folder / theirs.slurm_account) in manifest["refused_roots"]
    job = watch_until(job, FINAL)
    assert job.status == JobStatus.COMPLETED, (job.error, [(t.name, t.status, t.message) for t in job.targets.all()])
    assert sorted(os.listdir(job.folder.outputs)) == ["a.jpg", "b.png"]
    assert all(t.output_file for t in job.targets.all())  # fetched from the team's folder of the work root
    out = slurm("sacct", "-n", "-X", "-P", "-j", job.slurm_job_id, "-o", "JobID,Account,State")
    assert {line.split("|")[1] for line in out.splitlines() if line.strip()} == {mine.slurm_account}, out


def test_a_link_into_another_teams_folder_is_refused_when_listed_and_on_the_node(api, local, folder, teams,
                                                                                 redis_queue):
    """One photo a task, one task at a time: `their.png` is a link into team B's folder when the
    folder is listed; `b.png` is a real photo then, and becomes such a link while its task is held.
    Without the manifest's refused_roots the node would read it: it lies inside the storage root."""
    mine, theirs = teams
    secret = folder / theirs.slurm_account / "secret.png"
    fill(folder / theirs.slurm_account, {"secret.png": SAMPLES / "Tom_Hanks_54745.png"})
    shared = folder / "shared"
    shared.mkdir()
    os.chmod(shared, 0o755)
    fill(shared, {"a.jpg": SAMPLES / "t1.jpg", "b.png": SAMPLES / "astronaut.png"})
    (shared / "their.png").symlink_to(secret)
    template = Template.objects.get(slug="cpu-small")
    template.pk, template.slug, template.name = None, "cpu-one-by-one-teams", "CPU, one image a task, one task at a time"
    template.chunk_size, template.array_limit = 1, 1
    template.save()

    # The folder browser does not offer the link (team A's view of the shared folder).
    listing = api.get("/api/v1/folders", {"path": str(shared)}).json()
    assert [e["name"] for e in listing["entries"]] == ["a.jpg", "b.png"]
    assert api.get("/api/v1/folders", {"path": str(folder / theirs.slurm_account)}).status_code == 403

    job = start(api, shared, template=template.slug, team=mine.slurm_account)
    run_rq(redis_queue)
    job.refresh_from_db()
    assert job.slurm_job_id, job.error
    assert {t.name: (t.status, t.message) for t in job.targets.all()} == {
        "a.jpg": (TargetStatus.WAITING, ""), "b.png": (TargetStatus.WAITING, ""),
        "their.png": (TargetStatus.FAILED, LINK_OUTSIDE)}  # refused when listed
    manifest = manifest_on_the_cluster(job)
    assert str(folder / theirs.slurm_account) in manifest["refused_roots"] and str(secret) not in json.dumps(manifest)
    relink_while_held(job, 1, shared / "b.png", secret)
    job = watch_until(job, FINAL)
    targets = {t.name: t for t in job.targets.all()}
    assert job.status == JobStatus.PARTIALLY_FAILED, job.error
    assert {n: t.status for n, t in targets.items()} == {
        "a.jpg": TargetStatus.DONE, "b.png": TargetStatus.FAILED, "their.png": TargetStatus.FAILED}
    assert targets["b.png"].message == LINK_OUTSIDE  # the worker's own words, on the node
    assert targets["their.png"].message == LINK_OUTSIDE
    assert sorted(os.listdir(job.folder.outputs)) == ["a.jpg"]  # nothing of team B's photo made it out
    assert not targets["b.png"].output_file and not targets["their.png"].output_file
    states = [t.state for t in job.tasks.order_by("index")]
    assert states == ["COMPLETED", "FAILED", "FAILED"], states  # exit 1: the task's one target failed
