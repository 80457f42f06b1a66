"""Thumbnails of fetched outputs, for the job page's grid. Called by the watcher after a fetch."""
from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path

from PIL import Image, ImageOps

from worker.manifest import VIDEO_EXTENSIONS

log = logging.getLogger(__name__)

#: refuse to decode images bigger than this for a thumbnail (the worker's own limit)
MAX_PIXELS = 50_000_000


def make_thumbnail(src_path: str, dst_path: str, size: int = 320) -> bool:
    """Write a JPEG thumbnail of `src_path` (at most `size` pixels on its long side) to `dst_path`.

    Upright as the camera meant it (EXIF orientation applied). True when written; False for
    videos and for anything Pillow cannot read: a missing thumbnail only means the page shows a
    placeholder, so this never raises. The file appears atomically (written aside, then renamed),
    so a page never serves half a thumbnail.
    """
    if src_path.lower().endswith(VIDEO_EXTENSIONS):
        return False
    dst = Path(dst_path)
    tmp = dst.with_name(f".{dst.name}.part")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # DecompressionBombWarning etc.: decided below
            with Image.open(src_path) as im:
                if im.width * im.height > MAX_PIXELS:
                    return False
                im.draft("RGB", (size * 2, size * 2))  # JPEG: decode at a reduced scale, much faster
                im = ImageOps.exif_transpose(im)
                im.thumbnail((size, size))
                if im.mode in ("RGBA", "LA", "P", "PA"):
                    im = _flatten(im)
                elif im.mode != "RGB":
                    im = im.convert("RGB")
                dst.parent.mkdir(parents=True, exist_ok=True)
                im.save(tmp, format="JPEG", quality=82)
        os.replace(tmp, dst)
        return True
    except Exception as exc:  # noqa: BLE001 - a thumbnail is never worth failing the caller
        log.info("no thumbnail for %s: %s", src_path, exc)
        tmp.unlink(missing_ok=True)
        return False


def _flatten(im: Image.Image) -> Image.Image:
    """RGB on white: transparent PNG/WebP areas would turn black in a JPEG."""
    im = im.convert("RGBA")
    background = Image.new("RGB", im.size, (255, 255, 255))
    background.paste(im, mask=im.getchannel("A"))
    return background
