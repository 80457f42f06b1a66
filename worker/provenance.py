"""Provenance: every output says, in a machine-readable way, that it was modified by face fusion.

The label is a small JSON object, `{"generator": "FaceFusion Portal", "modified": "face fusion",
"job": "<job id>"}` (`label_for`), stored where ordinary tools look for it:

- JPEG: an XMP packet in an APP1 segment (`http://ns.adobe.com/xap/1.0/`), inserted after the
  JFIF/EXIF segments without re-encoding a pixel. The packet also carries the IPTC digital source
  type "composite with trained algorithmic media" and `dc:description`, which exiftool, Photoshop
  and the content-credential checkers read.
- PNG: the same packet in an iTXt chunk with the keyword `XML:com.adobe.xmp`, right after IHDR.
- WebP: the same packet in the RIFF container's `XMP ` chunk (the extended format, `VP8X`, flags
  it), and TIFF: in tag 700 (XMP), both written by Pillow with the pixels (`save_args`).
- Videos: the container's `comment` tag, set while the audio is muxed (`metadata_args`, for
  `worker.ffmpeg.mux_command`); `ffprobe -show_format` shows it.

BMP has no place for metadata: a BMP target's output is a PNG (`worker.manifest.default_output_name`
names it so, and `worker.process` refuses to write a BMP), so every output the worker writes is
labelled (LABELLED_FORMATS). An output that is the unchanged input (no face found) is not
labelled: it was not modified.

`read_label(path)` reads the label back (tests, and anyone checking an output); `draw_watermark`
adds the optional visible watermark a template asks for. Plain Python and OpenCV; no Django.
"""
from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import zlib
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr, unescape

from .ffmpeg import FFPROBE, file_url

GENERATOR = "FaceFusion Portal"
MODIFIED = "face fusion"
XMP_NAMESPACE = b"http://ns.adobe.com/xap/1.0/\x00"
PNG_XMP_KEYWORD = b"XML:com.adobe.xmp"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: IPTC's term for media changed by a trained model (what C2PA checkers and news desks look for)
DIGITAL_SOURCE_TYPE = "http://cv.iptc.org/newscodes/digitalsourcetype/compositeWithTrainedAlgorithmicMedia"
#: a JPEG segment holds at most 65,533 bytes of payload; our packet is well under 1 kB
MAX_SEGMENT = 65533
#: the watermark's longest text: a corner stamp, not a caption
WATERMARK_MAX_CHARS = 60
#: the image formats (Pillow's names) an output can be written in, each with the label in it
LABELLED_FORMATS = ("JPEG", "PNG", "WEBP", "TIFF")
#: TIFF's tag for an XMP packet
TIFF_XMP_TAG = 700


def label_for(job: str) -> dict[str, str]:
    """The label of an output of `job` (the portal's job id; "" outside the portal)."""
    return {"generator": GENERATOR, "modified": MODIFIED, "job": job}


def xmp_packet(label: dict[str, Any]) -> bytes:
    """An XMP packet carrying `label` as JSON (in `ffp:label` and `dc:description`)."""
    text = json.dumps(label, ensure_ascii=False, sort_keys=True)
    return (
        '<?xpacket begin="\ufeff" id="W5M0MpCehiHzreSzNTczkc9d"?>'
        '<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
        '<rdf:Description rdf:about="" xmlns:xmp="http://ns.adobe.com/xap/1.0/"'
        ' xmlns:dc="http://purl.org/dc/elements/1.1/"'
        ' xmlns:Iptc4xmpExt="http://iptc.org/std/Iptc4xmpExt/2008-02-29/"'
        ' xmlns:ffp="https://facefusion-portal.org/ns/provenance/1.0/"'
        f' xmp:CreatorTool={quoteattr(GENERATOR)}'
        f' Iptc4xmpExt:DigitalSourceType={quoteattr(DIGITAL_SOURCE_TYPE)}'
        f' ffp:label={quoteattr(text)}>'
        f'<dc:description><rdf:Alt><rdf:li xml:lang="x-default">{escape(text)}</rdf:li></rdf:Alt></dc:description>'
        '</rdf:Description></rdf:RDF></x:xmpmeta><?xpacket end="w"?>'
    ).encode("utf-8")


