"""worker.ffmpeg's command builders and parsers, and worker.video's stderr summary: list equality
and canned ffprobe answers, no processes. worker.video on real clips: test_video.py."""
from __future__ import annotations

from fractions import Fraction

import pytest

from worker import ffmpeg as ff
from worker.errors import TargetError
from worker.ffmpeg import VideoInfo
from worker.manifest import output_name_for_video
from worker.video import stderr_tail

# -- pure builders -----------------------------------------------------------------------------

def test_it_builds_the_probe_command():
    assert ff.probe_command("/in/a.mp4") == [
        "ffprobe", "-v", "error", "-protocol_whitelist", "file",
        "-print_format", "json", "-show_streams", "-show_format", "file:/in/a.mp4"]


def test_it_builds_the_decode_command_for_old_and_new_ffmpeg():
    assert ff.decode_command("/in/a.mp4", 1, (5, 1)) == [
        "ffmpeg", "-nostdin", "-v", "error", "-protocol_whitelist", "file",
        "-format_whitelist", "3g2,3gp,asf,avi,flv,m4a,matroska,mj2,mov,mp4,mpeg,mpegts,webm", "-i", "file:/in/a.mp4",
        "-map", "0:1", "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "bgr24", "-"]
    assert ff.decode_command("/in/a.mp4", 0, (4, 4))[11:14] == ["0:0", "-vsync", "passthrough"]
    assert ff.passthrough_args(None) == ["-fps_mode", "passthrough"]  # git builds are recent


def test_it_builds_one_hardened_command_for_a_single_frame():
    """A video's poster (the portal's uploads and outputs) and a frame for the content check: the
    file protocol and video demuxers only, no picture over the pixel limit, no stdin."""
    assert ff.frame_command("/o/v.mp4", 1.25, max_pixels=1_000_000) == [
        "ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-y", "-ss", "1.250",
        "-protocol_whitelist", "file", "-format_whitelist", ff.VIDEO_DEMUXERS, "-max_pixels", "1125000",
        "-i", "file:/o/v.mp4", "-frames:v", "1", "-f", "image2pipe", "-c:v", "png", "-"]
    assert ff.frame_command("/m/a.mkv", 1.0, "/m/a.jpg.part", codec="mjpeg", side=320, stream_index=0) == [
        "ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-y", "-ss", "1.000",
        "-protocol_whitelist", "file", "-format_whitelist", ff.VIDEO_DEMUXERS,
        "-i", "file:/m/a.mkv", "-map", "0:0", "-frames:v", "1", "-vf", "scale='min(320,iw)':-2",
        "-f", "image2", "-c:v", "mjpeg", "file:/m/a.jpg.part"]


def test_it_builds_the_encode_command():
    assert ff.encode_command(320, 240, Fraction(30000, 1001), "/t/video.mp4") == [
        "ffmpeg", "-nostdin", "-v", "error", "-y",
        "-f", "rawvideo", "-pix_fmt", "bgr24", "-s", "320x240", "-r", "30000/1001", "-i", "-",
        "-map", "0:v:0", "-fps_mode", "passthrough",
        "-vf", "scale=out_color_matrix=bt709:out_range=tv:flags=accurate_rnd,format=yuv420p",
        "-c:v", "libx264", "-preset", "veryfast", "-crf", "18",
        "-colorspace", "bt709", "-color_primaries", "bt709", "-color_trc", "bt709", "-color_range", "tv",
        "-f", "mp4", "file:/t/video.mp4"]


def test_it_encodes_odd_sizes_444_and_keeps_the_aspect_ratio():
    cmd = ff.encode_command(321, 241, Fraction(25), "/t/v.mp4", sar="32:27")
    assert cmd[cmd.index("-vf") + 1] == (
        "scale=out_color_matrix=bt709:out_range=tv:flags=accurate_rnd,format=yuv444p,setsar=32/27")
    assert [ff.pix_fmt_for(w, h) for w, h in [(320, 240), (321, 240), (320, 241)]] == ["yuv420p", "yuv444p", "yuv444p"]


def test_it_builds_the_mux_command():
    assert ff.mux_command("/t/v.mp4", "/in/a.mov", "/t/out.mp4", "mp4", ["-c:a", "copy"]) == [
        "ffmpeg", "-nostdin", "-v", "error", "-y", "-protocol_whitelist", "file", "-i", "file:/t/v.mp4",
        "-protocol_whitelist", "file", "-format_whitelist", ff.VIDEO_DEMUXERS, "-i", "file:/in/a.mov",
        "-map", "0:v:0", "-map", "1:a?", "-c:a", "copy",
        "-c:v", "copy", "-movflags", "+faststart", "-f", "mp4", "file:/t/out.mp4"]
    assert ff.mux_command("/t/v.mp4", "/in/a.mkv", "/t/out.mkv", "matroska", None) == [
        "ffmpeg", "-nostdin", "-v", "error", "-y", "-protocol_whitelist", "file", "-i", "file:/t/v.mp4",
        "-map", "0:v:0", "-c:v", "copy", "-f", "matroska", "file:/t/out.mkv"]


def test_it_copies_audio_only_where_the_container_takes_it():
    aac = ["-c:a", "aac", "-b:a", "192k"]
    assert ff.audio_args("mp4", ()) is None
    assert ff.audio_args("mp4", ("aac",)) == ["-c:a", "copy"]
    assert ff.audio_args("mp4", ("opus",)) == aac
    assert ff.audio_args("mp4", ("aac", "vorbis")) == aac
    assert ff.audio_args("mp4", ("pcm_s16le",)) == aac
    assert ff.audio_args("mov", ("pcm_s16le",)) == ["-c:a", "copy"]
    assert ff.audio_args("matroska", ("opus",)) == ["-c:a", "copy"]


def test_it_names_webm_outputs_mp4():
    assert output_name_for_video("clip.webm") == "clip.mp4"
    assert output_name_for_video("sub/Clip.WEBM") == "sub/Clip.mp4"
    assert [output_name_for_video(n) for n in ("a.mp4", "b.mov", "c.mkv")] == ["a.mp4", "b.mov", "c.mkv"]
    assert [ff.container_for(n) for n in ("a.mp4", "b.MOV", "c.mkv")] == ["mp4", "mov", "matroska"]
    with pytest.raises(ValueError, match="output_name_for_video"):
        ff.container_for("a.webm")


def test_it_parses_ffmpeg_versions():
    assert ff.parse_version("ffmpeg version 5.1.9-0+deb12u1 Copyright") == (5, 1)
    assert ff.parse_version("ffmpeg version n6.0 Copyright") == (6, 0)
    assert ff.parse_version("ffmpeg version N-113245-g1234abcd Copyright") is None


def _probe_json(**video):
    stream = {"index": 0, "codec_type": "video", "width": 1920, "height": 1080,
              "r_frame_rate": "30000/1001", "avg_frame_rate": "30000/1001", "nb_frames": "300", **video}
    return {"format": {"format_name": "mov,mp4,m4a,3gp,3g2,mj2", "duration": "10.01"},
            "streams": [stream, {"index": 1, "codec_type": "audio", "codec_name": "aac"}]}


def test_it_parses_a_probe():
    info = ff.parse_probe(_probe_json(), "a.mp4")
    assert info == VideoInfo(width=1920, height=1080, fps=Fraction(30000, 1001), frames=300, has_audio=True,
                             duration=10.01, rotation=0, stream_index=0, audio_codecs=("aac",), sar=None,
                             format_name="mov,mp4,m4a,3gp,3g2,mj2")


def test_it_gives_the_upright_size_of_rotated_videos():
    side = [{"side_data_type": "Display Matrix", "rotation": -90}]
    info = ff.parse_probe(_probe_json(side_data_list=side, sample_aspect_ratio="4:3"), "a.mp4")
    assert (info.width, info.height, info.rotation, info.sar) == (1080, 1920, 270, "3:4")
    old = ff.parse_probe(_probe_json(tags={"rotate": "180"}), "a.mp4")  # ffprobe before 5.0
    assert (old.width, old.height, old.rotation) == (1920, 1080, 180)


def test_it_encodes_variable_frame_rate_at_the_average_rate():
    info = ff.parse_probe(_probe_json(r_frame_rate="90000/1", avg_frame_rate="24000/1001", nb_frames=None), "a.mp4")
    assert info.fps == Fraction(24000, 1001)
    assert info.frames is None and info.estimated_frames == 240  # 10.01 s x 23.976


def test_it_skips_cover_art_and_rejects_what_is_not_a_video():
    data = _probe_json(index=1)
    data["streams"].insert(0, {"index": 0, "codec_type": "video", "width": 600, "height": 600,
                               "r_frame_rate": "90000/1", "disposition": {"attached_pic": 1}})
    assert ff.parse_probe(data, "a.mp4").stream_index == 1
    audio_only = {"format": {"format_name": "mov,mp4,m4a,3gp,3g2,mj2"}, "streams": [{"codec_type": "audio"}]}
    with pytest.raises(TargetError, match="a.mp4 has no video stream"):
        ff.parse_probe(audio_only, "a.mp4")
    with pytest.raises(TargetError, match="still image"):
        ff.parse_probe({"format": {"format_name": "png_pipe"}, "streams": [{"codec_type": "video"}]}, "a.mp4")
    with pytest.raises(TargetError, match="not a video"):
        ff.parse_probe({"format": {"format_name": "hls"}, "streams": [{"codec_type": "video"}]}, "a.mp4")


def test_it_shortens_ffmpeg_stderr():
    err = "[h264 @ 0x55d1c0] bad\n\n[mov,mp4 @ 0x7f00ab] partial file\nError while decoding\n"
    assert stderr_tail(err) == "[h264] bad | [mov,mp4] partial file | Error while decoding"
    assert stderr_tail(err, max_lines=1) == "Error while decoding"
