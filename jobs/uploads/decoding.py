"""Decoding a photo or a video someone sent, with its memory bounded whatever they send.

A photo's memory is its pixels, not its bytes: a 200 KB PNG of one colour can hold 7000 x 7000 RGBA
pixels, 196 MB decoded. So every decode here, whatever the format:

1. reads the width and height from the header (`open_image`: Pillow reads headers lazily; for a
   video, ffprobe gives every video stream's size, `worker.ffmpeg.largest_picture`);
2. refuses a picture over MEDIA_MAX_PIXELS in plain words (`too_many_pixels`), before a single
   pixel is decoded;
3. decodes only the formats the worker reads (ACCEPTED_FORMATS: no Pillow plugin for Photoshop,
   icons, EPS or the like ever runs on an upload), and shrinks a photo before it copies it
   (`small_picture`);
4. runs inside a `decode_slot`: at most UPLOAD_CHECKS_AT_ONCE checks decode at once in a process;
   the others wait their turn (they are not refused), so N uploads arriving together cost at most
   that many decoders' memory.

The worker bounds its own decoding with the same number (the manifest's `engine.max_pixels`).
"""
from __future__ import annotations

import ctypes
import math
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.utils.translation import gettext as _
from PIL import Image, ImageOps

from jobs.errors import UploadRejected

#: Pillow's names of the photo formats the worker reads (worker.manifest.IMAGE_EXTENSIONS); the
#: JPEG of many phones comes back as "MPO" (a JPEG with a second, smaller picture)
ACCEPTED_FORMATS = ("JPEG", "PNG", "WEBP", "BMP", "TIFF")
#: modes Pillow scales without a full-size copy; others are made RGB first (a full-size copy)
_SCALABLE_MODES = ("RGB", "L")
#: modes first thinned out to twice the size wanted, picking pixels (no copy of the whole picture):
#: Pillow scales RGBA and LA through a premultiplied full-size copy, and RGB takes 4 bytes a pixel,
#: so making them RGB first would double the decoded photo's memory
_THINNED_MODES = ("RGBA", "LA", "P", "PA")

# Pillow's own guard would refuse some bombs on open with an error that names no size; the limit
# is ours and checked from the header in open_image (worker.imageio does the same on the nodes).
Image.MAX_IMAGE_PIXELS = None


def _give_freed_pictures_back() -> None:
    """Make glibc map every big block on its own, so a decoded photo's memory goes back to the
    system when it is freed. By default glibc raises its mmap threshold (up to 32 MB) the first
    time such a block is freed and then serves big blocks from its heaps, one per thread, keeping
    what is freed there: a process that checked 8 photos in 8 threads, 2 at a time, then held as
    much as 8 checks at once (bench/upload_check_memory.py). Pillow allocates a picture in blocks
    of at most 16 MB; a fixed threshold of 1 MB maps each of them. No-op without glibc."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(_M_MMAP_THRESHOLD, 1 << 20)


_M_MMAP_THRESHOLD = -3  # glibc's malloc.h
_give_freed_pictures_back()


def max_pixels() -> int:
    """The largest photo, or video picture, the portal decodes (pixels)."""
    return settings.MEDIA_MAX_PIXELS


def too_many_pixels(width: int, height: int, what: str = "photo") -> UploadRejected:
    """The refusal of a photo (`what`="photo") or a video's picture ("video") of width x height."""
    limit = max_pixels()
    # an example size of the limit, in 4:3 and round numbers: "8000 x 6000" for 50 megapixels
    step = math.isqrt(limit // 12)
    step = step // 50 * 50 or step
    values = {"w": width, "h": height, "mp": f"{round(limit / 1e6, 1):g}", "ew": 4 * step, "eh": 3 * step}
    if what == "video":
        return UploadRejected(_("this video is %(w)s x %(h)s pixels; the largest the portal takes is %(mp)s "
                                "megapixels (such as %(ew)s x %(eh)s): make it smaller and upload it again") % values)
    return UploadRejected(_("this photo is %(w)s x %(h)s pixels; the largest the portal takes is %(mp)s "
                            "megapixels (such as %(ew)s x %(eh)s): make it smaller and upload it again") % values)


@contextmanager
def open_image(f) -> Iterator[Image.Image]:
    """The photo `f` (a path or an open file) opened, its header read and nothing decoded yet.
    UploadRejected when it is over the pixel limit; Pillow's own errors (UnidentifiedImageError,
    OSError ...) for what is not a photo of ACCEPTED_FORMATS, for the caller to word."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # DecompressionBombWarning: our own limit decides, below
        with Image.open(f, formats=ACCEPTED_FORMATS) as im:
            width, height = im.size
            if width * height > max_pixels():
                raise too_many_pixels(width, height)
            yield im


def small_picture(f, side: int) -> tuple[Image.Image, int, int]:
    """The photo `f` upright, in RGB, at most `side` pixels on its longest side; and its full width
    and height. Decoded once (JPEG: at a fraction of its size), then scaled down before it is
    copied: the peak is the decoded photo and a small copy (CMYK and 16-bit: two full ones)."""
    with open_image(f) as im:
        width, height = im.size
        im.draft("RGB", (side, side))  # JPEG: the DCT scales down for free
        if im.mode in _THINNED_MODES and max(im.size) > 2 * side:
            scale = 2 * side / max(im.size)  # then scaled down properly below (EXIF, in `info`, comes along)
            im = im.resize((max(1, round(im.width * scale)), max(1, round(im.height * scale))), Image.Resampling.NEAREST)
        if im.mode not in _SCALABLE_MODES:
            im = im.convert("RGB")  # alpha dropped: the face check and the preview never used it
        im.thumbnail((side, side))  # in place
        picture = ImageOps.exif_transpose(im).convert("RGB")
    if hasattr(f, "seek"):
        f.seek(0)
    return picture, width, height


_slots_lock = threading.Lock()
_slots: tuple[int, threading.BoundedSemaphore] | None = None
_held = threading.local()


def _semaphore() -> threading.BoundedSemaphore:
    global _slots
    size = max(1, int(settings.UPLOAD_CHECKS_AT_ONCE))
    with _slots_lock:
        if _slots is None or _slots[0] != size:  # sized by the setting (tests change it)
            _slots = (size, threading.BoundedSemaphore(size))
        return _slots[1]


@contextmanager
def decode_slot() -> Iterator[None]:
    """Hold one of this process's UPLOAD_CHECKS_AT_ONCE decoding slots (waiting for one if all are
    taken). A thread that already holds one goes on: a check that calls another check never waits
    for itself."""
    if getattr(_held, "depth", 0):
        _held.depth += 1
        try:
            yield
        finally:
            _held.depth -= 1
        return
    with _semaphore():
        _held.depth = 1
        try:
            yield
        finally:
            _held.depth = 0
