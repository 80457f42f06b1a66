"""Outputs: fetched from the cluster into the job's media folder, with a thumbnail for the job page.

The watcher only decides which outputs are missing (jobs.watcher.decide) and enqueues
`fetch_outputs` for them (jobs.background.enqueue); the transfer runs on the RQ worker.
"""
from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path

from PIL import Image, ImageOps

import cluster
from jobs import transitions
from jobs.live.protocol import Publisher
from jobs.models import Job, Target
from jobs.models.job import OK_TARGET_STATUSES
from jobs.uploads.decoding import max_pixels
from worker.layout import JobFolder
from worker.manifest import is_video_name

log = logging.getLogger(__name__)

def make_thumbnail(src_path: str, dst_path: str, size: int = 320) -> bool:
    """Write a JPEG thumbnail of `src_path` (at most `size` pixels on its long side) to `dst_path`.

    Upright as the camera meant it (EXIF orientation applied). True when written; False for
    videos and for anything Pillow cannot read: a missing thumbnail only means the page shows a
    placeholder, so this never raises. The file appears atomically (written aside, then renamed),
    so a page never serves half a thumbnail.
    """
    if is_video_name(src_path):
        return False
    dst = Path(dst_path)
    tmp = dst.with_name(f".{dst.name}.part")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # DecompressionBombWarning etc.: decided below
            with Image.open(src_path) as im:
                if im.width * im.height > max_pixels():  # the worker's limit: an output is no bigger
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
        os.chmod(tmp, 0o600)  # the portal's files are private
        os.replace(tmp, dst)
        return True
    except Exception as exc:  # noqa: BLE001 - a thumbnail is never worth failing the caller
        log.info("no thumbnail for %s: %s", src_path, exc)
        tmp.unlink(missing_ok=True)
        return False


def make_video_poster(src_path: str, dst_path: str) -> bool:
    """A video's poster, shown where a photo shows its thumbnail: one frame of the swapped video a
    second in (the New job page's upload check makes the input's the same way), as a JPEG at most
    320 pixels wide. True when written; like `make_thumbnail`, never raises (no poster only means
    the page shows a placeholder)."""
    from jobs.uploads.on_complete import save_poster  # the one ffmpeg command for a video's poster
    from worker.video import probe_video

    dst = Path(dst_path)
    try:
        video = probe_video(src_path, max_pixels=max_pixels())
        dst.parent.mkdir(parents=True, exist_ok=True)
    except Exception as exc:  # noqa: BLE001 - see the docstring
        log.info("no poster for %s: %s", src_path, exc)
        return False
    save_poster(Path(src_path), dst, video.duration, video.stream_index)
    return dst.is_file()


def _flatten(im: Image.Image) -> Image.Image:
    """RGB on white: transparent PNG/WebP areas would turn black in a JPEG."""
    im = im.convert("RGBA")
    background = Image.new("RGB", im.size, (255, 255, 255))
    background.paste(im, mask=im.getchannel("A"))
    return background


# ---- fetching outputs (an RQ task: a slow transfer never holds up the watcher's poll) -----------

def _wanted(job_id: str, indexes: list[int], **still) -> tuple[Job | None, list[Target]]:
    """The job and those of its targets `indexes` that still match `still` (the RQ task runs a while
    after it was asked: another run may have fetched them); no targets when the job is gone."""
    job = Job.objects.select_related("cluster").filter(pk=job_id).first()
    if job is None:
        return None, []
    return job, list(job.targets.filter(index__in=indexes, **still))


def fetch_outputs(job_id: str, indexes: list[int]) -> int:
    """Fetch the outputs of these targets of one job over SFTP, make their thumbnails, and tell the
    job page. Returns how many were fetched. Safe to run twice: a target that has its output is
    skipped. A cluster outage raises (RQ retries; the watcher asks again later if need be)."""
    job, wanted = _wanted(job_id, indexes, output_file="", status__in=OK_TARGET_STATUSES)
    if not wanted:
        return 0
    runner = cluster.runner_for(job.cluster)
    folder = job.folder
    pub = Publisher()
    for target in wanted:
        fetch_output(runner, job, folder, target)
        pub.output(job, target)
    pub.flush()
    return len(wanted)


def fetch_posters(job_id: str, indexes: list[int]) -> int:
    """Fetch the posters of these running videos of one job (a frame the worker wrote before the
    video ends), as their thumbnails, and tell the job page. A video that ended meanwhile gets its
    output instead (whose poster replaces the worker's). Returns how many thumbnails were made.
    Clears the targets' `fetch_asked_at`, so an output asked for next is asked at once."""
    job, wanted = _wanted(job_id, indexes, thumbnail_file="")
    if not wanted:
        return 0
    runner = cluster.runner_for(job.cluster)
    folder = job.folder
    pub = Publisher()
    made = 0
    for target in wanted:
        if target.status in OK_TARGET_STATUSES:
            fetch_output(runner, job, folder, target)
        else:
            fetch_poster(runner, job, folder, target)
        Target.objects.filter(pk=target.pk).update(fetch_asked_at=None)
        if target.thumbnail_file:
            made += 1
            pub.output(job, target)
    pub.flush()
    return made


def fetch_poster(runner, job: Job, folder: JobFolder, target: Target) -> None:
    """Copy a running video's poster from the cluster and record it as the target's thumbnail
    (re-encoded here: what is served is always a JPEG this side made)."""
    thumb = job.media_dir / "thumbs" / (Path(target.output_name).stem + ".jpg")
    fetched = thumb.with_name(f".{thumb.name}.fetched")
    thumb.parent.mkdir(parents=True, exist_ok=True)
    try:
        runner.get_file(folder.poster(target.output_name), str(fetched))
        if not make_thumbnail(str(fetched), str(thumb)):
            return
    finally:
        fetched.unlink(missing_ok=True)
    Target.objects.filter(pk=target.pk).update(thumbnail_file=str(thumb))
    target.thumbnail_file = str(thumb)


def fetch_output(runner, job: Job, folder: JobFolder, target: Target) -> None:
    """Copy one output into the job's media folder, make its thumbnail, and record both on the row."""
    local = job.media_dir / "outputs" / target.output_name
    local.parent.mkdir(parents=True, exist_ok=True)
    runner.get_file(folder.output(target.output_name), str(local))
    thumb = job.media_dir / "thumbs" / (Path(target.output_name).stem + ".jpg")
    fields = {"output_file": str(local)}
    made = make_video_poster if is_video_name(target.output_name) else make_thumbnail
    if made(str(local), str(thumb)):
        fields["thumbnail_file"] = str(thumb)
    transitions.write(target, **fields)
