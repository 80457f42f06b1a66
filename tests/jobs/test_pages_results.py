"""A job's files: outputs, thumbnails, inputs (before/after) and the streamed results zip."""
import io
import zipfile
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from PIL import Image

from jobs.models import Job, JobStatus, Target, TargetStatus
from jobs.results.files import iter_zip, stream_results_zip
from jobs.watcher.outputs import make_thumbnail

#: "staff" is a superuser: the flags grant nothing outside the admin (jobs.access)
WHO_SEES = [("owner", 200), ("colleague", 404), ("stranger", 404), ("staff", 404)]
FILE_URLS = ["job-output", "job-thumb", "job-input"]


def body_of(response) -> bytes:
    return b"".join(response.streaming_content)


@pytest.fixture
def job(owner, template, jpeg_bytes):
    """A finished job with two fetched outputs (one with a unicode name), one failed target, and
    an uploaded target for before/after."""
    job = Job.objects.create(owner=owner, template=template, template_snapshot=template.snapshot().to_json(),
                             cluster=template.cluster, name="Hochzeit 婚礼", status=JobStatus.PARTIALLY_FAILED,
                             total=3, done=2, failed=1)
    outputs = job.media_dir / "outputs"
    thumbs = job.media_dir / "thumbs"
    outputs.mkdir(parents=True)
    (outputs / "bride.jpg").write_bytes(jpeg_bytes)
    (outputs / "新郎.png").write_bytes(b"\x89PNG not really, but bytes are bytes")
    make_thumbnail(str(outputs / "bride.jpg"), str(thumbs / "bride.jpg"))
    Target.objects.create(job=job, index=0, name="bride.jpg", output_name="bride.jpg", status=TargetStatus.DONE,
                          output_file=str(outputs / "bride.jpg"), thumbnail_file=str(thumbs / "bride.jpg"),
                          upload=SimpleUploadedFile("bride.jpg", jpeg_bytes))
    Target.objects.create(job=job, index=1, name="新郎.png", output_name="新郎.png", status=TargetStatus.DONE,
                          output_file=str(outputs / "新郎.png"))
    Target.objects.create(job=job, index=2, name="broken.jpg", output_name="broken.jpg", status=TargetStatus.FAILED)
    return job


# ---- ownership: every file URL ----

@pytest.mark.parametrize("name", FILE_URLS)
@pytest.mark.parametrize("who,status", WHO_SEES)
def test_it_serves_files_only_to_the_owner(client, request, job, name, who, status):
    client.force_login(request.getfixturevalue(who))
    r = client.get(reverse(name, args=[job.id, 0]))
    assert r.status_code == status
    if status == 200:
        body_of(r)
        r.close()


