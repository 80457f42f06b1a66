"""What is checked the moment a file sent ahead of Start is complete (jobs.models.Upload).

Everything a Start would refuse is found here, while the user is still on the form: not an image or
a video, damaged, too big, a face photo without a face, a video that cannot be read. A ready upload
carries what was found (`info`: pixels, faces, a video's duration and frames, for the form and the
estimate) and a small preview: the face found, a video's first frame, a photo scaled down.

Memory is bounded whatever arrives (`jobs.uploads.decoding`): pixels are refused from the header before
anything is decoded (for a video, every stream's), and a process runs at most
UPLOAD_CHECKS_AT_ONCE checks at once; the others wait their turn.
"""
from __future__ import annotations

import logging
import os
import subprocess
import warnings
from pathlib import Path

import numpy as np
from django.core.files import File
from django.utils.translation import gettext as _
from PIL import Image

from jobs import content_safety
from jobs.errors import UploadRejected
from jobs.models import Upload, UploadKind, UploadStatus
from jobs.uploads.content import check_upload
from jobs.uploads.decoding import decode_slot, max_pixels, small_picture, too_many_pixels
from worker import ffmpeg as ff
from worker.errors import ModelError, TargetError
from worker.facecheck import CHECK_MAX_SIDE, face_crop_box, face_descriptor, find_faces
from worker.video import probe_video

log = logging.getLogger(__name__)

#: the preview's longest side, in pixels
PREVIEW_SIDE = 320
#: seconds ffmpeg may take for a video's first frame
POSTER_TIMEOUT_S = 30


def check_arrived(upload: Upload) -> None:
    """Check a complete upload and save its verdict (`status`, `problem`, `info`, the preview).
    Waits for a decoding slot first (`jobs.uploads.decoding.decode_slot`)."""
    try:
        with decode_slot():
            info = _check(upload)
    except UploadRejected as exc:
        upload.status, upload.problem, upload.info = UploadStatus.REFUSED, exc.message, {}
        upload.preview_path.unlink(missing_ok=True)
    else:
        upload.status, upload.problem, upload.info = UploadStatus.READY, "", info
    upload.save(update_fields=["status", "problem", "info", "updated_at"])


def _check(upload: Upload) -> dict:
    kind = "media" if upload.kind == UploadKind.TARGET else "image"
    with open(upload.path, "rb") as fh:
        check_upload(File(fh, name=upload.name), kind=kind)  # by content: type, size, pixels, complete
        fh.seek(0)
        is_image = _is_image(fh)
    if not is_image:
        return _check_video(upload)
    return _check_image(upload)


def _is_image(fh) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            Image.open(fh).close()
        return True
    except Exception:  # noqa: BLE001 - check_upload already said it is an image or a video
        return False


def _check_image(upload: Upload) -> dict:
    picture, width, height = _picture(upload.path)
    info = {"media": "image", "width": width, "height": height}
    if upload.kind == UploadKind.TARGET:
        _save_preview(picture, upload.preview_path)
        return info
    faces = _faces_or_refuse(picture)
    w, h = picture.size
    crop = face_crop_box(faces[0], w, h)
    _save_preview(picture.crop(crop), upload.preview_path)
    info["faces"] = len(faces)
    descriptor = _descriptor(picture, faces[0])
    if descriptor:  # who it shows: face photos of different people are flagged (jobs.uploads.identity)
        info["descriptor"] = descriptor
    info.update(content_safety.screen_upload(upload, picture))  # the optional content check (issue 14)
    # where the face is, as fractions of the picture (the same whatever size it is shown at)
    info["face_box"] = [round(v, 4) for v in (crop[0] / w, crop[1] / h, crop[2] / w, crop[3] / h)]
    return info


def check_face(f) -> None:
    """Raise UploadRejected when the face photo `f` (a path or an open file, already checked by
    `check_upload`) shows no face: the check a file sent with the form gets (no JavaScript, the API)."""
    with decode_slot():
        _faces_or_refuse(_picture(f)[0])