def metadata_args(label: dict[str, Any] | None) -> list[str]:
    """ffmpeg output options that put `label` into a video container's `comment` tag (MP4, MOV, MKV)."""
    if not label:
        return []
    return ["-metadata", "comment=" + json.dumps(label, ensure_ascii=False, sort_keys=True)]


# ---- writing -------------------------------------------------------------------------------------

def save_args(fmt: str, label: dict[str, Any]) -> dict[str, Any]:
    """Pillow `save` options that write `label` with the pixels, for the formats labelled that way
    (WebP, TIFF); {} for JPEG and PNG, which `write_label` labels after they are written."""
    if fmt == "WEBP":
        return {"xmp": xmp_packet(label)}
    if fmt == "TIFF":
        return {"tiffinfo": {TIFF_XMP_TAG: xmp_packet(label)}}
    return {}


def write_label(path: str | os.PathLike, label: dict[str, Any]) -> bool:
    """Add `label` to the image at `path` in place (atomically: temp file + rename).

    True when written; False for other formats (WebP and TIFF are labelled as they are written,
    `save_args`; BMP cannot be).
    Raises OSError when the file cannot be read or replaced (the caller decides what that costs)."""
    path = Path(path)
    data = path.read_bytes()
    packet = xmp_packet(label)
    if data[:2] == b"\xff\xd8":
        new = _jpeg_with_xmp(data, packet)
    elif data[:8] == PNG_SIGNATURE:
        new = _png_with_xmp(data, packet)
    else:
        return False
    tmp = path.with_name(f".{path.name[:40]}.label.part")
    try:
        tmp.write_bytes(new)
        os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return True


def _jpeg_segments(data: bytes):
    """(offset, marker, payload) of each header segment up to the start of scan (SOS)."""
    pos = 2
    while pos + 4 <= len(data) and data[pos] == 0xFF:
        marker = data[pos + 1]
        if marker == 0xDA:  # start of scan: entropy-coded data follows
            return
        (length,) = struct.unpack(">H", data[pos + 2:pos + 4])
        yield pos, marker, data[pos + 4:pos + 2 + length]
        pos += 2 + length


def _jpeg_with_xmp(data: bytes, packet: bytes) -> bytes:
    payload = XMP_NAMESPACE + packet
    if len(payload) > MAX_SEGMENT:
        raise ValueError("the provenance label is too long for one JPEG segment")
    segment = b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload
    # After the leading JFIF (APP0) and EXIF (APP1) segments, as the XMP specification recommends;
    # an XMP packet already there is replaced (one packet per file).
    out, pos, placed = [data[:2]], 2, False
    for offset, marker, body in _jpeg_segments(data):
        if not placed and marker not in (0xE0, 0xE1):
            out.append(segment)
            placed = True
        pos = offset + 4 + len(body)
        if marker == 0xE1 and body.startswith(XMP_NAMESPACE):
            continue
        out.append(data[offset:pos])
    if not placed:
        out.append(segment)
    out.append(data[pos:])
    return b"".join(out)


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def _png_chunks(data: bytes):
    pos = 8
    while pos + 12 <= len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        yield pos, kind, data[pos + 8:pos + 8 + length], pos + 12 + length
        pos += 12 + length


def _png_with_xmp(data: bytes, packet: bytes) -> bytes:
    # iTXt: keyword, NUL, compression flag 0, method 0, empty language tag and translated keyword.
    itxt = _png_chunk(b"iTXt", PNG_XMP_KEYWORD + b"\x00\x00\x00\x00\x00" + packet)
    out, placed = [data[:8]], False
    for start, kind, body, end in _png_chunks(data):
        if kind == b"iTXt" and body.startswith(PNG_XMP_KEYWORD + b"\x00"):
            continue  # one packet per file: an older one is replaced
        out.append(data[start:end])
        if kind == b"IHDR" and not placed:
            out.append(itxt)
            placed = True
    if not placed:
        raise ValueError("not a PNG file this module can label (no IHDR chunk)")
    return b"".join(out)


# ---- reading -------------------------------------------------------------------------------------

_LABEL_ATTR = re.compile(rb'ffp:label=("([^"]*)"|\'([^\']*)\')')


