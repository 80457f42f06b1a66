"""Bad input at the portal: each case shows the user a plain message and touches no
other job and no file. Uploads go through the New job page; folder cases through `submit_job`
with the SSH seam faked (as in test_quotas_submit.py)."""
import html
import io
import json
import os
import re
import struct
import subprocess
import tracemalloc
import zipfile
import zlib
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from PIL import Image

from cluster import CommandResult
from cluster.sbatch import render_script
from jobs.models import Job, JobStatus, Target, TargetStatus
from jobs.errors import StartError, UploadRejected
from jobs.job.start import start_job
from jobs.job.submit import sbatch_spec, submit_job
from jobs.uploads.content import UNNAMED, check_upload, safe_name
from worker.manifest import Manifest

from .test_watcher import EMPTY_SQUEUE

ROOT = "/srv/ffportal/storage"
ELF = b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 200


def upload(name, data, content_type="image/jpeg"):
    return SimpleUploadedFile(name, data, content_type=content_type)


def png_header_only(width, height) -> bytes:
    """A PNG whose header claims width x height, with a few bytes of pixel data (a decompression bomb's shape)."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b""))


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


# --- uploads, checked by content ------------------------------------------------------------------

@pytest.mark.parametrize("name, data, field, message", [
    ("holiday.jpg", ELF, "targets", "Target holiday.jpg: this is not an image or a video (MP4, MOV, MKV, WebM)"),
    ("archive.jpg", None, "source", "Source archive.jpg: this is not an image (JPEG, PNG, WebP)"),
    ("clip.mp4", b"just some text, not a video", "targets", "Target clip.mp4: this is not an image or a video"),
    ("empty.jpg", b"", "targets", "Target empty.jpg: the file is empty (0 bytes); upload it again"),
])
def test_it_refuses_uploads_that_are_not_what_they_claim(post_start, untouched, jpeg_bytes, name, data, field, message):
    if data is None:  # a zip renamed .jpg
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr("a.jpg", jpeg_bytes)
        data = buf.getvalue()
    f = upload(name, data)
    r, body = post_start(targets=[f] if field == "targets" else [upload("ok.jpg", jpeg_bytes)],
                         source=f if field == "source" else None)
    assert r.status_code == 200 and message in body
    untouched()


def test_it_refuses_a_truncated_jpeg(post_start, untouched, jpeg_bytes):
    r, body = post_start(targets=[upload("cut.jpg", jpeg_bytes[: len(jpeg_bytes) // 2])])
    assert "Target cut.jpg: the image is damaged or cut off" in body
    untouched()


def test_it_refuses_a_truncated_png():
    buf = io.BytesIO()
    Image.new("RGB", (300, 300), "red").save(buf, format="PNG")
    with pytest.raises(UploadRejected, match="damaged or cut off"):
        check_upload(upload("cut.png", buf.getvalue()[:-40], "image/png"), "image")


@pytest.mark.parametrize("size, message", [
    # far over Pillow's own bomb guard, which would refuse it without naming its size
    ((30000, 30000), "this photo is 30000 x 30000 pixels; the largest the portal takes is 50 megapixels"),
    ((8000, 8000), "this photo is 8000 x 8000 pixels; the largest the portal takes is 50 megapixels "
                   "(such as 8000 x 6000): make it smaller and upload it again"),
])
def test_it_refuses_a_decompression_bomb_from_its_header_without_decoding(post_start, untouched, size, message):
    data = png_header_only(*size)
    tracemalloc.start()
    try:
        with pytest.raises(UploadRejected, match=re.escape(message)):
            check_upload(upload("bomb.png", data, "image/png"), "media")
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 5 * 2**20  # decoding 8000x8000 RGB would take 192 MB
    r, body = post_start(targets=[upload("bomb.png", data, "image/png")])
    assert "Target bomb.png: " in body and message in body
    untouched()


def test_it_refuses_an_oversize_upload_and_leaves_no_temp_file(post_start, untouched, settings, tmp_path):
    temp = tmp_path / "upload-temp"
    temp.mkdir()
    settings.FILE_UPLOAD_TEMP_DIR = str(temp)
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 1024  # big uploads stream to a temp file, as in production
    settings.UPLOAD_MAX_BYTES = 2**20
    r, body = post_start(targets=[upload("huge.mp4", b"\x00\x00\x00\x18ftypmp42" + b"\x00" * (3 * 2**20))])
    assert "Target huge.mp4: the file is 3 MB, over the limit of 1 MB per file" in body
    assert list(temp.iterdir()) == []
    untouched()


# --- upload names ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name, stored", [
    ("x" * 200, "x" * 180),  # no dot: cut, not emptied
    ("a." + "b" * 200, "a." + "b" * 178),  # a "extension" that long is part of the name
    ("名" * 70 + ".jpeg", "名" * 58 + ".jpeg"),  # whole characters, extension kept
    ("..", UNNAMED), ("...", UNNAMED), ("\x00\x01", "__"), ("  .  ", UNNAMED),
    ("a\u202egpj.exe", "agpj.exe"), ("\ufeffface\u200b.jpg", "face.jpg"),
])
def test_it_names_uploads_safely_and_never_empty(name, stored):
    assert safe_name(name) == stored
    assert 0 < len(safe_name(name).encode()) <= 180


def test_a_long_upload_name_without_a_dot_is_kept_short_not_emptied(post_start, owner, jpeg_bytes):
    r, body = post_start(targets=[upload("y" * 200, jpeg_bytes)], source=upload("z" * 200, jpeg_bytes))
    assert r.status_code == 302, body
    job = Job.objects.get(owner=owner)
    target, source = job.targets.get(), job.sources.get()
    assert target.output_name == "y" * 180 and Path(target.upload.name).name == "y" * 180
    assert Path(source.file.name).name == "z" * 180


def multipart(fields: dict, files: list[tuple[str, str, bytes]]) -> bytes:
    """A multipart body written by hand: a test client would refuse to send a file named ".."."""
    from django.test.client import BOUNDARY

    lines = []
    for key, value in fields.items():
        lines += [f"--{BOUNDARY}", f'Content-Disposition: form-data; name="{key}"', "", value]
    out = "\r\n".join(lines).encode()
    for key, name, data in files:
        out += (f'\r\n--{BOUNDARY}\r\nContent-Disposition: form-data; name="{key}"; filename="{name}"\r\n'
                f"Content-Type: image/jpeg\r\n\r\n").encode() + data
    return out + f"\r\n--{BOUNDARY}--\r\n".encode()


UPLOAD_HANDLERS = ["jobs.uploads.content.KeepEveryUpload", "django.core.files.uploadhandler.MemoryFileUploadHandler",
                   "django.core.files.uploadhandler.TemporaryFileUploadHandler"]


@pytest.mark.parametrize("source, target", [("..", "a.jpg"), ("face.jpg", ".."), ("face.jpg", ".")])
def test_an_upload_named_dotdot_gets_a_safe_name_instead_of_a_puzzling_400(owner, template, jpeg_bytes, settings,
                                                                         source, target):
    """Django drops a file named ".." without a word: the only face then gave "upload at least one
    photo", and a dropped last part made the body unreadable. It is kept, as UNNAMED."""
    from django.test.client import MULTIPART_CONTENT

    from .api_helpers import token_client

    settings.FILE_UPLOAD_HANDLERS = UPLOAD_HANDLERS
    api = token_client(owner)[0]
    body = multipart({"template": template.slug, "consent": "true"},
                     [("source", source, jpeg_bytes), ("targets", target, jpeg_bytes)])
    r = api.generic("POST", "/api/v1/jobs", body, content_type=MULTIPART_CONTENT)
    assert r.status_code == 201, r.content
    job = Job.objects.get(pk=r.json()["id"])
    assert job.sources.count() == 1 and job.targets.count() == 1
    named = job.sources.get().original_name if source == ".." else job.targets.get().output_name
    assert named == UNNAMED


