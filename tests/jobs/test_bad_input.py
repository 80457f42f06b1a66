"""Bad input at the portal: target folders (empty, outside the roots, links leading out, a thousand
files, odd file names), file names with shell metacharacters, and a template disabled or deleted
after Start. Each case shows the user a plain message and touches no other job and no file.
Uploads go through the New job page; folder cases through `submit_job` with the SSH seam faked
(as in test_quotas_submit.py). Bad uploads and upload names: test_bad_input_uploads.py."""
import html
import io
import json
import os
import subprocess
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from PIL import Image

from cluster.sbatch import render_script
from jobs.errors import StartError
from jobs.job.start import start_job
from jobs.job.submit import sbatch_spec, submit_job
from jobs.models import Job, JobStatus, Target, TargetStatus
from tests.fake_ssh import run_here
from worker.manifest import Manifest

from .test_quotas_submit import NOTHING_SUBMITTED

ROOT = "/srv/ffportal/storage"


def upload(name, data, content_type="image/jpeg"):
    return SimpleUploadedFile(name, data, content_type=content_type)


def media_files() -> list[Path]:
    """Every file of every job (a refused Start keeps the user's good files as uploads, not in a job)."""
    root = Path(settings.MEDIA_ROOT)
    return sorted(p for p in root.rglob("*") if p.is_file() and "uploads" not in p.parts) if root.exists() else []


@pytest.fixture
def other_job(colleague, template, jpeg_bytes):
    """A colleague's job with uploads: no bad input of alice's may change it or its files."""
    return start_job(user=colleague, template=template, sources=[upload("bob.jpg", jpeg_bytes)], consent=True,
                     target_files=[upload("bob-target.jpg", jpeg_bytes)])


@pytest.fixture
def untouched(other_job):
    """Call it at the end of a test: asserts the other job's row and files are as they were."""
    before_files = {p: p.read_bytes() for p in media_files()}
    before_row = Job.objects.filter(pk=other_job.pk).values().get()

    def check(allow_new_jobs=0):
        assert Job.objects.filter(pk=other_job.pk).values().get() == before_row
        now = {p: p.read_bytes() for p in media_files() if p.is_relative_to(other_job.media_dir)}
        assert now == {p: b for p, b in before_files.items() if p.is_relative_to(other_job.media_dir)}
        assert Job.objects.exclude(pk=other_job.pk).count() == allow_new_jobs
        if not allow_new_jobs:
            assert set(media_files()) == set(before_files)  # nothing half-written
    return check


@pytest.fixture
def post_start(client, owner, template, jpeg_bytes):
    client.force_login(owner)

    def post(targets=None, source=None, **extra):
        data = {"template": template.pk, "consent": "on", "source": source or upload("face.jpg", jpeg_bytes),
                **extra}
        if targets is not None:
            data["targets"] = targets
        r = client.post(reverse("job-new"), data)
        return r, html.unescape(r.content.decode())
    return post


# --- target folders -------------------------------------------------------------------------------

#: a cluster whose target folders are real folders here: the folder listing command
#: (cluster.list_folder_argv) runs on this machine (the same sh, find and realpath a cluster has);
#: nothing else runs. sbatch answers Slurm job id 4242. (FakeSSH has no `listdir` or `realpath`
#: to answer: a listing that took one SFTP call per file would fail here.)
FOLDERS_HERE = {"on_run": {"sh": run_here, "sbatch": "4242\n"}, "on_batch": NOTHING_SUBMITTED}


@pytest.fixture
def storage(template, tmp_path):
    """The cluster profile's one allowed root, as a real folder; the work root (other jobs' faces) beside it."""
    root = tmp_path / "storage"
    root.mkdir()
    profile = template.cluster
    profile.target_roots = [str(root)]
    profile.work_root = str(tmp_path / "work")
    profile.save()
    return root


def folder_job(owner, template, jpeg_bytes, folder):
    return start_job(user=owner, template=template, sources=[upload("face.jpg", jpeg_bytes)], consent=True,
                     target_folder=str(folder))