def _label_from_packet(packet: bytes) -> dict | None:
    m = _LABEL_ATTR.search(packet)
    if not m:
        return None
    raw = (m.group(2) if m.group(2) is not None else m.group(3)).decode("utf-8", "replace")
    try:
        value = json.loads(unescape(raw, {"&quot;": '"', "&apos;": "'", "&#10;": "\n", "&#13;": "\r", "&#9;": "\t"}))
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def read_label(path: str | os.PathLike) -> dict | None:
    """The provenance label of an output (JPEG, PNG, WebP, TIFF or video), or None when it carries none."""
    path = Path(path)
    with open(path, "rb") as fh:
        head = fh.read(12)
    if head[:2] == b"\xff\xd8":
        data = path.read_bytes()
        for _offset, marker, body in _jpeg_segments(data):
            if marker == 0xE1 and body.startswith(XMP_NAMESPACE):
                return _label_from_packet(body[len(XMP_NAMESPACE):])
        return None
    if head[:8] == PNG_SIGNATURE:
        for _start, kind, body, _end in _png_chunks(path.read_bytes()):
            if kind == b"iTXt" and body.startswith(PNG_XMP_KEYWORD + b"\x00"):
                return _label_from_packet(body)
        return None
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        for kind, body in _riff_chunks(path.read_bytes()):
            if kind == b"XMP ":
                return _label_from_packet(body)
        return None
    if head[:4] in (b"II*\x00", b"MM\x00*"):
        return _tiff_label(path)
    return _video_label(path)


def _riff_chunks(data: bytes):
    """(fourcc, payload) of each chunk of a RIFF file (WebP); chunks are padded to an even size."""
    pos = 12
    while pos + 8 <= len(data):
        kind, (length,) = data[pos:pos + 4], struct.unpack("<I", data[pos + 4:pos + 8])
        yield kind, data[pos + 8:pos + 8 + length]
        pos += 8 + length + (length & 1)


def _tiff_label(path: Path) -> dict | None:
    from PIL import Image  # reads the first directory (the tags) only; no pixel is decoded

    with Image.open(path) as im:
        packet = im.tag_v2.get(TIFF_XMP_TAG)
    if isinstance(packet, str):
        packet = packet.encode("utf-8")
    return _label_from_packet(packet) if isinstance(packet, bytes) else None


def _video_label(path: Path) -> dict | None:
    cmd = [FFPROBE, "-v", "error", "-protocol_whitelist", "file", "-print_format", "json", "-show_format",
           file_url(path.absolute())]
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    if proc.returncode != 0:
        return None
    tags = (json.loads(proc.stdout or b"{}").get("format") or {}).get("tags") or {}
    comment = next((v for k, v in tags.items() if k.lower() == "comment"), None)
    try:
        value = json.loads(comment) if comment else None
    except ValueError:
        return None
    return value if isinstance(value, dict) and value.get("generator") == GENERATOR else None


# ---- the visible watermark -----------------------------------------------------------------------

def watermark_text(text: str) -> str:
    """What can be drawn of `text`: OpenCV's built-in fonts draw ASCII only, so other characters
    become '?', and the text is cut to WATERMARK_MAX_CHARS."""
    clean = "".join(c if 32 <= ord(c) < 127 else "?" for c in str(text).strip())
    return clean[:WATERMARK_MAX_CHARS]


def draw_watermark(bgr, text: str):
    """A copy of the BGR image with `text` small in its bottom-right corner (light text on a dark
    outline, legible on any background). The rest of the picture is untouched."""
    import cv2

    text = watermark_text(text)
    if not text:
        return bgr
    out = bgr.copy()
    h, w = out.shape[:2]
    # About 1/40 of the shorter side tall, never below OpenCV's legible minimum.
    scale = max(0.35, min(h, w) / 1000.0)
    thickness = max(1, round(scale * 1.5))
    (tw, th), base = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, scale, thickness)
    margin = max(4, round(min(h, w) * 0.02))
    x, y = max(0, w - tw - margin), max(th, h - base - margin)
    cv2.putText(out, text, (x, y), cv2.FONT_HERSHEY_SIMPLEX, scale, (0, 0, 0), thickness + 2, cv2.LINE_AA)
    cv2.putText(out, text, (x, y), cv2.FONT_HERSHEY_SIMPLEX, scale, (255, 255, 255), thickness, cv2.LINE_AA)
    return out
