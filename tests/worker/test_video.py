"""worker.video on short clips made here with real ffmpeg: frames, rate, size and audio kept, broken
files refused in plain words, clean-up on failure and SIGTERM, posters. worker.ffmpeg's builders
and parsers (list equality, no processes): test_video_ffmpeg.py."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from worker import ffmpeg as ff
from worker.errors import TargetError
from worker.manifest import output_name_for_video
from worker.targetfile import allowed_folders, open_target
from worker.video import probe_video, process_video

REPO = Path(__file__).resolve().parents[2]


# -- real ffmpeg: clips made by the tests --------------------------------------------------------

def _ffmpeg(*args: str) -> None:
    subprocess.run(["ffmpeg", "-v", "error", "-y", *args], check=True)


def _lavfi(out: Path, size: str, seconds: float, *codec: str, rate: int = 25, vf: tuple[str, ...] = ()) -> Path:
    _ffmpeg("-f", "lavfi", "-i", f"testsrc2=size={size}:rate={rate}:duration={seconds}",
            "-f", "lavfi", "-i", f"sine=frequency=440:duration={seconds}", *vf, *codec, str(out))
    return out


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    if not (shutil.which("ffmpeg") and shutil.which("ffprobe")):
        pytest.fail("ffmpeg/ffprobe not installed: run `make system` (scripts/install-system.sh)", pytrace=False)
    d = tmp_path_factory.mktemp("clips")
    h264 = ("-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p")
    c = {
        "mp4": _lavfi(d / "a.mp4", "320x240", 2, *h264, "-c:a", "aac"),
        "odd": _lavfi(d / "odd.mov", "322x242", 2, "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "pcm_s16le",
                      vf=("-vf", "format=yuv444p,crop=321:241:0:0")),  # testsrc2 makes even sizes only
        "webm": _lavfi(d / "w.webm", "320x240", 2, "-c:v", "libvpx-vp9", "-deadline", "realtime",
                       "-cpu-used", "8", "-c:a", "libopus"),
        # every third frame dropped, timestamps kept: a variable frame rate
        "vfr": _lavfi(d / "vfr.mp4", "320x240", 2, *h264, "-c:a", "aac", rate=30,
                      vf=("-vf", "select='not(eq(mod(n,3),1))'", "-fps_mode", "vfr")),
        "long": _lavfi(d / "long.mp4", "320x240", 20, *h264, "-c:a", "aac"),
    }
    _ffmpeg("-i", str(c["mp4"]), "-c", "copy", "-metadata:s:v:0", "rotate=90", str(d / "rot.mp4"))
    c["rot"] = d / "rot.mp4"
    big = _lavfi(d / "big.mp4", "320x240", 2, "-c:v", "libx264", "-preset", "ultrafast", "-crf", "5", "-c:a", "aac")
    _ffmpeg("-i", str(big), "-c", "copy", "-movflags", "+faststart", str(d / "big_fs.mp4"))
    for name, src in (("trunc_index", big), ("trunc_frames", d / "big_fs.mp4")):
        (d / f"{name}.mp4").write_bytes(src.read_bytes()[: src.stat().st_size // 2])
        c[name] = d / f"{name}.mp4"
    return c


def _stream(path: Path) -> dict:
    out = subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
                          "stream=width,height,r_frame_rate,nb_read_frames:stream_side_data=rotation:format=duration",
                          "-of", "json", str(path)], check=True, capture_output=True).stdout
    data = json.loads(out)
    audio = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "a", "-show_entries", "stream=codec_name",
                            "-of", "csv=p=0", str(path)], check=True, capture_output=True, text=True).stdout.split()
    return {**data["streams"][0], "duration": float(data["format"]["duration"]), "audio": audio}


def _first_frame(path: Path, w: int, h: int) -> np.ndarray:
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", str(path), "-frames:v", "1", "-f", "rawvideo",
                          "-pix_fmt", "bgr24", "-"], check=True, capture_output=True).stdout
    return np.frombuffer(raw, np.uint8).reshape(h, w, 3)


def _white_corner(frame: np.ndarray) -> tuple[np.ndarray, int, int]:
    frame[:16, :16] = 255
    return frame, 1, 1


@pytest.mark.parametrize("clip, out_name, audio", [
    ("mp4", "out.mp4", "copied"),
    ("mp4", "out.mkv", "copied"),
    ("odd", "out.mov", "copied"),  # PCM is fine in MOV
    ("odd", "out.mp4", "re-encoded to AAC"),  # ... but not in MP4
    ("webm", output_name_for_video("out.webm"), "re-encoded to AAC"),  # opus -> AAC in MP4
    ("vfr", "out.mp4", "copied"),
    ("rot", "out.mp4", "copied"),
])
def test_it_keeps_frame_count_rate_size_and_audio(clips, tmp_path, clip, out_name, audio):
    src, dst = clips[clip], tmp_path / out_name
    before = _stream(src)
    info = probe_video(src)
    calls = []
    result = process_video(src, dst, _white_corner, on_progress=lambda d, t: calls.append((d, t)))
    after = _stream(dst)
    n = int(before["nb_read_frames"])
    assert int(after["nb_read_frames"]) == result.frames == n
    assert (result.faces_found, result.faces_swapped, result.audio) == (n, n, audio)
    assert (int(after["width"]), int(after["height"])) == (info.width, info.height)
    assert not after.get("side_data_list")  # frames were turned upright, no rotation flag left
    assert Fraction(after["r_frame_rate"]) == info.fps
    assert abs(after["duration"] - before["duration"]) < 0.1
    assert len(after["audio"]) == 1
    assert calls[-1] == (n, n) and len(calls) == -(-n // 25)
    assert _first_frame(dst, info.width, info.height)[:16, :16].min() >= 240
    assert _first_frame(src, info.width, info.height)[:16, :16].mean() < 200
    assert sorted(p.name for p in tmp_path.iterdir()) == [out_name]


def test_it_sizes_rotated_and_odd_videos_as_displayed(clips):
    assert (probe_video(clips["rot"]).width, probe_video(clips["rot"]).height) == (240, 320)
    assert probe_video(clips["rot"]).rotation == 90
    assert (probe_video(clips["odd"]).width, probe_video(clips["odd"]).height) == (321, 241)
    assert probe_video(clips["webm"]).frames is None and probe_video(clips["webm"]).estimated_frames == 50


def test_it_reports_progress_every_n_frames(clips, tmp_path):
    calls = []
    process_video(clips["mp4"], tmp_path / "o.mp4", lambda f: (f, 0, 0), progress_every=20,
                  on_progress=lambda d, t: calls.append((d, t)))
    assert calls == [(20, 50), (40, 50), (50, 50)]


@pytest.mark.parametrize("make, message", [
    (lambda c, d: c["trunc_index"], r"is truncated or damaged \(its index is missing"),
    (lambda c, d: c["trunc_frames"], r"is truncated or damaged: only \d+ of 50 frames"),
    (lambda c, d: _write(d / "text.mp4", b"this is not a video\n" * 100), "is not a video this worker can read"),
    (lambda c, d: _write(d / "image.mp4", _png()), "is a still image, not a video"),
    (lambda c, d: _write(d / "zero.mp4", b""), r"is empty \(0 bytes\)"),
    (lambda c, d: d / "missing.mp4", "file not found: missing.mp4"),
])
def test_it_rejects_broken_files_in_plain_words(clips, tmp_path, make, message):
    src = make(clips, tmp_path)
    dst = tmp_path / "out" / "o.mp4"
    tmp_root = tmp_path / "tmp"
    tmp_root.mkdir()
    with pytest.raises(TargetError, match=message):
        process_video(src, dst, lambda f: (f, 0, 0), tmp_root=tmp_root)
    assert not dst.parent.exists() and list(tmp_root.iterdir()) == []


def test_it_cleans_up_when_frame_fn_fails(clips, tmp_path):
    dst, tmp_root = tmp_path / "o.mp4", tmp_path / "tmp"
    dst.write_bytes(b"earlier output")
    tmp_root.mkdir()

    seen = []

    def fails_at_ten(frame):
        seen.append(1)
        if len(seen) == 10:
            raise RuntimeError("engine crashed")
        return frame, 0, 0

    with pytest.raises(RuntimeError, match="engine crashed"):
        process_video(clips["mp4"], dst, fails_at_ten, tmp_root=tmp_root)
    assert dst.read_bytes() == b"earlier output" and list(tmp_root.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.mp4", "tmp"]
    assert _processes_mentioning(str(clips["mp4"])) == []
    with pytest.raises(ValueError, match="uint8 array of shape"):
        process_video(clips["mp4"], dst, lambda f: (f[:10], 0, 0), tmp_root=tmp_root)
    assert list(tmp_root.iterdir()) == []


def test_it_re_encodes_audio_when_the_container_refuses_a_copy(clips, tmp_path, monkeypatch):
    # MP4 refuses PCM; pretend the copy rules said yes, so the first mux fails and is retried
    monkeypatch.setattr(ff, "audio_args", lambda container, codecs: ["-c:a", "copy"])
    result = process_video(clips["odd"], tmp_path / "o.mp4", lambda f: (f, 0, 0))
    assert result.audio == "re-encoded to AAC" and _stream(tmp_path / "o.mp4")["audio"] == ["aac"]


def test_it_ends_progress_at_all_frames_done_when_the_total_was_an_estimate(clips, tmp_path):
    calls = []
    process_video(clips["webm"], tmp_path / "o.mkv", lambda f: (f, 0, 0), progress_every=50,
                  on_progress=lambda d, t: calls.append((d, t)))
    assert calls[-1] == (50, 50) and probe_video(clips["webm"]).frames is None


def test_it_refuses_a_webm_output_name(clips, tmp_path):
    with pytest.raises(ValueError, match="output_name_for_video"):
        process_video(clips["webm"], tmp_path / "o.webm", lambda f: (f, 0, 0))


SIGTERM_SCRIPT = textwrap.dedent("""
    import signal, sys
    from worker.signals import install_sigterm_handler
    from worker.video import process_video
    install_sigterm_handler()
    frames = 0
    def until_sigterm(frame):
        # five frames go through (the test reads their progress line), then the face work waits
        # for the test's SIGTERM: the video is mid-way when it comes, however fast this machine is
        global frames
        frames += 1
        while frames > 5:
            signal.pause()
        return frame, 0, 0
    def progress(done, total):
        print("progress", done, total, flush=True)
    process_video(sys.argv[1], sys.argv[2], until_sigterm, progress_every=5, on_progress=progress)
    print("finished", flush=True)