def test_an_empty_target_folder_fails_the_job_with_a_plain_message(client, owner, template, jpeg_bytes, fake_ssh,
                                                                    storage, untouched):
    (storage / "empty").mkdir()
    (storage / "empty" / "notes.txt").write_text("x")
    (storage / "empty" / ".hidden.jpg").write_bytes(jpeg_bytes)
    runner = fake_ssh(**FOLDERS_HERE)
    job = folder_job(owner, template, jpeg_bytes, storage / "empty")
    assert submit_job(str(job.id)) is None
    job.refresh_from_db()
    message = (f"The folder {storage}/empty has no images or videos in it. "
               "Nothing ran. Use Run again and pick the folder with the folder browser.")
    assert job.status == JobStatus.FAILED and job.error == message
    assert not [c for c in runner.commands if c[0] == "sbatch"]
    client.force_login(owner)
    assert message in html.unescape(client.get(reverse("job-detail", args=[job.id])).content.decode())
    untouched(allow_new_jobs=1)


@pytest.mark.parametrize("folder", [f"{ROOT}/../../etc", "/etc", "/home/alice", f"{ROOT}/a/../../../etc",
                                    "storage/relative", f"{ROOT}/shoot\nmore"])
def test_it_refuses_a_folder_outside_the_roots_at_start(post_start, untouched, folder):
    r, body = post_start(target_folder=folder)
    assert "is outside the folders you may use" in body and "Pick one with the folder browser." in body
    untouched()


def test_a_symlink_inside_a_root_that_leads_out_fails_the_job(owner, template, jpeg_bytes, fake_ssh, storage,
                                                             tmp_path, untouched):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "passwd.jpg").write_bytes(jpeg_bytes)
    (storage / "escape").symlink_to(tmp_path / "elsewhere")
    runner = fake_ssh(**FOLDERS_HERE)
    job = folder_job(owner, template, jpeg_bytes, storage / "escape")
    submit_job(str(job.id))
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert job.error == (f"The folder {storage}/escape is outside the folders you may use. "
                         "Nothing ran. Use Run again and pick the folder with the folder browser.")
    assert not Target.objects.filter(job=job).exists()
    assert not [c for c in runner.commands if c[0] == "sbatch"]
    untouched(allow_new_jobs=1)


LINK_OUTSIDE = "skipped: it is a link that leads outside the folders you may use"


def test_a_file_link_that_leads_out_of_the_roots_is_a_refused_target(owner, template, jpeg_bytes, fake_ssh,
                                                                     storage, tmp_path, untouched):
    """A link to a file outside the roots (another job's uploaded face in the work root, a system
    file) is listed as a refused target with a plain reason: never handed to the worker by where
    it leads, never output. Its neighbours, and a link that stays inside, are ordinary targets."""
    shoot = storage / "shoot"
    shoot.mkdir()
    their_face = tmp_path / "work" / "jobs" / "other-job" / "sources" / "0-face.jpg"
    their_face.parent.mkdir(parents=True)
    their_face.write_bytes(jpeg_bytes)
    (shoot / "a.jpg").write_bytes(jpeg_bytes)
    (shoot / "b.jpg").symlink_to(their_face)
    (shoot / "c.jpg").symlink_to("/etc/hostname")
    (shoot / "d.jpg").symlink_to("a.jpg")
    runner = fake_ssh(**FOLDERS_HERE)
    job = folder_job(owner, template, jpeg_bytes, shoot)
    assert submit_job(str(job.id)) == "4242"
    job.refresh_from_db()
    targets = {t.name: t for t in job.targets.all()}
    assert {n: (t.status, t.message) for n, t in targets.items()} == {
        "a.jpg": (TargetStatus.WAITING, ""), "b.jpg": (TargetStatus.FAILED, LINK_OUTSIDE),
        "c.jpg": (TargetStatus.FAILED, LINK_OUTSIDE), "d.jpg": (TargetStatus.WAITING, "")}
    assert (job.total, job.failed) == (4, 2)
    assert targets["d.jpg"].cluster_path == f"{shoot}/a.jpg"  # where it really is
    manifest_text = runner.written[job.folder.manifest].decode()
    manifest = Manifest.from_dict(json.loads(manifest_text))
    assert [t.path for t in manifest.targets] == [f"{shoot}/a.jpg", f"{shoot}/b.jpg", f"{shoot}/c.jpg", f"{shoot}/a.jpg"]
    assert str(their_face) not in manifest_text and "/etc/hostname" not in manifest_text
    assert len([c for c in runner.commands if c[0] == "sh"]) == 1  # the folder: one command
    untouched(allow_new_jobs=1)


