"""Checks of uploaded files, by content (never by extension alone), before anything is saved; and
the names files are stored and handed out under."""
from __future__ import annotations

import posixpath
import unicodedata

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler
from django.http.multipartparser import MultiPartParser
from django.utils.translation import gettext as _
from PIL import Image, UnidentifiedImageError

from jobs.errors import UploadRejected
from jobs.uploads.decoding import open_image

#: first bytes of the video containers the worker reads (mp4/mov: a box type at offset 4)
_MP4_BOXES = (b"ftyp", b"moov", b"mdat", b"free", b"wide", b"skip")
_EBML = b"\x1a\x45\xdf\xa3"  # mkv / webm

#: the name of a file whose own name leaves nothing to keep ("..", only dots or control characters)
UNNAMED = "file"
#: the longest name kept, in UTF-8 bytes: file systems allow 255, and names grow on the way
#: (`-2` for a duplicate, `.<random>.part` while a copy is written, `.jpg` for a thumbnail)
MAX_NAME_BYTES = 180
#: a "extension" longer than this is part of the name, not kept apart when a name is shortened
_MAX_EXTENSION_BYTES = 16


def without_hidden_characters(text: str) -> str:
    """`text` without the invisible characters that change how it reads: Unicode format characters
    (category Cf: the bidi overrides, embeddings and isolates such as U+202E that show
    "gpj.exe" as "exe.jpg", zero-width marks, the byte order mark) and line and paragraph separators.

    Names people read are saved through it (a job's, a booking's, every file's as sent or listed
    on the cluster), so no page, admin list, email or live message shows one raw."""
    return "".join(c for c in text if unicodedata.category(c) not in ("Cf", "Zl", "Zp"))


def shorten_name(name: str, limit: int = MAX_NAME_BYTES) -> str:
    """`name` cut to at most `limit` UTF-8 bytes, keeping its extension (and whole characters)."""
    if len(name.encode()) <= limit:
        return name
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem or len(ext.encode()) > _MAX_EXTENSION_BYTES:
        stem, ext = name, ""  # no extension to keep: cut the whole name
    room = limit - (len(ext.encode()) + 1 if ext else 0)
    stem = stem.encode()[:room].decode(errors="ignore").rstrip() or UNNAMED
    return f"{stem}.{ext}" if ext else stem


def safe_name(name: str) -> str:
    """A file name safe to store and to pass on: no folders, no control or hidden characters, not
    hidden itself, at most MAX_NAME_BYTES long, never empty.

    Unicode letters and shell metacharacters are kept (they are quoted wherever they go); what
    could change the meaning of a path, or what a person reads, is not.
    """
    name = unicodedata.normalize("NFC", name).replace("\\", "/").split("/")[-1]
    name = "".join("_" if unicodedata.category(c) == "Cc" else c for c in without_hidden_characters(name))
    name = name.strip().lstrip(".").strip()
    return shorten_name(name or UNNAMED)


def unique_name(name: str, used: set[str]) -> str:
    """`name`, or `name-2`, `name-3` ... so that no two targets write the same output."""
    stem, ext = posixpath.splitext(name)
    candidate, n = name, 1
    while candidate in used:
        n += 1
        candidate = f"{stem}-{n}{ext}"
    used.add(candidate)
    return candidate


class _KeepEveryFile(MultiPartParser):
    def sanitize_file_name(self, file_name):
        # Django's answer for "..", "." and names of only non-printable characters is None: the
        # file is then dropped without a word. Keep it, named UNNAMED, and check it like any other.
        # Without hidden characters: the name is shown as sent (pages, admin, emails, live JSON),
        # and "\u202egpj.exe" would read "exe.jpg" there.
        return without_hidden_characters(super().sanitize_file_name(file_name) or "") or UNNAMED


class KeepEveryUpload(FileUploadHandler):
    """An upload handler (first in FILE_UPLOAD_HANDLERS) after which no uploaded file is lost for its name.

    Django's multipart parser drops a file named ".." or "." silently: the only face of a job then
    gives "upload at least one photo", and a dropped part at the end of a body makes the rest
    unreadable ("Request max total header size exceeded"). This handler parses the body itself,
    with the same parser and the other handlers, keeping such a file as UNNAMED.
    """

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        others = [h for h in self.request.upload_handlers if h is not self]
        return _KeepEveryFile(META, input_data, others, encoding).parse()

    def receive_data_chunk(self, raw_data, start):  # never reached: handle_raw_input answers first
        return raw_data

    def file_complete(self, file_size):
        return None


def check_upload(f: UploadedFile, kind: str) -> None:
    """kind: 'image' (source faces) or 'media' (targets: image or video). Raises UploadRejected.

    Images: only the formats the worker reads (`jobs.uploads.decoding.ACCEPTED_FORMATS`); the pixel count
    is read from the header and refused over MEDIA_MAX_PIXELS before anything is decoded
    (decompression bombs), then the file is checked to be complete (truncated copies).
    Videos are recognised by their container's first bytes only (their pixels: `jobs.uploads.on_complete`).
    """
    if f.size == 0:
        raise UploadRejected(_("the file is empty (0 bytes); upload it again"))
    limit = settings.UPLOAD_MAX_BYTES
    if f.size > limit:
        raise UploadRejected(_("the file is %(size)s MB, over the limit of %(limit)s MB per file")
                             % {"size": f.size // 2**20, "limit": limit // 2**20})
    f.seek(0)
    head = f.read(16)
    f.seek(0)
    if kind == "media" and (head[4:8] in _MP4_BOXES or head.startswith(_EBML)):
        return
    try:
        # open_image reads the header only: the size is refused before a single pixel is decoded
        with open_image(f) as im:
            _check_complete(im)
    except _Truncated:
        raise UploadRejected(_("the image is damaged or cut off (it ends before its last pixel); "
                               "upload the whole file again")) from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
        what = _("an image (JPEG, PNG, WebP)") if kind == "image" else _("an image or a video (MP4, MOV, MKV, WebM)")
        raise UploadRejected(_("this is not %(what)s") % {"what": what}) from None
    finally:
        f.seek(0)


class _Truncated(Exception):
    pass


def _check_complete(im: Image.Image) -> None:
    """Raise _Truncated when the file ends before its image does (an interrupted copy).

    JPEG: decoded at 1/8 scale (`draft`: the DCT scales down for free), which still reads every
    byte of the compressed data, in a 64th of the memory. PNG and others: Pillow's `verify()`
    (chunk checksums through IEND), which decodes nothing.
    """
    try:
        if im.format in ("JPEG", "MPO"):
            im.draft("RGB", (max(1, im.size[0] // 8), max(1, im.size[1] // 8)))
            im.load()
        else:
            im.verify()
    except (OSError, SyntaxError, ValueError) as exc:
        raise _Truncated() from exc
