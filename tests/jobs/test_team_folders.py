"""Team folders (docs/teams.md, jobs.clusters.team_roots): a team's folders are its members' on every
cluster, besides the profile's own; every other team's folder is refused, even inside a profile's
folder, like a folder outside (the same words: someone outside the team never learns it exists),
in the folder browser, the folder check and its "Did you mean", Start (the page and the API: the
job's team decides), the listing at submission, the manifest (for the worker) and the results'
"before" pictures. A team's job lives under `<work_root>/teams/<account>/` on the cluster; a job of
no team keeps its folder where it always was.

The cluster's storage is a real folder here: the portal's listing command runs on this machine
(tests/fake_ssh.py `run_here`), so links are resolved for real. The worker's side is
tests/worker/test_refused_roots.py, the real cluster's tests/e2e/test_team_folders_cluster.py."""
from __future__ import annotations

import dataclasses
import html
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.contrib.auth.models import Group, User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone

from jobs.clusters import team_roots
from jobs.clusters.team_roots import Roots
from jobs.job.submit import sbatch_spec, submit_job
from jobs.models import Job, JobStatus, Target, TargetStatus, Team
from jobs.results.files import input_path
from jobs.results.retention import delete_on_cluster
from jobs.watcher import outputs, poll
from tests.fake_ssh import run_here
from worker.manifest import Manifest

from .api_helpers import token_client
from .test_quotas_submit import NOTHING_SUBMITTED
from .test_watcher import CannedSlurm, make_job

#: a cluster whose storage is a folder here (the listing runs on this machine); sbatch says 4242
FOLDERS_HERE = {"on_run": {"sh": run_here, "sbatch": "4242\n"}, "on_batch": NOTHING_SUBMITTED}
OUTSIDE = "That folder is outside the folders you may use."


@pytest.fixture
def storage(template, tmp_path, jpeg_bytes):
    """The profile's one root, /…/storage, holding both teams' folders (teams/vfx, teams/post) and a
    shared folder with a photo, a link to a photo in post's folder and a link to post's shoot;
    vfx has a second folder outside the profile's (/…/data/vfx). The work root beside them."""
    root = tmp_path / "storage"
    for folder in (root / "teams" / "vfx", root / "teams" / "post" / "shoot", root / "shared", tmp_path / "data" / "vfx"):
        folder.mkdir(parents=True)
    for photo in (root / "teams" / "vfx" / "v.jpg", root / "teams" / "post" / "shoot" / "secret.jpg",
                  root / "shared" / "a.jpg", tmp_path / "data" / "vfx" / "x.jpg"):
        photo.write_bytes(jpeg_bytes)
    (root / "shared" / "their.jpg").symlink_to(root / "teams" / "post" / "shoot" / "secret.jpg")
    (root / "shared" / "post-shoot").symlink_to(root / "teams" / "post" / "shoot")
    profile = template.cluster
    profile.target_roots = [str(root)]
    profile.work_root = str(tmp_path / "work")
    profile.save()
    return SimpleNamespace(root=root, vfx=root / "teams" / "vfx", post=root / "teams" / "post",
                           shared=root / "shared", data=tmp_path / "data" / "vfx", work=tmp_path / "work")


@pytest.fixture
def teams(storage, team, owner):
    """vfx (alice's group, from conftest) and post (carol's); dave is in both. Their accounts exist
    on the cluster already (nothing asks sacctmgr here)."""
    made = {"local": timezone.now().isoformat()}
    vfx = Team.objects.create(group=team, slurm_account="vfx", target_roots=[str(storage.vfx), str(storage.data)],
                              accounts_made=made)
    post_group = Group.objects.create(name="post")
    post = Team.objects.create(group=post_group, slurm_account="post", target_roots=[str(storage.post)],
                               accounts_made=made)
    carol = User.objects.create_user("carol", "carol@example.org", "carol-pass-123")
    carol.groups.add(post_group)
    dave = User.objects.create_user("dave", "dave@example.org", "dave-pass-123")
    dave.groups.add(team, post_group)
    return SimpleNamespace(vfx=vfx, post=post, alice=owner, carol=carol, dave=dave)