def test_a_folder_of_a_thousand_files_is_listed_in_one_command(owner, template, jpeg_bytes, fake_ssh, storage):
    big = storage / "big"
    big.mkdir()
    for i in range(1000):
        (big / f"img{i:04d}.jpg").write_bytes(b"x")
    template.chunk_size = 100
    template.save()
    runner = fake_ssh(**FOLDERS_HERE)
    job = folder_job(owner, template, jpeg_bytes, big)
    assert submit_job(str(job.id)) == "4242"
    assert len([c for c in runner.commands if c[0] == "sh"]) == 1
    assert job.targets.count() == 1000 and not job.targets.exclude(status=TargetStatus.WAITING).exists()


def test_odd_folder_file_names_get_short_plain_output_names(owner, template, jpeg_bytes, fake_ssh, storage):
    """A 254-byte file name keeps its name for the user, but its output name leaves room for `-2`
    and for the temporary names of a copy; control characters do not reach an output name."""
    shoot = storage / "shoot"
    shoot.mkdir()
    long = "照" * 83 + "x.jpg"  # 3 * 83 + 5 = 254 bytes
    for name in (long, "line\nbreak.jpg", "\u202eevil.jpg"):
        (shoot / name).write_bytes(jpeg_bytes)
    fake_ssh(**FOLDERS_HERE)
    job = folder_job(owner, template, jpeg_bytes, shoot)
    assert submit_job(str(job.id)) == "4242"
    outputs = {t.name: t.output_name for t in job.targets.all()}
    # shown without the bidi override (a name people read); read on the cluster where it is
    assert set(outputs) == {long, "line\nbreak.jpg", "evil.jpg"}
    assert outputs[long] == "照" * 58 + ".jpg"  # 178 bytes: cut at a whole character, extension kept
    assert outputs["line\nbreak.jpg"] == "line_break.jpg" and outputs["evil.jpg"] == "evil.jpg"
    assert job.targets.get(name=long).cluster_path == f"{shoot}/{long}"
    assert job.targets.get(name="evil.jpg").cluster_path == f"{shoot}/\u202eevil.jpg"


def test_the_manifest_carries_the_pixel_limit_and_bmp_targets_get_labelled_png_outputs(
        owner, template, jpeg_bytes, fake_ssh, storage, settings):
    """The worker refuses what the upload check refuses (MEDIA_MAX_PIXELS); a BMP, which has no
    place for the provenance label, is written as a PNG, in a folder and uploaded alike."""
    settings.MEDIA_MAX_PIXELS = 12_000_000
    buf = io.BytesIO()
    Image.new("RGB", (64, 48), "red").save(buf, "BMP")
    shoot = storage / "shoot"
    shoot.mkdir()
    (shoot / "scan.bmp").write_bytes(buf.getvalue())
    (shoot / "a.jpg").write_bytes(jpeg_bytes)
    runner = fake_ssh(**FOLDERS_HERE)
    job = folder_job(owner, template, jpeg_bytes, shoot)
    assert submit_job(str(job.id)) == "4242"
    manifest = Manifest.from_dict(json.loads(runner.written[job.folder.manifest]))
    assert manifest.engine.max_pixels == 12_000_000
    assert sorted(t.output for t in manifest.targets) == ["a.jpg", "scan.png"]
    sent = start_job(user=owner, template=template, sources=[upload("face.jpg", jpeg_bytes)], consent=True,
                     target_files=[upload("Scan.BMP", buf.getvalue(), "image/bmp")])
    assert [(t.name, t.output_name) for t in sent.targets.all()] == [("Scan.BMP", "Scan.png")]


