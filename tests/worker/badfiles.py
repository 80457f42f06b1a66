"""Bad and odd input files, made by the tests themselves (no fixtures on disk)."""
from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import numpy as np
from PIL import Image


def photo(rgb: np.ndarray, path: Path, **save) -> Path:
    Image.fromarray(rgb).save(path, **save)
    return path


def zero_bytes(path: Path) -> Path:
    path.write_bytes(b"")
    return path


def not_an_image(path: Path) -> Path:
    path.write_text("this is a text file with an image extension\n")
    return path


def truncated(rgb: np.ndarray, path: Path) -> Path:
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="JPEG", quality=90)
    data = buf.getvalue()
    path.write_bytes(data[: len(data) // 2])
    return path


def grayscale(rgb: np.ndarray, path: Path) -> Path:
    Image.fromarray(rgb).convert("L").save(path)
    return path


def sixteen_bit(rgb: np.ndarray, path: Path) -> Path:
    gray = np.asarray(Image.fromarray(rgb).convert("L"), dtype=np.uint16) * 257
    Image.fromarray(gray).save(path)  # uint16 -> mode I;16
    return path


def alpha_png(rgb: np.ndarray, path: Path) -> Path:
    a = np.full(rgb.shape[:2], 255, np.uint8)
    a[:20, :20] = 0  # a transparent corner that must survive
    Image.fromarray(np.dstack([rgb, a]), "RGBA").save(path)
    return path


def cmyk_jpeg(rgb: np.ndarray, path: Path) -> Path:
    Image.fromarray(rgb).convert("CMYK").save(path, format="JPEG", quality=95)
    return path


def exif_rotated(rgb: np.ndarray, path: Path) -> Path:
    """Stored rotated 90 degrees with EXIF Orientation=6 (viewer rotates it back upright)."""
    stored = np.ascontiguousarray(np.rot90(rgb, k=1))  # counter-clockwise; orientation 6 = rotate CW to view
    im = Image.fromarray(stored)
    exif = Image.Exif()
    exif[0x0112] = 6
    im.save(path, format="JPEG", quality=95, exif=exif.tobytes())
    return path


def png_bomb(path: Path, side: int = 10000) -> Path:
    """A tiny PNG that claims side x side pixels (100 megapixels for 10000): a decompression bomb."""
    raw_row = b"\x00" + b"\x00" * side  # filter byte + one grayscale byte per pixel
    comp = zlib.compressobj(9)
    body = b"".join(comp.compress(raw_row) for _ in range(side)) + comp.flush()

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", body) + chunk(b"IEND", b""))
    return path


def solid_png(path: Path, width: int, height: int, colour: tuple[int, ...] = (40, 90, 160, 255)) -> Path:
    """A real PNG of one colour (RGBA, or grey for one value): a few hundred KB on disk whatever its
    size, width x height x len(colour) bytes decoded. Made in a fraction of a second: the rows after
    the first are all "same as above" (filter Up), compressed once per block of rows and repeated
    (each block starts a fresh deflate stream after a full flush, so every block's bytes are equal)."""
    channels = len(colour)
    first = b"\x01" + bytes(colour) + bytes((width - 1) * channels)  # Sub: the colour, then "as left"
    row = b"\x02" + bytes(width * channels)  # Up: as above
    per_block = max(1, (8 << 20) // len(row))

    def raw_deflate(data: bytes) -> bytes:
        comp = zlib.compressobj(9, zlib.DEFLATED, -15)
        return comp.compress(data) + comp.flush(zlib.Z_FULL_FLUSH)

    blocks, rest = divmod(height - 1, per_block)
    block = raw_deflate(row * per_block)
    adler = zlib.adler32(first)
    for _ in range(blocks):
        adler = zlib.adler32(row * per_block, adler)
    adler = zlib.adler32(row * rest, adler)
    final = zlib.compressobj(9, zlib.DEFLATED, -15).flush(zlib.Z_FINISH)  # an empty last block
    body = (b"\x78\xda" + raw_deflate(first) + block * blocks + raw_deflate(row * rest) + final
            + struct.pack(">I", adler & 0xFFFFFFFF))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    colour_type = {1: 0, 3: 2, 4: 6}[channels]
    ihdr = struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", body) + chunk(b"IEND", b""))
    return path


def png_in_mkv(path: Path, side: int) -> Path:
    """A one-frame Matroska video whose frame is a side x side grey PNG (the PNG stream copied, not
    re-encoded; ffmpeg decodes it once here to learn its size: side^2 bytes)."""
    import subprocess

    frame = solid_png(path.with_suffix(".frame.png"), side, side, (120,))
    try:
        subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-framerate", "1", "-i", f"file:{frame}",
                        "-c:v", "copy", "-f", "matroska", f"file:{path}"], check=True)
    finally:
        frame.unlink()
    return path