@pytest.mark.parametrize("name", FILE_URLS)
def test_it_sends_anonymous_file_requests_to_login(client, job, name):
    r = client.get(reverse(name, args=[job.id, 0]))
    assert r.status_code == 302 and r["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("who,status", WHO_SEES)
def test_it_serves_the_zip_only_to_the_owner(client, request, job, who, status):
    client.force_login(request.getfixturevalue(who))
    r = client.get(reverse("job-results-zip", args=[job.id]))
    assert r.status_code == status


def test_it_sends_anonymous_zip_requests_to_login(client, job):
    r = client.get(reverse("job-results-zip", args=[job.id]))
    assert r.status_code == 302 and r["Location"].startswith(reverse("login"))


# ---- outputs, inputs, thumbnails ----

def test_it_serves_the_fetched_output(client, owner, job, jpeg_bytes):
    client.force_login(owner)
    r = client.get(reverse("job-output", args=[job.id, 0]))
    assert r["Content-Type"] == "image/jpeg" and body_of(r) == jpeg_bytes
    assert r["Content-Disposition"].startswith("inline")
    assert "sandbox" in r["Content-Security-Policy"]
    r = client.get(reverse("job-output", args=[job.id, 0]) + "?download=1")
    assert r["Content-Disposition"].startswith("attachment") and body_of(r) == jpeg_bytes


def test_it_answers_404_while_an_output_is_not_fetched(client, owner, job):
    client.force_login(owner)
    assert client.get(reverse("job-output", args=[job.id, 2])).status_code == 404
    assert client.get(reverse("job-thumb", args=[job.id, 2])).status_code == 404
    assert client.get(reverse("job-output", args=[job.id, 99])).status_code == 404


@pytest.mark.parametrize("field", ["output_file", "thumbnail_file"])
def test_it_refuses_a_path_outside_media_root(client, owner, job, tmp_path, field):
    outside = tmp_path / "outside.jpg"
    outside.write_bytes(b"secret")
    Target.objects.filter(job=job, index=0).update(**{field: str(outside)})
    client.force_login(owner)
    name = "job-output" if field == "output_file" else "job-thumb"
    assert client.get(reverse(name, args=[job.id, 0])).status_code == 404


def test_it_refuses_a_dotdot_or_symlink_path_out_of_media_root(client, owner, job, tmp_path):
    outside = tmp_path / "outside.jpg"
    outside.write_bytes(b"secret")
    link = Path(settings.MEDIA_ROOT) / "link.jpg"
    link.symlink_to(outside)
    client.force_login(owner)
    for bad in (str(Path(settings.MEDIA_ROOT) / ".." / "outside.jpg"), str(link), "/etc/passwd"):
        Target.objects.filter(job=job, index=0).update(output_file=bad)
        assert client.get(reverse("job-output", args=[job.id, 0])).status_code == 404, bad


def test_it_serves_a_thumbnail_made_from_the_output(client, owner, job):
    client.force_login(owner)
    r = client.get(reverse("job-thumb", args=[job.id, 0]))
    assert r.status_code == 200 and r["Content-Type"] == "image/jpeg"
    with Image.open(io.BytesIO(body_of(r))) as im:
        assert im.format == "JPEG" and max(im.size) == 320


def test_it_serves_the_uploaded_target_as_before(client, owner, job, jpeg_bytes):
    client.force_login(owner)
    r = client.get(reverse("job-input", args=[job.id, 0]))
    assert r.status_code == 200 and body_of(r) == jpeg_bytes


def test_it_answers_404_for_the_input_of_a_folder_target_without_a_local_copy(client, owner, job):
    Target.objects.filter(job=job, index=1).update(cluster_path="/srv/ffportal/storage/shoot/新郎.png")
    client.force_login(owner)
    assert client.get(reverse("job-input", args=[job.id, 1])).status_code == 404


def test_it_serves_a_folder_target_seen_through_the_path_mapping(client, owner, job, tmp_path, jpeg_bytes):
    shared = tmp_path / "shared-storage"
    (shared / "shoot").mkdir(parents=True)
    (shared / "shoot" / "新郎.png").write_bytes(jpeg_bytes)
    (tmp_path / "private.jpg").write_bytes(b"secret")
    (shared / "shoot" / "escape.jpg").symlink_to(tmp_path / "private.jpg")
    profile = job.cluster
    profile.path_mapping = [[str(shared), "/srv/ffportal/storage"]]
    profile.save()
    client.force_login(owner)
    Target.objects.filter(job=job, index=1).update(cluster_path="/srv/ffportal/storage/shoot/新郎.png")
    r = client.get(reverse("job-input", args=[job.id, 1]))
    assert r.status_code == 200 and body_of(r) == jpeg_bytes
    # a link out of the shared folder, or a path out of the allowed roots, serves nothing
    Target.objects.filter(job=job, index=1).update(cluster_path="/srv/ffportal/storage/shoot/escape.jpg")
    assert client.get(reverse("job-input", args=[job.id, 1])).status_code == 404
    Target.objects.filter(job=job, index=1).update(cluster_path="/srv/ffportal/storage/../../../etc/passwd")
    assert client.get(reverse("job-input", args=[job.id, 1])).status_code == 404


def test_it_serves_a_non_media_name_as_a_download_only(client, owner, job):
    (job.media_dir / "outputs" / "page.html").write_bytes(b"<script>alert(1)</script>")
    Target.objects.filter(job=job, index=2).update(output_name="page.html",
                                                   output_file=str(job.media_dir / "outputs" / "page.html"))
    client.force_login(owner)
    r = client.get(reverse("job-output", args=[job.id, 2]))
    assert r["Content-Type"] == "application/octet-stream" and r["Content-Disposition"].startswith("attachment")


def test_it_shows_before_and_after_on_the_target_page(client, owner, job):
    client.force_login(owner)
    body = client.get(reverse("job-target", args=[job.id, 0])).content.decode()
    assert reverse("job-input", args=[job.id, 0]) in body and reverse("job-output", args=[job.id, 0]) in body


# ---- the zip ----

def test_it_streams_a_zip_of_exactly_the_fetched_outputs(client, owner, job, jpeg_bytes):
    client.force_login(owner)
    r = client.get(reverse("job-results-zip", args=[job.id]))
    assert r.status_code == 200 and r.streaming
    assert r["Content-Type"] == "application/zip"
    assert r["Content-Disposition"].startswith("attachment;") and ".zip" in r["Content-Disposition"]
    with zipfile.ZipFile(io.BytesIO(body_of(r))) as zf:
        assert zf.testzip() is None
        assert sorted(zf.namelist()) == sorted(["bride-swapped.jpg", "新郎-swapped.png"])
        assert zf.read("bride-swapped.jpg") == jpeg_bytes
        assert zf.read("新郎-swapped.png") == b"\x89PNG not really, but bytes are bytes"
        assert all(i.compress_type == zipfile.ZIP_STORED for i in zf.infolist())


def test_it_leaves_out_missing_and_outside_outputs_from_the_zip(owner, job, tmp_path):
    (job.media_dir / "outputs" / "新郎.png").unlink()
    (tmp_path / "elsewhere.jpg").write_bytes(b"not yours")
    Target.objects.filter(job=job, index=2).update(output_file=str(tmp_path / "elsewhere.jpg"))
    with zipfile.ZipFile(io.BytesIO(body_of(stream_results_zip(job)))) as zf:
        assert zf.namelist() == ["bride-swapped.jpg"]


def test_it_names_the_zip_safely(owner, job):
    job.name = 'a"b\r\nSet-Cookie: x=1;/..'
    r = stream_results_zip(job)
    header = r["Content-Disposition"]
    assert header == f'attachment; filename="ab-set-cookie-x1-{str(job.id)[:8]}-results.zip"'
    job.name = "Hochzeit 婚礼"
    assert "filename*=utf-8''" in stream_results_zip(job)["Content-Disposition"]


def test_it_writes_the_zip_piece_by_piece(tmp_path):
    """Pieces come out while files are still being read: the zip is never whole in memory."""
    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * (3 * 1024 * 1024))
    pieces = list(iter_zip([("big.bin", big)], chunk_bytes=256 * 1024))
    assert len(pieces) > 10 and max(len(p) for p in pieces) < 300 * 1024
    with zipfile.ZipFile(io.BytesIO(b"".join(pieces))) as zf:
        assert zf.read("big.bin") == big.read_bytes()