# --- target folders -------------------------------------------------------------------------------

class FolderRunner:
    """A cluster whose target folders are real folders here: the folder listing command runs on this
    machine (the same sh, find and realpath a cluster has); nothing else runs. Every command is
    recorded; sbatch answers Slurm job id 4242. No `listdir` or `realpath`: a listing that took one
    SFTP call per file would fail here."""

    def __init__(self):
        self.commands, self.written = [], {}

    def run_batch(self, argvs, timeout=60):
        return [CommandResult(argv=a, rc=0 if a[0] == "squeue" else 1, stdout=EMPTY_SQUEUE if a[0] == "squeue" else "",
                              stderr="") for a in argvs]

    def run(self, argv, stdin=None, timeout=60, check=False):
        self.commands.append(argv)
        if argv[0] == "sh":  # cluster.list_folder_argv
            p = subprocess.run(argv, capture_output=True, timeout=timeout)
            return CommandResult(argv, p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace"))
        return CommandResult(argv=argv, rc=0, stdout="4242\n" if argv[0] == "sbatch" else "", stderr="")

    def makedirs(self, path):
        pass

    def put_file(self, local, remote):
        self.written[remote] = Path(local).read_bytes()

    def put_bytes(self, data, remote, mode=0o644):
        self.written[remote] = data


@pytest.fixture
def fake_cluster(monkeypatch):
    def install(runner):
        monkeypatch.setattr("cluster.runner_for", lambda profile: runner)
        return runner
    return install


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


def test_an_empty_target_folder_fails_the_job_with_a_plain_message(client, owner, template, jpeg_bytes, fake_cluster,
                                                                    storage, untouched):
    (storage / "empty").mkdir()
    (storage / "empty" / "notes.txt").write_text("x")
    (storage / "empty" / ".hidden.jpg").write_bytes(jpeg_bytes)
    runner = fake_cluster(FolderRunner())
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
    assert "That folder is outside the folders you may use. Pick one with the folder browser." in body
    untouched()


def test_a_symlink_inside_a_root_that_leads_out_fails_the_job(owner, template, jpeg_bytes, fake_cluster, storage,
                                                             tmp_path, untouched):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "passwd.jpg").write_bytes(jpeg_bytes)
    (storage / "escape").symlink_to(tmp_path / "elsewhere")
    runner = fake_cluster(FolderRunner())
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