def folders_of(user, **query):
    api, _key = token_client(user)
    return api.get("/api/v1/folders", query)


# ---- who may use which folder --------------------------------------------------------------------

def test_a_person_may_use_the_profiles_folders_and_their_teams_and_no_other_teams(template, storage, teams,
                                                                                  stranger):
    alice = team_roots.for_user(teams.alice, template.cluster)
    assert alice == Roots((str(storage.root), str(storage.vfx), str(storage.data)), (str(storage.post),))
    assert team_roots.for_user(stranger, template.cluster) == Roots(  # other teams' by team name
        (str(storage.root),), (str(storage.post), str(storage.vfx), str(storage.data)))
    assert team_roots.for_user(teams.dave, template.cluster).refused == ()
    assert alice.allows(f"{storage.shared}/a.jpg") and alice.allows(f"{storage.data}/x.jpg")
    assert not alice.allows(str(storage.post)) and not alice.allows(f"{storage.post}/shoot/secret.jpg")
    assert alice.allows(f"{storage.root}/teams/postcards")  # whole folder names, not prefixes
    # a job: the profile's and its own team's; the other team's refused, the user's other team's too
    assert team_roots.for_team(teams.vfx, template.cluster) == alice
    assert team_roots.for_team(None, template.cluster).allowed == (str(storage.root),)


def test_a_team_folder_inside_another_teams_is_its_own_again():
    nested = Roots(("/s", "/s/teams/post/lent-to-vfx"), ("/s/teams/post",))
    assert nested.allows("/s/teams/post/lent-to-vfx/a.jpg") and nested.allows("/s/teams/post/lent-to-vfx")
    assert not nested.allows("/s/teams/post/b.jpg") and not nested.allows("/s/teams/post")
    assert Roots(("/s/shared",), ("/s/shared",)).allows("/s/shared/x")  # named by two teams, one of them yours


# ---- the folder browser ----------------------------------------------------------------------------

def test_the_browser_shows_a_members_team_folders_as_roots_and_never_another_teams(template, storage, teams,
                                                                                   fake_ssh, stranger):
    fake_ssh(**FOLDERS_HERE)
    top = folders_of(teams.alice).json()["entries"]
    assert [e["path"] for e in top] == [str(storage.root), str(storage.vfx), str(storage.data)]
    assert [e["path"] for e in folders_of(teams.carol).json()["entries"]] == [str(storage.root), str(storage.post)]
    assert [e["name"] for e in folders_of(teams.alice, path=f"{storage.root}/teams").json()["entries"]] == ["vfx"]
    assert [e["name"] for e in folders_of(teams.carol, path=f"{storage.root}/teams").json()["entries"]] == ["post"]
    assert [e["name"] for e in folders_of(stranger, path=f"{storage.root}/teams").json()["entries"]] == []
    # in the shared folder, the link to post's photo and to post's shoot are not offered to alice
    assert [e["name"] for e in folders_of(teams.alice, path=str(storage.shared)).json()["entries"]] == ["a.jpg"]
    assert {e["name"] for e in folders_of(teams.carol, path=str(storage.shared)).json()["entries"]} == {
        "post-shoot", "a.jpg", "their.jpg"}
    assert [e["name"] for e in folders_of(teams.alice, path=str(storage.data)).json()["entries"]] == ["x.jpg"]


def test_another_teams_folder_is_refused_like_a_folder_outside_whether_it_exists_or_not(template, storage, teams,
                                                                                        fake_ssh):
    runner = fake_ssh(**FOLDERS_HERE)
    answers = {path: folders_of(teams.alice, path=path) for path in (
        "/etc", str(storage.post), f"{storage.post}/shoot", f"{storage.post}/no-such-folder", f"{storage.shared}/post-shoot")}
    assert {(r.status_code, r.json()["error"]) for r in answers.values()} == {(403, OUTSIDE)}
    assert len(runner.commands) == 1  # only the link was asked of the cluster: post's own paths were refused by name
    ok = folders_of(teams.carol, path=f"{storage.post}/shoot")
    assert ok.status_code == 200 and [e["name"] for e in ok.json()["entries"]] == ["secret.jpg"]