def _picture(f) -> tuple[Image.Image, int, int]:
    """The photo upright, in RGB, at most CHECK_MAX_SIDE pixels; and its full width and height."""
    return small_picture(f, CHECK_MAX_SIDE)


def _faces_or_refuse(picture: Image.Image):
    faces = find_faces(np.asarray(picture))
    if not faces:
        raise UploadRejected(_("no face found in this photo: choose a clear photo where the face is seen from the front"))
    return faces


def descriptor_of(f) -> list[float] | None:
    """Who the face photo `f` (a path or an open file) shows: the descriptor of its largest face,
    or None (no face, or the models missing: logged, the photo is not refused for it)."""
    with decode_slot():
        picture = _picture(f)[0]
        faces = find_faces(np.asarray(picture))
        return _descriptor(picture, faces[0]) if faces else None


def _descriptor(picture: Image.Image, face) -> list[float] | None:
    try:
        return face_descriptor(np.asarray(picture), face)
    except ModelError as exc:  # an install problem, not the user's: say it loudly, take the photo
        log.error("face photos cannot be told apart: %s", exc)
        return None


def _check_video(upload: Upload) -> dict:
    try:
        # every video stream's picture against the limit, before ffprobe or anything else decodes it
        video = probe_video(upload.path, name=upload.name, max_pixels=max_pixels())
    except TargetError as exc:
        if exc.code == "too_many_pixels":
            raise too_many_pixels(exc.params["width"], exc.params["height"], "video") from None
        log.info("upload %s: video refused: %s", upload.id, exc)
        raise UploadRejected(_("this video cannot be read (it may be damaged or cut off); send the whole file again")) from None
    except Exception as exc:  # noqa: BLE001 - any reason: the worker could not read it either
        log.info("upload %s: video refused: %s", upload.id, exc)
        raise UploadRejected(_("this video cannot be read (it may be damaged or cut off); send the whole file again")) from None
    info = {"media": "video", "width": video.width, "height": video.height,
            "duration": round(video.duration, 3) if video.duration else None,
            "fps": round(float(video.fps), 3) if video.fps else None, "frames": video.estimated_frames}
    save_poster(upload.path, upload.preview_path, video.duration, video.stream_index)
    return info


def poster_command(src: str | os.PathLike, out: str | os.PathLike, at_seconds: float,
                   stream_index: int | None = None) -> list[str]:
    """ffmpeg's argument list for one frame of `src`'s stream `stream_index` (the one the worker
    reads) at `at_seconds`, scaled to PREVIEW_SIDE, as JPEG: the file protocol and video demuxers
    only, no picture over the pixel limit (`worker.ffmpeg.frame_command`, as the content check's)."""
    return ff.frame_command(src, at_seconds, out, codec="mjpeg", side=PREVIEW_SIDE, stream_index=stream_index,
                            max_pixels=max_pixels())


def save_poster(src: Path, out: Path, duration: float | None, stream_index: int | None = None) -> None:
    # a second in: the very first frame is often black (a fade-in)
    at = min(1.0, duration / 2) if duration else 0.0
    tmp = out.with_name(out.name + ".part")
    try:
        subprocess.run(poster_command(src, tmp, at, stream_index), check=True, timeout=POSTER_TIMEOUT_S,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        os.chmod(tmp, 0o600)
        os.replace(tmp, out)
    except (OSError, subprocess.SubprocessError) as exc:  # no poster is no reason to refuse the video
        log.warning("no poster for %s: %s", src, exc)
        tmp.unlink(missing_ok=True)


def _save_preview(picture: Image.Image, out: Path) -> None:
    picture = picture.copy()
    picture.thumbnail((PREVIEW_SIDE, PREVIEW_SIDE))
    tmp = out.with_name(out.name + ".part")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        picture.save(fh, "JPEG", quality=85)
    os.replace(tmp, out)