# --- file names with shell metacharacters, quotes, newlines, unicode ------------------------------

NASTY = 'a"; rm -rf ~ $(touch PWNED) `id`\n名字\'s.jpg'


def test_a_nasty_file_name_is_stored_safely_and_never_executed(owner, template, jpeg_bytes, fake_ssh, tmp_path,
                                                                untouched):
    profile = template.cluster
    profile.work_root = str(tmp_path / "work $(touch PWNED) 'q'")
    profile.worker_python = "/bin/echo"
    profile.save()
    job = start_job(user=owner, template=template, sources=[upload(NASTY, jpeg_bytes)], consent=True,
                    target_files=[upload(NASTY, jpeg_bytes), upload("../../etc/" + NASTY, jpeg_bytes)])
    targets = list(job.targets.order_by("index"))
    assert [t.name for t in targets][0] == NASTY  # shown to the user as uploaded
    for t in targets:
        assert "\n" not in t.output_name and "/" not in t.output_name and not t.output_name.startswith(".")
        assert Path(t.upload.path).is_relative_to(job.media_dir) and "\n" not in t.upload.name
    assert len({t.output_name for t in targets}) == 2
    source = job.sources.get()
    assert Path(source.file.path).is_relative_to(job.media_dir) and "\n" not in source.file.name

    runner = fake_ssh(**FOLDERS_HERE)
    assert submit_job(str(job.id)) == "4242"
    root = job.folder.root
    manifest = Manifest.from_dict(json.loads(runner.written[f"{root}/manifest.json"]))
    assert [t.output for t in manifest.targets] == [t.output_name for t in targets]
    script = runner.written[f"{root}/job.sbatch"].decode()
    assert script == render_script(sbatch_spec(job, 1))
    path = tmp_path / "job.sbatch"
    path.write_text(script)
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0
    # Run it for real (the "worker" is /bin/echo): the $(...) in the path stays text.
    run = subprocess.run(["bash", str(path)], capture_output=True, text=True, cwd=tmp_path,
                         env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)})
    assert run.returncode == 0 and "$(touch PWNED)" in run.stdout
    assert not list(tmp_path.rglob("PWNED")) and not Path("PWNED").exists()
    untouched(allow_new_jobs=1)


# --- a template deleted or disabled after Start ---------------------------------------------------

@pytest.mark.parametrize("change", ["disable", "delete"])
def test_a_job_keeps_its_template_snapshot_and_submits(owner, template, jpeg_bytes, fake_ssh, change):
    job = start_job(user=owner, template=template, sources=[upload("face.jpg", jpeg_bytes)], consent=True,
                    target_files=[upload("t.jpg", jpeg_bytes)])
    snapshot = job.template_snapshot
    if change == "disable":
        template.is_active = False
        template.save()
    else:
        template.delete()
    runner = fake_ssh(**FOLDERS_HERE)
    assert submit_job(str(job.id)) == "4242"
    job.refresh_from_db()
    assert job.status == JobStatus.PENDING and job.template_snapshot == snapshot
    assert "#SBATCH --partition=gpu" in runner.written[job.folder.script(1)].decode()


def test_a_disabled_template_cannot_start_new_jobs(post_start, untouched, owner, template, jpeg_bytes):
    template.is_active = False
    template.save()
    r, body = post_start(targets=[upload("t.jpg", jpeg_bytes)])
    assert r.status_code == 200 and "Select a valid choice. That choice is not one of the available choices." in body
    with pytest.raises(StartError, match="Choose one of the templates offered to you."):
        start_job(user=owner, template=template, sources=[upload("face.jpg", jpeg_bytes)], consent=True,
                  target_files=[upload("t.jpg", jpeg_bytes)])
    untouched()
