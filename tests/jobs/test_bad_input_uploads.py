"""Bad uploads at the portal: files that are not what their name claims, damaged or cut-off
images, decompression bombs, oversize uploads, and upload names (too long, empty, "..", hidden
characters). Each case shows the user a plain message and touches no other job and no file.
Target folders, nasty file names and templates: test_bad_input.py."""
import io
import re
import struct
import tracemalloc
import zipfile
import zlib
from pathlib import Path

import pytest
from PIL import Image

from jobs.errors import UploadRejected
from jobs.models import Job
from jobs.uploads.content import UNNAMED, check_upload, safe_name

from .test_bad_input import other_job, post_start, untouched, upload  # noqa: F401 - fixtures; untouched uses other_job

ELF = b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 200


def png_header_only(width, height) -> bytes:
    """A PNG whose header claims width x height, with a few bytes of pixel data (a decompression bomb's shape)."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b""))


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
