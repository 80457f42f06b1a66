"""Decoding what users send, bounded (jobs.uploads.decoding): a photo or a video over the pixel limit is
refused from its header, in plain words, before anything decodes it; checks arriving together
decode UPLOAD_CHECKS_AT_ONCE at a time; the poster's ffmpeg reads only the file it was given.
The crafted files are made here: a PNG of one colour is a few hundred KB whatever its size."""
from __future__ import annotations

import shutil
import socket
import subprocess
import threading
from pathlib import Path

import pytest
from PIL import Image, ImageFile

from jobs.models import Upload, UploadKind, UploadStatus
from jobs.uploads import on_complete as upload_checks
from jobs.uploads import store as upload_store
from jobs.uploads.on_complete import check_arrived, poster_command, save_poster
from tests.worker.badfiles import png_in_mkv, solid_png
from worker import ffmpeg as ff


@pytest.fixture(scope="module")
def crafted(tmp_path_factory):
    if not (shutil.which("ffmpeg") and shutil.which("ffprobe")):
        pytest.fail("ffmpeg/ffprobe not installed: run `make system` (scripts/install-system.sh)", pytrace=False)
    d = tmp_path_factory.mktemp("crafted")

    def clip(name: str, size: str) -> Path:
        subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i",
                        f"testsrc2=size={size}:rate=2:duration=2", "-c:v", "libx264", "-preset", "ultrafast",
                        "-pix_fmt", "yuv420p", str(d / name)], check=True)
        return d / name

    return {"png8000": solid_png(d / "big.png", 8000, 8000), "png7000": solid_png(d / "seven.png", 7000, 7000),
            "photo8k": solid_png(d / "8k.png", 7680, 4320), "mkv16000": png_in_mkv(d / "big.mkv", 16000),
            "video4k": clip("4k.mp4", "3840x2160"), "video8k": clip("8k.mp4", "7680x4320")}


def arrived(user, path: Path, kind=UploadKind.TARGET) -> Upload:
    """An upload of the file at `path`, complete and checked as the last piece's request checks it."""
    upload = upload_store.create(user, kind, path.name, path.stat().st_size)
    shutil.copyfile(path, upload.path)
    Upload.objects.filter(pk=upload.pk).update(offset=upload.size, received=upload.size)
    upload.offset = upload.received = upload.size
    check_arrived(upload)
    upload.refresh_from_db()
    return upload


@pytest.fixture
def nothing_decoded(monkeypatch):
    """Fails the test on any pixel decoded by Pillow, any face looked for, and any ffmpeg started
    (ffprobe may run: it reads headers, and is given the pixel cap). Returns the commands run."""
    def no_decode(self, *a, **kw):
        raise AssertionError(f"{self.format} {self.size} was decoded")

    def no_faces(*a, **kw):
        raise AssertionError("faces were looked for")

    monkeypatch.setattr(ImageFile.ImageFile, "load", no_decode)
    monkeypatch.setattr(upload_checks, "find_faces", no_faces)
    commands = []
    real_popen = subprocess.Popen

    def only_ffprobe(cmd, *a, **kw):
        commands.append(list(cmd))
        assert cmd[0] == ff.FFPROBE, f"{cmd[0]} was started"
        return real_popen(cmd, *a, **kw)

    monkeypatch.setattr(subprocess, "Popen", only_ffprobe)
    return commands


def test_a_photo_over_the_pixel_limit_is_refused_from_its_header(owner, crafted, nothing_decoded):
    for kind in (UploadKind.TARGET, UploadKind.SOURCE):
        up = arrived(owner, crafted["png8000"], kind)
        assert (up.status, up.problem) == (UploadStatus.REFUSED, (
            "this photo is 8000 x 8000 pixels; the largest the portal takes is 50 megapixels "
            "(such as 8000 x 6000): make it smaller and upload it again"))


def test_the_limit_is_a_setting_under_which_a_7000_pixel_png_is_refused(owner, crafted, settings, nothing_decoded):
    settings.MEDIA_MAX_PIXELS = 40_000_000
    up = arrived(owner, crafted["png7000"])
    assert (up.status, up.problem) == (UploadStatus.REFUSED, (
        "this photo is 7000 x 7000 pixels; the largest the portal takes is 40 megapixels "
        "(such as 7200 x 5400): make it smaller and upload it again"))


def test_a_png_in_mkv_over_the_limit_is_refused_before_any_decoder_runs(owner, crafted, nothing_decoded):
    up = arrived(owner, crafted["mkv16000"])
    assert (up.status, up.problem) == (UploadStatus.REFUSED, (
        "this video is 16000 x 16000 pixels; the largest the portal takes is 50 megapixels "
        "(such as 8000 x 6000): make it smaller and upload it again"))
    assert not up.preview_path.exists()
    # ffprobe alone ran, capped: it would decode the frame (1 GB in RGBA) to learn its pixel format
    assert [c[:7] for c in nothing_decoded] == [
        ["ffprobe", "-v", "error", "-protocol_whitelist", "file", "-max_pixels", "56250000"]]


