"""Checks of uploaded files, by content (never by extension alone), before anything is saved."""
from __future__ import annotations

import re
import unicodedata
import warnings

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.utils.translation import gettext as _
from PIL import Image, UnidentifiedImageError

from jobs.errors import UploadRejected

#: first bytes of the video containers the worker reads (mp4/mov: a box type at offset 4)
_MP4_BOXES = (b"ftyp", b"moov", b"mdat", b"free", b"wide", b"skip")
_EBML = b"\x1a\x45\xdf\xa3"  # mkv / webm


def safe_name(name: str) -> str:
    """A file name safe to store and to pass on: no folders, no control characters, not hidden.

    Unicode letters and shell metacharacters are kept (they are quoted wherever they go); what
    could change the meaning of a path is not.
    """
    name = unicodedata.normalize("NFC", name).replace("\\", "/").split("/")[-1]
    name = re.sub(r"[\x00-\x1f\x7f]", "_", name).strip().lstrip(".")
    if not name:
        name = "file"
    if len(name.encode()) > 180:
        stem, dot, ext = name.rpartition(".")
        stem = stem.encode()[:160].decode(errors="ignore")
        name = f"{stem}.{ext}" if dot else stem
    return name


def check_upload(f: UploadedFile, kind: str) -> None:
    """kind: 'image' (source faces) or 'media' (targets: image or video). Raises UploadRejected.

    Images: the pixel count is read from the header and refused over MAX_PIXELS before anything
    is decoded (decompression bombs), then the file is checked to be complete (truncated copies).
    Videos are recognised by their container's first bytes only.
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
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # open() reads the header only: the size is known before a single pixel is decoded.
            with Image.open(f) as im:
                w, h = im.size
                if w * h > MAX_PIXELS:
                    raise _TooBig(w, h)
                _check_complete(im)
    except _TooBig as big:
        raise UploadRejected(_("the image is %(w)sx%(h)s pixels, over the limit of 50 megapixels; scale it down")
                             % {"w": big.w, "h": big.h}) from None
    except Image.DecompressionBombError:
        # Pillow refuses to even open images over twice its own limit; say it in our words.
        raise UploadRejected(_("the image is over the limit of 50 megapixels; scale it down")) from None
    except _Truncated:
        raise UploadRejected(_("the image is damaged or cut off (it ends before its last pixel); "
                               "upload the whole file again")) from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
        what = _("an image (JPEG, PNG, WebP)") if kind == "image" else _("an image or a video (MP4, MOV, MKV, WebM)")
        raise UploadRejected(_("this is not %(what)s") % {"what": what}) from None
    finally:
        f.seek(0)


#: the largest image accepted (pixels); checked from the header, before decoding
MAX_PIXELS = 50_000_000


class _TooBig(Exception):
    def __init__(self, w: int, h: int):
        self.w, self.h = w, h


class _Truncated(Exception):
    pass


def _check_complete(im: Image.Image) -> None:
    """Raise _Truncated when the file ends before its image does (an interrupted copy).

    JPEG: decoded at 1/8 scale (`draft`: the DCT scales down for free), which still reads every
    byte of the compressed data, in a 64th of the memory. PNG and others: Pillow's `verify()`
    (chunk checksums through IEND), which decodes nothing.
    """
    try:
        if im.format == "JPEG":
            im.draft("RGB", (max(1, im.size[0] // 8), max(1, im.size[1] // 8)))
            im.load()
        else:
            im.verify()
    except (OSError, SyntaxError, ValueError) as exc:
        raise _Truncated() from exc
