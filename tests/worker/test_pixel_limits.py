"""The worker's pixel limit (the manifest's engine.max_pixels) holds for every video stream, before
anything decodes it: ffprobe and the decoders get `-max_pixels`, and a file over the limit is
refused from its header. Files are crafted here: a PNG of one colour is a few hundred KB whatever
its size."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from worker import ffmpeg as ff
from worker.errors import TargetError
from worker.manifest import DEFAULT_MAX_PIXELS
from worker.video import probe_video, process_video

from .badfiles import png_in_mkv, solid_png

REPO = Path(__file__).resolve().parents[2]
MB = 1024 * 1024


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    if not (shutil.which("ffmpeg") and shutil.which("ffprobe")):
        pytest.fail("ffmpeg/ffprobe not installed: run `make system` (scripts/install-system.sh)", pytrace=False)
    d = tmp_path_factory.mktemp("pixels")
    # 8K: 7680 x 4320 (33 megapixels), two frames of H.264, as a camera writes it
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i",
                    "color=c=gray:size=7680x4320:rate=2:duration=1", "-c:v", "libx264", "-preset", "ultrafast",
                    "-pix_fmt", "yuv420p", str(d / "8k.mp4")], check=True)
    # a frame the header hides: the stream says 64 x 48, its second frame is 16000 x 16000
    solid_png(d / "hidden1.png", 64, 48, (120,))
    solid_png(d / "hidden2.png", 16000, 16000, (120,))
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-framerate", "1", "-i", f"file:{d}/hidden%d.png",
                    "-c:v", "copy", "-f", "matroska", f"file:{d / 'hidden.mkv'}"], check=True)
    return {"16k": png_in_mkv(d / "16k.mkv", 16000), "8k": d / "8k.mp4", "hidden": d / "hidden.mkv"}


# -- pure ----------------------------------------------------------------------------------------

def test_it_gives_every_decoder_and_the_probe_a_pixel_cap():
    assert ff.probe_command("/in/a.mkv", 50_000_000) == [
        "ffprobe", "-v", "error", "-protocol_whitelist", "file", "-max_pixels", "56250000",
        "-print_format", "json", "-show_streams", "-show_format", "file:/in/a.mkv"]
    assert ff.decode_command("/in/a.mkv", 0, (5, 1), max_pixels=50_000_000)[4:11] == [
        "-protocol_whitelist", "file", "-format_whitelist", ff.VIDEO_DEMUXERS, "-max_pixels", "56250000", "-i"]
    assert ff.probe_command("/in/a.mkv") == ff.probe_command("/in/a.mkv", None)  # no limit: no cap


def test_it_finds_the_largest_picture_of_every_stream_cover_art_too():
    data = {"streams": [{"codec_type": "video", "width": 1920, "height": 1080},
                        {"codec_type": "audio"},
                        {"codec_type": "video", "width": 16000, "height": 16000, "disposition": {"attached_pic": 1}}]}
    assert ff.largest_picture(data) == (16000, 16000)
    # a stream whose decoder refused its picture has no size in the JSON: ffprobe's words have it
    hidden = {"streams": [{"codec_type": "video", "width": 0, "height": 0}]}
    err = "[png] [IMGUTILS] Picture size 16000x12000 exceeds specified max pixel count 56250000, see ..."
    assert ff.largest_picture(hidden, err) == (16000, 12000)
    assert ff.largest_picture({"streams": [{"codec_type": "audio"}]}) == (0, 0)


# -- real ffmpeg ---------------------------------------------------------------------------------

def _children_peak_mib(code: str) -> tuple[dict, float]:
    """Run `code` (which prints one JSON line) in a fresh Python; its result and the largest peak
    RSS of any process it started (ffprobe, ffmpeg), in MiB."""
    script = textwrap.dedent(code) + textwrap.dedent("""
        import resource as _r, sys as _s
        print(json.dumps({"result": result, "peak_kib": _r.getrusage(_r.RUSAGE_CHILDREN).ru_maxrss}))
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True)
    line = json.loads(out.stdout.strip().splitlines()[-1])
    return line["result"], line["peak_kib"] / 1024


def test_a_16000_pixel_png_in_mkv_is_refused_before_anything_decodes_it(videos):
    with pytest.raises(TargetError, match=r"16000x16000 = 256 megapixels, over the limit of 50") as caught:
        probe_video(videos["16k"], max_pixels=DEFAULT_MAX_PIXELS)
    assert caught.value.code == "too_many_pixels"
    assert caught.value.params == {"name": "16k.mkv", "megapixels": 256, "limit": 50, "width": 16000,
                                   "height": 16000}
    # ffprobe itself decodes the frame to learn its pixel format (256 MB here, 1 GB in RGBA) unless capped
    result, peak = _children_peak_mib(f"""
        import json
        from worker.errors import TargetError
        from worker.video import probe_video
        try:
            probe_video({str(videos["16k"])!r}, max_pixels={DEFAULT_MAX_PIXELS})
            result = "read"
        except TargetError as exc:
            result = exc.code
    """)
    assert result == "too_many_pixels" and peak < 150, f"ffprobe peaked at {peak:.0f} MiB"


def test_the_worker_never_starts_a_decoder_on_a_video_over_the_limit(videos, tmp_path, monkeypatch):
    real_popen = subprocess.Popen

    def only_ffprobe(cmd, *a, **kw):
        assert cmd[0] == ff.FFPROBE, f"{cmd[0]} was started"
        return real_popen(cmd, *a, **kw)

    monkeypatch.setattr(subprocess, "Popen", only_ffprobe)
    with pytest.raises(TargetError, match="over the limit of 50 megapixels"):
        process_video(videos["16k"], tmp_path / "out.mp4", lambda f: (f, 0, 0), max_pixels=DEFAULT_MAX_PIXELS)
    assert not (tmp_path / "out.mp4").exists()


def test_a_frame_bigger_than_its_header_says_is_refused_by_the_decoder(videos):
    result, peak = _children_peak_mib(f"""
        import json, subprocess
        from worker import ffmpeg as ff
        cmd = ff.decode_command({str(videos["hidden"])!r}, 0, None, max_pixels={DEFAULT_MAX_PIXELS})
        proc = subprocess.run(cmd, capture_output=True)
        result = [len(proc.stdout), "exceeds specified max pixel count" in proc.stderr.decode()]
    """)
    assert result == [64 * 48 * 3, True]  # the small frame only; the big one never decoded
    assert peak < 150, f"the decoder peaked at {peak:.0f} MiB"  # decoding it takes 256 MB and more


def test_an_8k_video_passes_the_limit_and_is_processed(videos, tmp_path):
    info = probe_video(videos["8k"], max_pixels=DEFAULT_MAX_PIXELS)
    assert (info.width, info.height) == (7680, 4320)
    res = process_video(videos["8k"], tmp_path / "out.mp4", lambda f: (f, 0, 0), max_pixels=DEFAULT_MAX_PIXELS)
    assert res.frames == 2 and (tmp_path / "out.mp4").stat().st_size > 0