def test_the_browser_page_lists_the_team_folders_too(client, template, storage, teams, fake_ssh):
    fake_ssh(**FOLDERS_HERE)
    client.force_login(teams.alice)
    body = client.get(reverse("folder-browse")).content.decode()
    assert str(storage.data) in body and str(storage.vfx) in body and str(storage.post) not in body
    r = client.get(reverse("folder-browse"), {"path": f"{storage.data}"})
    assert r.status_code == 200 and "x.jpg" in r.content.decode()
    r = client.get(reverse("folder-browse"), {"path": f"{storage.post}/shoot"})
    assert r.status_code == 403 and OUTSIDE in r.content.decode() and "secret.jpg" not in r.content.decode()


# ---- the folder check and its "Did you mean" -----------------------------------------------------

def check(client, user, path) -> dict:
    client.force_login(user)
    return client.get(reverse("folder-check"), {"path": path}).json()


def outside_words(path, storage) -> str:
    return (f"{path} is outside the folders you may use. Folders you may use: {storage.root}, {storage.vfx}, "
            f"{storage.data}. Pick one with the folder browser.")


def test_the_folder_check_answers_another_teams_folder_as_outside_and_never_suggests_one(client, template, storage,
                                                                                        teams, fake_ssh):
    fake_ssh(**FOLDERS_HERE)
    for path in ("/etc", f"{storage.post}/shoot", f"{storage.post}/no-such-folder", f"{storage.shared}/post-shoot"):
        found = check(client, teams.alice, path)
        assert (found["ok"], found["summary"]) == (False, outside_words(path, storage)), path
    # a path that names the storage from elsewhere: carol is pointed at post's shoot, alice never
    moved = "/old-server/storage/teams/post/shoot"
    assert check(client, teams.alice, moved)["summary"] == outside_words(moved, storage)
    assert check(client, teams.carol, moved)["summary"] == (
        f"{moved} is not one of the folders you may use. Did you mean {storage.post}/shoot?")
    assert check(client, teams.alice, "teams/vfx")["summary"] == (
        f"teams/vfx is not one of the folders you may use. Did you mean {storage.vfx}?")
    assert check(client, teams.carol, f"{storage.post}/shoot")["summary"] == "1 photo found."
    found = check(client, teams.alice, str(storage.shared))
    assert found["ok"] and found["summary"] == "1 photo found."  # the link into post's folder is not counted


# ---- Start: the job's team decides -----------------------------------------------------------------

@pytest.fixture
def checked(settings, fake_ssh):
    """Start asks the cluster about the folder, as in production (the storage is here)."""
    settings.FOLDER_CHECK_ON_START = True
    return fake_ssh(**FOLDERS_HERE)


def start_page(client, user, template, jpeg_bytes, folder, **more):
    client.force_login(user)
    r = client.post(reverse("job-new"), {"template": template.pk, "consent": "on", "target_folder": str(folder),
                                         "source": SimpleUploadedFile("face.jpg", jpeg_bytes, "image/jpeg"), **more})
    return r, html.unescape(r.content.decode())


def start_api(user, template, jpeg_bytes, folder, **more):
    api, _key = token_client(user)
    return api.post("/api/v1/jobs", {"consent": "true", "template": template.slug, "target_folder": str(folder),
                                     "source": SimpleUploadedFile("face.jpg", jpeg_bytes, "image/jpeg"), **more})