def test_an_8k_photo_and_4k_and_8k_videos_still_pass(owner, crafted):
    photo = arrived(owner, crafted["photo8k"])
    assert photo.status == UploadStatus.READY and (photo.info["width"], photo.info["height"]) == (7680, 4320)
    with Image.open(photo.preview_path) as preview:
        assert preview.size == (320, 180)
    for name, size in (("video4k", (3840, 2160)), ("video8k", (7680, 4320))):
        video = arrived(owner, crafted[name])
        assert video.status == UploadStatus.READY, video.problem
        assert (video.info["width"], video.info["height"]) == size
        with Image.open(video.preview_path) as poster:
            assert poster.size == (320, 180)


def test_checks_arriving_together_decode_at_most_the_setting_at_once(owner, settings, monkeypatch):
    """Five uploads complete at once with UPLOAD_CHECKS_AT_ONCE = 2: two are checked, three wait
    (none is refused), and every one is checked in the end."""
    settings.UPLOAD_CHECKS_AT_ONCE = 2
    inside, most, lock = 0, 0, threading.Lock()
    entered, go_on = threading.Semaphore(0), threading.Event()

    def slow_check(upload):
        nonlocal inside, most
        with lock:
            inside += 1
            most = max(most, inside)
        entered.release()
        go_on.wait(30)
        with lock:
            inside -= 1
        return {"media": "image"}

    monkeypatch.setattr(upload_checks, "_check", slow_check)
    uploads = [Upload(owner=owner, kind=UploadKind.TARGET, name=f"{i}.png", size=1) for i in range(5)]
    for u in uploads:
        u.save = lambda **kw: None  # the verdict only (threads share no test transaction)
    threads = [threading.Thread(target=check_arrived, args=(u,)) for u in uploads]
    for t in threads:
        t.start()
    try:
        assert entered.acquire(timeout=30) and entered.acquire(timeout=30)  # two checks run ...
        assert not entered.acquire(timeout=0.5)  # ... and no third starts while they do
    finally:
        go_on.set()
        for t in threads:
            t.join(30)
    assert most == 2 and [u.status for u in uploads] == [UploadStatus.READY] * 5


def test_a_check_inside_a_check_does_not_wait_for_itself(settings):
    from jobs.uploads.decoding import decode_slot

    settings.UPLOAD_CHECKS_AT_ONCE = 1
    with decode_slot():
        with decode_slot():
            pass
    with decode_slot():  # the slot was given back
        pass


# ---- the poster's ffmpeg reads only the file it was given --------------------------------------

def test_the_poster_command_reads_files_and_video_containers_only_and_caps_pixels():
    assert poster_command("/m/a.mkv", "/m/a.jpg.part", 1.0, 0) == [
        "ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-y", "-ss", "1.000",
        "-protocol_whitelist", "file", "-format_whitelist", ff.VIDEO_DEMUXERS, "-max_pixels", "56250000",
        "-i", "file:/m/a.mkv", "-map", "0:0", "-frames:v", "1", "-vf", "scale='min(320,iw)':-2",
        "-f", "image2", "-c:v", "mjpeg", "file:/m/a.jpg.part"]


def _playlist(path: Path, segment: str) -> Path:
    path.write_text(f"#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\n{segment}\n#EXT-X-ENDLIST\n")
    return path


def test_a_playlist_pointing_at_a_file_elsewhere_gets_no_poster(tmp_path):
    """An HLS playlist named .mp4 whose segment is a video elsewhere on the server: ffmpeg's `file`
    protocol alone would read that video for the poster (and show it); only video containers may
    be opened, so nothing is read."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i",
                    "testsrc2=size=160x120:rate=10:duration=2", "-c:v", "libx264", "-preset", "ultrafast",
                    "-f", "mpegts", str(elsewhere / "private.ts")], check=True)
    crafted = _playlist(tmp_path / "clip.mp4", str(elsewhere / "private.ts"))
    save_poster(crafted, tmp_path / "poster.jpg", 2.0)
    assert not (tmp_path / "poster.jpg").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")] == []


def test_a_playlist_pointing_at_a_web_address_is_never_fetched(tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    try:
        port = listener.getsockname()[1]
        crafted = _playlist(tmp_path / "clip.mp4", f"http://127.0.0.1:{port}/segment.ts")
        save_poster(crafted, tmp_path / "poster.jpg", 2.0)
        with pytest.raises(socket.timeout):
            listener.accept()[0].close()  # nobody came
    finally:
        listener.close()
    assert not (tmp_path / "poster.jpg").exists()
