"""Reading and writing images safely: every odd file becomes a TargetError with a plain message.

Pillow decodes (it reads the header lazily, so the pixel limit is checked BEFORE any pixel is
decoded: a decompression bomb never takes the node's memory); the result is an 8-bit BGR array
for the engines. Handled on the way in: EXIF rotation, grayscale, palette, 16-bit, CMYK and alpha.
"""
from __future__ import annotations

import os
import secrets
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageFile, ImageOps, UnidentifiedImageError

from .errors import TargetError, unreadable
from .provenance import LABELLED_FORMATS, save_args, write_label

# Our own limit is checked explicitly below; Pillow's global one would raise a different error.
Image.MAX_IMAGE_PIXELS = None
ImageFile.LOAD_TRUNCATED_IMAGES = False

#: an output's format by its extension (Pillow's names); any other extension is written as PNG
FORMATS = {".jpg": "JPEG", ".jpeg": "JPEG", ".png": "PNG", ".webp": "WEBP", ".bmp": "BMP", ".tif": "TIFF",
           ".tiff": "TIFF"}


def format_for(path: str | os.PathLike) -> str:
    """The format an image named `path` is written in (by its extension)."""
    return FORMATS.get(Path(path).suffix.lower(), "PNG")


@dataclass
class LoadedImage:
    """An image ready for an engine, and what is needed to write the result back like the input."""

    bgr: np.ndarray  # uint8, (H, W, 3)
    alpha: np.ndarray | None  # uint8, (H, W) when the input had transparency
    format: str  # Pillow format name of the input, e.g. "JPEG", "PNG"
    note: str = ""  # what was converted, for the progress record ("16-bit converted to 8-bit")


def part_path(path: str | os.PathLike) -> Path:
    """A temporary name next to `path` to write it under before the rename: short and plain
    whatever `path`'s own name is (a 254-byte name plus `.part` would be too long to create)."""
    path = Path(path)
    return path.with_name(f".{secrets.token_hex(8)}.part")


def require_nonempty_file(path: str | os.PathLike, name: str | None = None) -> Path:
    """The path, after checking it names a readable, non-empty file (TargetError in plain words).
    `name`: the file's name in messages (default: `path`'s own)."""
    path = Path(path)
    name = name or path.name
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise unreadable(name, exc) from None
    if size == 0:
        raise TargetError(f"{name} is empty (0 bytes); upload the file again", "empty", name=name)
    return path


def pixel_limit_error(name: str, width: int, height: int, max_pixels: int) -> TargetError:
    """The error of a photo, or of a video's picture, over `max_pixels` (code `too_many_pixels`)."""
    return TargetError(
        f"{name} is {width}x{height} = {width * height / 1e6:.0f} megapixels, over the limit of "
        f"{max_pixels / 1e6:.0f} megapixels; scale it down and try again",
        "too_many_pixels", name=name, megapixels=round(width * height / 1e6), limit=round(max_pixels / 1e6),
        width=width, height=height)


def load_image(path: str | os.PathLike, max_pixels: int, name: str | None = None) -> LoadedImage:
    """`name`: the image's name in messages (default: `path`'s own; see `worker.targetfile`)."""
    path = require_nonempty_file(path, name)
    name = name or path.name
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            im = Image.open(path)
    except UnidentifiedImageError:
        raise TargetError(f"{name} is not an image this worker can read (JPEG, PNG, WebP, BMP, TIFF)", "not_an_image",
                          name=name) from None
    except OSError as exc:
        raise TargetError(f"cannot read {name}: {exc}") from None
    with im:
        w, h = im.size
        if w * h > max_pixels:
            raise pixel_limit_error(name, w, h, max_pixels)
        fmt = im.format or ""
        try:
            im.load()
        except (OSError, SyntaxError, ValueError) as exc:
            raise TargetError(f"{name} is truncated or corrupt ({exc}); re-export or upload it again", "damaged",
                              name=name) from None
        notes = []
        try:
            im = ImageOps.exif_transpose(im)
        except Exception:  # noqa: BLE001 - a broken EXIF block must not lose the image itself
            notes.append("EXIF orientation unreadable, used as stored")
        rgb, alpha, note = _to_rgb8(im)
        if note:
            notes.append(note)
    bgr = np.ascontiguousarray(rgb[:, :, ::-1])
    return LoadedImage(bgr=bgr, alpha=alpha, format=fmt, note="; ".join(notes))


def _to_rgb8(im: Image.Image) -> tuple[np.ndarray, np.ndarray | None, str]:
    mode = im.mode
    alpha = None
    note = ""
    if mode in ("I;16", "I;16B", "I;16L", "I"):
        arr = np.asarray(im, dtype=np.float64)
        top = 65535.0 if mode.startswith("I;16") or arr.max() > 255 else 255.0
        gray = np.clip(arr / top * 255.0 + 0.5, 0, 255).astype(np.uint8)
        return np.stack([gray] * 3, axis=-1), None, "16-bit converted to 8-bit"
    if mode == "F":
        arr = np.asarray(im, dtype=np.float64)
        gray = np.clip(arr, 0, 255).astype(np.uint8)
        return np.stack([gray] * 3, axis=-1), None, "float image converted to 8-bit"
    if mode in ("RGBA", "LA", "PA") or (mode == "P" and "transparency" in im.info):
        rgba = im.convert("RGBA")
        arr = np.asarray(rgba)
        alpha = np.ascontiguousarray(arr[:, :, 3])
        return np.ascontiguousarray(arr[:, :, :3]), alpha, ""
    if mode == "CMYK":
        note = "CMYK converted to RGB"
    elif mode in ("L", "1"):
        note = "grayscale"
    elif mode not in ("RGB",):
        note = f"{mode} converted to RGB"
    return np.asarray(im.convert("RGB")), alpha, note


def save_image(path: str | os.PathLike, bgr: np.ndarray, alpha: np.ndarray | None = None,
               label: dict | None = None) -> None:
    """Write next to a temp name then rename, so a killed task never leaves half an output.

    The format follows the output's extension (`format_for`); alpha is re-attached where the
    format keeps it. `label`: the provenance label (`worker.provenance`), added before the rename,
    so no output is ever seen (or kept by a retried task) without it; ValueError for a format
    that has no place for it (BMP).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rgb = np.ascontiguousarray(bgr[:, :, ::-1])
    ext = path.suffix.lower()
    if alpha is not None and ext in (".png", ".webp", ".tif", ".tiff"):
        im = Image.fromarray(np.dstack([rgb, alpha]), "RGBA")
    else:
        im = Image.fromarray(rgb, "RGB")
    fmt = format_for(path)
    params = {"quality": 95} if fmt in ("JPEG", "WEBP") else {}
    if label:
        if fmt not in LABELLED_FORMATS:
            raise ValueError(f"a {fmt} output cannot carry the provenance label: write it as PNG")
        params.update(save_args(fmt, label))  # WebP, TIFF: written with the pixels
    tmp = part_path(path)
    try:
        im.save(tmp, format=fmt, **params)
        if label and fmt in ("JPEG", "PNG"):
            write_label(tmp, label)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