def test_start_refuses_another_teams_folder_like_a_folder_outside(client, template, storage, teams, jpeg_bytes,
                                                                  checked):
    for folder in (f"{storage.post}/shoot", f"{storage.shared}/post-shoot"):
        r, body = start_page(client, teams.alice, template, jpeg_bytes, folder)
        assert r.status_code == 200 and outside_words(folder, storage) in body
        r = start_api(teams.alice, template, jpeg_bytes, folder)
        assert r.status_code == 400 and r.json() == {"error": outside_words(folder, storage), "field": "target_folder"}
    assert not Job.objects.exists()
    r = start_api(teams.alice, template, jpeg_bytes, storage.data)
    assert r.status_code == 201, r.content
    job = Job.objects.get(pk=r.json()["id"])
    assert (job.team, job.target_folder) == (teams.vfx, str(storage.data))
    r, _body = start_page(client, teams.carol, template, jpeg_bytes, f"{storage.post}/shoot")
    assert r.status_code == 302 and Job.objects.latest("created_at").team == teams.post


def test_a_member_of_two_teams_is_told_which_team_to_choose(client, template, storage, teams, jpeg_bytes, checked):
    folder = f"{storage.post}/shoot"
    words = f"{folder} is a folder of your team post. Choose the team post for this job, or pick another folder."
    r, body = start_page(client, teams.dave, template, jpeg_bytes, folder, team=teams.vfx.pk)
    assert r.status_code == 200 and words in body and "Did you mean" not in body
    r = start_api(teams.dave, template, jpeg_bytes, folder, team="vfx")
    assert r.status_code == 400 and r.json() == {"error": words, "field": "target_folder"}
    assert not Job.objects.exists()
    r, _body = start_page(client, teams.dave, template, jpeg_bytes, folder, team=teams.post.pk)
    assert r.status_code == 302
    assert Job.objects.get().team == teams.post
    r = start_api(teams.dave, template, jpeg_bytes, storage.data, team="post")  # vfx's, the other way round
    assert r.json()["error"] == (f"{storage.data} is a folder of your team vfx. Choose the team vfx for this job, "
                                 "or pick another folder.")


def test_run_again_keeps_the_jobs_team_so_its_team_folder_still_may_be_used(client, template, storage, teams,
                                                                             jpeg_bytes, checked):
    r, _body = start_page(client, teams.dave, template, jpeg_bytes, f"{storage.post}/shoot", team=teams.post.pk)
    posts = Job.objects.get()
    start_page(client, teams.dave, template, jpeg_bytes, storage.data, team=teams.vfx.pk)  # the last job: vfx's
    page = client.get(reverse("job-new"), {"again": posts.pk}).content.decode()
    assert re.search(rf'<option value="{teams.post.pk}" selected>', page), "Run again is for the job's own team"


# ---- submission: the listing, the manifest, the job's folder ---------------------------------------

def folder_job(user, template, jpeg_bytes, folder, team=None) -> Job:
    from jobs.job.start import start_job

    return start_job(user=user, template=template, sources=[SimpleUploadedFile("face.jpg", jpeg_bytes, "image/jpeg")],
                     consent=True, target_folder=str(folder), team=team)