def test_it_streams_an_empty_zip_when_nothing_is_fetched(owner, template):
    job = Job.objects.create(owner=owner, template=template, cluster=template.cluster)
    with zipfile.ZipFile(io.BytesIO(body_of(stream_results_zip(job)))) as zf:
        assert zf.namelist() == []


# ---- make_thumbnail ----

def test_it_makes_an_upright_thumbnail(tmp_path):
    src = tmp_path / "rotated.jpg"
    im = Image.new("RGB", (800, 400), "red")
    exif = im.getexif()
    exif[0x0112] = 6  # "rotate 90° clockwise to view"
    im.save(src, exif=exif)
    assert make_thumbnail(str(src), str(tmp_path / "t" / "thumb.jpg"), size=100) is True
    with Image.open(tmp_path / "t" / "thumb.jpg") as thumb:
        assert thumb.size == (50, 100)  # portrait after the EXIF turn


def test_it_flattens_transparency_to_white(tmp_path):
    src = tmp_path / "a.png"
    Image.new("RGBA", (64, 64), (0, 0, 0, 0)).save(src)
    assert make_thumbnail(str(src), str(tmp_path / "a-thumb.jpg"))
    with Image.open(tmp_path / "a-thumb.jpg") as thumb:
        assert thumb.getpixel((10, 10))[0] > 240