def test_a_file_link_that_leads_out_of_the_roots_is_a_refused_target(owner, template, jpeg_bytes, fake_cluster,
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
    runner = fake_cluster(FolderRunner())
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


def test_a_folder_of_a_thousand_files_is_listed_in_one_command(owner, template, jpeg_bytes, fake_cluster, storage):
    big = storage / "big"
    big.mkdir()
    for i in range(1000):
        (big / f"img{i:04d}.jpg").write_bytes(b"x")
    template.chunk_size = 100
    template.save()
    runner = fake_cluster(FolderRunner())
    job = folder_job(owner, template, jpeg_bytes, big)
    assert submit_job(str(job.id)) == "4242"
    assert len([c for c in runner.commands if c[0] == "sh"]) == 1
    assert job.targets.count() == 1000 and not job.targets.exclude(status=TargetStatus.WAITING).exists()


def test_odd_folder_file_names_get_short_plain_output_names(owner, template, jpeg_bytes, fake_cluster, storage):
    """A 254-byte file name keeps its name for the user, but its output name leaves room for `-2`
    and for the temporary names of a copy; control characters do not reach an output name."""
    shoot = storage / "shoot"
    shoot.mkdir()
    long = "照" * 83 + "x.jpg"  # 3 * 83 + 5 = 254 bytes
    for name in (long, "line\nbreak.jpg", "\u202eevil.jpg"):
        (shoot / name).write_bytes(jpeg_bytes)
    fake_cluster(FolderRunner())
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
        owner, template, jpeg_bytes, fake_cluster, storage, settings):
    """The worker refuses what the upload check refuses (MEDIA_MAX_PIXELS); a BMP, which has no
    place for the provenance label, is written as a PNG, in a folder and uploaded alike."""
    settings.MEDIA_MAX_PIXELS = 12_000_000
    buf = io.BytesIO()
    Image.new("RGB", (64, 48), "red").save(buf, "BMP")
    shoot = storage / "shoot"
    shoot.mkdir()
    (shoot / "scan.bmp").write_bytes(buf.getvalue())
    (shoot / "a.jpg").write_bytes(jpeg_bytes)
    runner = fake_cluster(FolderRunner())
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


def test_a_nasty_file_name_is_stored_safely_and_never_executed(owner, template, jpeg_bytes, fake_cluster, tmp_path,
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

    runner = fake_cluster(FolderRunner())
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
def test_a_job_keeps_its_template_snapshot_and_submits(owner, template, jpeg_bytes, fake_cluster, change):
    job = start_job(user=owner, template=template, sources=[upload("face.jpg", jpeg_bytes)], consent=True,
                    target_files=[upload("t.jpg", jpeg_bytes)])
    snapshot = job.template_snapshot
    if change == "disable":
        template.is_active = False
        template.save()
    else:
        template.delete()
    runner = fake_cluster(FolderRunner())
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