""")


def test_it_cleans_up_on_sigterm(clips, tmp_path):
    tmpdir, dst = tmp_path / "tmp", tmp_path / "out" / "o.mp4"
    tmpdir.mkdir()
    env = {**os.environ, "TMPDIR": str(tmpdir), "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-c", SIGTERM_SCRIPT, str(clips["long"]), str(dst)],
                            stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout.readline().startswith("progress 5 500")
        assert any(tmpdir.iterdir())  # the encoder is writing its temp file
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert rc == 128 + signal.SIGTERM
    assert "finished" not in proc.stdout.read()
    assert list(tmpdir.iterdir()) == [] and not dst.exists() and not dst.with_name("o.mp4.part").exists()
    assert _processes_mentioning(str(clips["long"])) == []  # both ffmpeg children are gone


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _png() -> bytes:
    import cv2

    return cv2.imencode(".png", np.zeros((40, 60, 3), np.uint8))[1].tobytes()


def _processes_mentioning(text: str) -> list[int]:
    """Pids of live (not zombie) processes whose command line contains `text` (Linux /proc)."""
    pids = []
    for p in Path("/proc").glob("[0-9]*"):
        try:
            if text in (p / "cmdline").read_bytes().decode(errors="replace") and \
                    ") Z" not in (p / "stat").read_text():
                pids.append(int(p.name))
        except OSError:
            continue
    return pids


def test_it_reads_an_opened_target_whatever_its_path_becomes(clips, tmp_path):
    """ffmpeg, in child processes, reads the target the worker checked and opened
    (`worker.targetfile`), not whatever the path leads to later; temporary files next to a
    254-byte output name have short names of their own."""
    src = tmp_path / "clip.mp4"
    shutil.copyfile(clips["mp4"], src)
    dst = tmp_path / ("v" * 250 + ".mp4")
    with open_target(src, allowed_folders([str(tmp_path)])) as opened:
        src.unlink()
        src.symlink_to("/etc/passwd")  # swapped after the check: changes nothing
        result = process_video(opened.path, dst, lambda f: (f, 0, 0), name=opened.name)
        assert result.frames == int(_stream(clips["mp4"])["nb_read_frames"])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["clip.mp4", dst.name])
    text = _write(tmp_path / "notes.mp4", b"this is not a video\n" * 100)
    with open_target(text, None) as opened:
        with pytest.raises(TargetError, match="^notes.mp4 is not a video this worker can read"):
            process_video(opened.path, tmp_path / "o.mp4", lambda f: (f, 0, 0), name=opened.name)


def test_it_counts_the_most_faces_in_one_frame_not_faces_times_frames(clips, tmp_path):
    seen = iter(range(10**6))

    def one_person_then_two(frame):  # one face on most frames, two on frame 30 only
        n = 2 if next(seen) == 30 else 1
        return frame, n, n

    result = process_video(clips["mp4"], tmp_path / "o.mp4", one_person_then_two)
    assert (result.most_faces_found, result.most_faces_swapped) == (2, 2)
    assert result.faces_found == 51  # the sum stays available (50 frames, one with two)


def test_a_processed_video_reports_people_on_screen(clips, tmp_path):
    from types import SimpleNamespace

    from worker.manifest import EngineOptions
    from worker.process import process_target

    swapper = SimpleNamespace(options=EngineOptions(name="classic"), swap_frame=lambda f: (f, 1, 1))
    outcome = process_target(swapper, clips["mp4"], tmp_path / "o.mp4")
    assert (outcome.status, outcome.faces_found, outcome.faces_swapped, outcome.frames) == ("done", 1, 1, 50)


def test_it_writes_a_poster_of_the_first_swapped_frame_while_it_runs(clips, tmp_path):
    from PIL import Image

    poster = tmp_path / "posters" / "o.mp4.jpg"
    seen_at_first_report = []
    swapped_from = 10

    def swap_late(frame):
        swap_late.n += 1
        if swap_late.n < swapped_from:
            return frame, 0, 0
        frame[:, :] = (0, 0, 255)  # red in BGR: the swapped frame, not the input
        return frame, 1, 1
    swap_late.n = 0

    process_video(clips["mp4"], tmp_path / "o.mp4", swap_late, poster=poster, progress_every=25,
                  on_progress=lambda d, t: seen_at_first_report.append(poster.is_file()))
    assert seen_at_first_report[0] is True  # there before the first progress report
    with Image.open(poster) as im:
        assert im.format == "JPEG" and max(im.size) == 320
        r, g, b = im.convert("RGB").getpixel((10, 10))
        assert r > 200 and g < 60 and b < 60


def test_it_writes_a_poster_at_the_first_report_when_no_face_was_swapped(clips, tmp_path):
    poster = tmp_path / "p.jpg"
    process_video(clips["mp4"], tmp_path / "o.mp4", lambda f: (f, 0, 0), poster=poster)
    assert poster.is_file() and [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")] == []