@pytest.mark.parametrize("name,content", [("clip.mp4", b"\x00\x00\x00\x18ftypmp42"), ("broken.jpg", b"not an image"),
                                          ("missing.jpg", None)])
def test_it_returns_false_for_videos_and_unreadable_files(tmp_path, name, content):
    src = tmp_path / name
    if content is not None:
        src.write_bytes(content)
    dst = tmp_path / "thumb.jpg"
    assert make_thumbnail(str(src), str(dst)) is False
    assert not dst.exists() and not list(tmp_path.glob(".*.part"))


def test_it_streams_under_asgi_one_piece_at_a_time(job, jpeg_bytes, recwarn):
    """Daphne serves the portal: Django's default would read the whole zip into a list first
    (and warn); the response pulls one piece at a time instead."""
    import asyncio

    from jobs.results.files import MediaFileResponse

    async def collect(response):
        return [part async for part in response]

    pieces = asyncio.run(collect(stream_results_zip(job)))
    with zipfile.ZipFile(io.BytesIO(b"".join(pieces))) as zf:
        assert zf.read("bride-swapped.jpg") == jpeg_bytes
    output = job.media_dir / "outputs" / "bride.jpg"
    response = MediaFileResponse(open(output, "rb"))
    response.block_size = 1024
    pieces = asyncio.run(collect(response))
    response.close()
    assert b"".join(pieces) == jpeg_bytes and len(pieces) > 1
    assert not [w for w in recwarn if "must consume synchronous iterators" in str(w.message)]


# ---- names a person reads: no bidi overrides or other hidden format characters ----

#: U+202E (right-to-left override) makes "photo\u202egpj.exe" read "photoexe.jpg"; U+2066-U+2069
#: isolates, U+200F a right-to-left mark, U+200B a zero-width space, U+FEFF a byte order mark
HIDDEN = "\u202e\u202d\u202a\u202b\u202c\u2066\u2067\u2068\u2069\u200e\u200f\u061c\u200b\ufeff\u2028"


def test_it_leaves_bidi_and_other_format_characters_out_of_download_names(client, owner, job):
    tricky = f"photo{HIDDEN}gpj.html"
    (job.media_dir / "outputs" / tricky).write_bytes(b"<b>bytes</b>")
    Target.objects.filter(job=job, index=2).update(output_name=tricky, output_file=str(job.media_dir / "outputs" / tricky),
                                                   name=f"shoot/{tricky}")
    client.force_login(owner)
    r = client.get(reverse("job-output", args=[job.id, 2]))
    body_of(r)
    header = r["Content-Disposition"]
    assert header == 'attachment; filename="photogpj-swapped.html"'
    r = client.get(reverse("job-input", args=[job.id, 0]))  # the name shown before: same rule
    body_of(r)
    Target.objects.filter(job=job, index=0).update(name=f"shoot/{HIDDEN}新娘.jpg")
    r = client.get(reverse("job-input", args=[job.id, 0]) + "?download=1")
    body_of(r)
    assert r["Content-Disposition"] == "attachment; filename*=utf-8''%E6%96%B0%E5%A8%98.jpg"


def test_it_leaves_bidi_characters_out_of_zip_entry_names_and_keeps_names_apart(owner, job):
    outputs = job.media_dir / "outputs"
    for index, name in ((1, "face\u202egpj.exe.png"), (2, "face\u200bgpj.exe.png")):
        (outputs / name).write_bytes(name.encode())
        Target.objects.filter(job=job, index=index).update(name=name, output_name=name, output_file=str(outputs / name))
    with zipfile.ZipFile(io.BytesIO(body_of(stream_results_zip(job)))) as zf:
        names = zf.namelist()
        assert names == ["bride-swapped.jpg", "facegpj.exe-swapped.png", "facegpj.exe-swapped-2.png"]
        assert zf.read("facegpj.exe-swapped.png") == "face\u202egpj.exe.png".encode()
    assert not any(c in n for n in names for c in HIDDEN)