def test_submission_refuses_a_link_into_another_teams_folder_and_the_manifest_carries_refused_roots(
        template, storage, teams, jpeg_bytes, fake_ssh):
    runner = fake_ssh(**FOLDERS_HERE)
    job = folder_job(teams.alice, template, jpeg_bytes, storage.shared)
    assert job.team == teams.vfx and submit_job(str(job.id)) == "4242"
    job.refresh_from_db()
    assert {t.name: (t.status, t.message) for t in job.targets.all()} == {
        "a.jpg": (TargetStatus.WAITING, ""),
        "their.jpg": (TargetStatus.FAILED, "skipped: it is a link that leads outside the folders you may use")}
    manifest_text = runner.written[job.folder.manifest].decode()
    manifest = Manifest.from_dict(json.loads(manifest_text))
    assert manifest.version == 2
    assert manifest.target_roots == (str(storage.root), str(storage.vfx), str(storage.data))
    assert manifest.refused_roots == (str(storage.post),)
    assert "secret.jpg" not in manifest_text  # the refused link keeps its own path for the worker to refuse again
    # the job's folder: under its team's account in the work root
    assert job.folder.root == f"{storage.work}/teams/vfx/jobs/{job.id}"
    assert job.folder.root + "/manifest.json" in runner.written and all(
        path.startswith(f"{storage.work}/teams/vfx/jobs/{job.id}/") for path in runner.written)
    assert f"{storage.work}/teams/vfx/jobs/{job.id}/logs" in runner.made
    spec = sbatch_spec(job, n_tasks=1)
    assert spec.log_dir.startswith(job.folder.root) and spec.account == "vfx"
    # in a container: the cluster's folders read-only, and the team's folder the job's folder lies in
    # (a team folder need not exist on every cluster: apptainer would refuse to bind a missing one)
    image = dataclasses.replace(job.snapshot, container_image="/srv/images/worker.sif").to_json()
    job.template_snapshot = image
    assert sbatch_spec(job, n_tasks=1).container_binds == [f"{storage.root}:{storage.root}:ro",
                                                          f"{job.folder.root}:{job.folder.root}"]
    in_data = folder_job(teams.alice, template, jpeg_bytes, storage.data, team=teams.vfx)
    in_data.template_snapshot = image
    assert sbatch_spec(in_data, n_tasks=1).container_binds == [
        f"{storage.root}:{storage.root}:ro", f"{storage.data}:{storage.data}:ro",
        f"{in_data.folder.root}:{in_data.folder.root}"]


def test_a_folder_of_another_team_fails_at_submission_as_outside(template, storage, teams, jpeg_bytes, fake_ssh):
    """Storage changed after Start (a folder became a link into post's): nothing runs."""
    runner = fake_ssh(**FOLDERS_HERE)
    (storage.shared / "day2").mkdir()
    job = folder_job(teams.alice, template, jpeg_bytes, storage.shared / "day2")
    (storage.shared / "day2").rmdir()
    (storage.shared / "day2").symlink_to(storage.post / "shoot")
    assert submit_job(str(job.id)) is None
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.error == (
        f"The folder {storage.shared}/day2 is outside the folders you may use. "
        "Nothing ran. Use Run again and pick the folder with the folder browser.")
    assert not job.targets.exists() and not [c for c in runner.commands if c[0] == "sbatch"]


def test_a_job_of_no_team_keeps_its_folder_where_it_always_was(template, storage, teams, stranger, jpeg_bytes,
                                                               fake_ssh):
    runner = fake_ssh(**FOLDERS_HERE)
    job = folder_job(stranger, template, jpeg_bytes, storage.shared)
    assert (job.team, job.slurm_account) == (None, "")
    assert job.folder.root == f"{storage.work}/jobs/{job.id}"
    submit_job(str(job.id))
    manifest = Manifest.from_dict(json.loads(runner.written[f"{storage.work}/jobs/{job.id}/manifest.json"]))
    assert manifest.target_roots == (str(storage.root),)
    assert manifest.refused_roots == (str(storage.post), str(storage.vfx), str(storage.data))
    # every team's folder is refused for a job of no team; without teams' folders the manifest is as before
    Team.objects.update(target_roots=[])
    job = folder_job(stranger, template, jpeg_bytes, storage.shared)
    submit_job(str(job.id))
    data = json.loads(runner.written[job.folder.manifest])
    assert "refused_roots" not in data and data["target_roots"] == [str(storage.root)]


def test_a_team_job_keeps_its_folder_whatever_happens_to_the_team(template, storage, teams, jpeg_bytes):
    job = folder_job(teams.alice, template, jpeg_bytes, storage.shared)
    root = job.folder.root
    teams.vfx.group.delete()  # the team goes; the job keeps its account, and so its folder
    job = Job.objects.get(pk=job.pk)
    assert (job.team, job.slurm_account, job.folder.root) == (None, "vfx", root)


def test_an_account_names_a_folder_so_it_is_never_dots_only(template):
    from cluster.slurm.accounts import checked_account

    for bad in (".", ".."):
        with pytest.raises(ValueError):
            checked_account(bad)
        with pytest.raises(ValueError):
            template.cluster.job_folder("j", bad)
    assert template.cluster.job_folder("j", "v.fx").root == "/srv/ffportal/work/teams/v.fx/jobs/j"


def test_the_watcher_the_fetches_and_the_clean_up_find_a_team_jobs_folder(template, storage, teams, jpeg_bytes,
                                                                          fake_ssh, inline_rq):
    job = make_job(teams.alice, template, "77", tasks=1, team=teams.vfx, slurm_account="vfx")
    folder = f"{storage.work}/teams/vfx/jobs/{job.id}"
    runner = fake_ssh(on_batch=CannedSlurm(), serve=jpeg_bytes)
    poll.poll_profile(template.cluster)
    find = runner.batches[0][3]
    assert find[0] == "find" and f"{folder}/out/progress" in find
    Target.objects.filter(job=job).update(status=TargetStatus.DONE)
    assert outputs.fetch_outputs(str(job.id), [0]) == 1
    assert runner.fetched == [f"{folder}/out/outputs/0.jpg"]
    # the job's files deleted: its folder on the cluster goes, in the team's folder of the work root
    Path(folder, "out").mkdir(parents=True)
    Path(storage.work, "jobs", "other").mkdir(parents=True)
    fake_ssh(on_run=run_here)
    Job.objects.filter(pk=job.pk).update(status=JobStatus.COMPLETED, files_deleted_at=timezone.now())
    assert delete_on_cluster(str(job.id))
    assert not Path(folder).exists() and Path(storage.work, "jobs", "other").is_dir()


def test_a_jobs_folder_is_named_in_one_place():
    """Submission, retries, the watcher, its fetches and the clean-up all read `Job.folder`, which
    asks `ClusterProfile.job_folder`: nothing else in the portal builds a job folder's path."""
    jobs = Path(__file__).resolve().parents[2] / "jobs"
    builders = {str(p.relative_to(jobs.parent)) for p in jobs.rglob("*.py") if "migrations" not in p.parts
                for line in p.read_text().splitlines() if re.search(r"JobFolder\(|\.job_folder\(", line)}
    assert builders == {"jobs/models/cluster_profile.py", "jobs/models/job.py"}


# ---- results: the "before" picture ------------------------------------------------------------------

def test_a_before_picture_in_another_teams_folder_is_never_served(client, template, storage, teams, jpeg_bytes):
    profile = template.cluster
    profile.path_mapping = [[str(storage.root), str(storage.root)], [str(storage.data), str(storage.data)]]
    profile.save()
    job = make_job(teams.alice, template, "78", tasks=1, team=teams.vfx, slurm_account="vfx",
                   target_folder=str(storage.shared))
    client.force_login(teams.alice)

    def before(cluster_path):
        Target.objects.filter(job=job, index=0).update(cluster_path=cluster_path)
        return input_path(Target.objects.select_related("job__cluster").get(job=job, index=0)), client.get(
            reverse("job-input", args=[job.id, 0])).status_code

    assert before(f"{storage.shared}/a.jpg") == (storage.shared / "a.jpg", 200)
    assert before(f"{storage.data}/x.jpg") == (storage.data / "x.jpg", 200)  # its team's folder outside the profile's
    assert before(f"{storage.post}/shoot/secret.jpg") == (None, 404)
    assert before(f"{storage.shared}/their.jpg") == (None, 404)  # a link into post's folder, read on the portal
    carols = make_job(teams.carol, template, "79", tasks=1, team=teams.post, slurm_account="post")
    Target.objects.filter(job=carols, index=0).update(cluster_path=f"{storage.shared}/their.jpg")
    assert input_path(Target.objects.get(job=carols, index=0)) == storage.post / "shoot" / "secret.jpg"
