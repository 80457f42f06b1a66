"""ffmpeg and ffprobe command lines, built by small pure functions (tested by list equality).

Nothing here runs a process: `worker.video` does. Choices made once, here, and why:

- Every path goes to ffmpeg as `file:<path>` with `-protocol_whitelist file`: a target name such as
  `concat:...` or `http:...` is then just a file name, and a playlist renamed to `.mp4` cannot make
  ffmpeg open URLs. `parse_probe` also only accepts ordinary video containers, and every command
  that decodes a file it was given (`input_args`) names the demuxers it may use
  (`-format_whitelist`, VIDEO_DEMUXERS): an HLS or concat playlist renamed `.mp4`, which would
  read another local file through the `file` protocol itself, is refused before it opens anything.
- Pixels are bounded before they are decoded. `parse_probe` keeps the size of EVERY video stream
  (cover art and image codecs such as PNG in Matroska included; `VideoInfo.largest_picture`), and
  the caller refuses a file over its limit (`check_pixels`). ffprobe itself decodes a frame of a
  stream whose pixel format the header leaves open (a 16000x16000 PNG frame: 1 GB), and a frame can
  be bigger than its header says: so ffprobe and every decoder also get `-max_pixels`
  (`max_pixels_args`), and a decoder refuses a bigger picture before allocating it.
- Frames are decoded with passthrough timing (`-fps_mode passthrough`, `-vsync passthrough` before
  ffmpeg 5.1): every decoded frame comes out exactly once, none duplicated or dropped, also for
  variable-frame-rate phone videos. ffmpeg's default autorotate stays on, so frames arrive upright
  and the output carries no rotation flag.
- Frames are encoded at ONE constant rate (see `VideoInfo.fps`), so a variable-frame-rate source
  keeps its frame count and total duration but not its exact per-frame timing.
- H.264 4:2:0 cannot store an odd width or height. Outputs must keep the source size, so an odd
  size is encoded 4:4:4 (High 4:4:4 profile, plays in VLC/mpv/ffmpeg but not in browsers or
  QuickTime); even sizes, nearly every real video, get the widely playable 4:2:0.
- Colours are converted with the BT.709 matrix and tagged so, since untagged HD video is shown as
  BT.709 by players and ffmpeg's default RGB->YUV matrix (BT.601) would shift skin tones.
- Video is encoded first into a video-only temp file, then muxed with the source's audio in a cheap
  stream-copy step. A muxing failure (an audio codec the container refuses) can then be retried
  with AAC without running the face swap again. No `-shortest`: it would cut the last video frames
  of a source whose audio ends early; the audio is the source's own, so its length already fits.
- `.webm` targets become `.mp4` outputs (`worker.manifest.output_name_for_video`): WebM holds only
  VP8/VP9/AV1.
- On a GPU node the decoder may use the GPU (`-hwaccel cuda`; frames still come back as BGR in
  memory, and a stream the GPU cannot decode falls back to the CPU inside ffmpeg) and the encoder
  NVENC (`h264_nvenc`, constant quality 19, close to x264's CRF 18), when `worker.hwcodec` found
  them working on that GPU. Data-centre GPUs such as the H100/H200 have NVDEC but NO NVENC:
  there the encoder stays libx264, with every core of the task.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import PurePosixPath
from typing import Any

from .errors import TargetError

FFMPEG = "ffmpeg"
FFPROBE = "ffprobe"

#: output extension -> ffmpeg muxer name (the output is written to a temp name, so `-f` is explicit)
CONTAINERS = {".mp4": "mp4", ".mov": "mov", ".mkv": "matroska"}
#: audio codecs that play everywhere in MP4/MOV; anything else is re-encoded to AAC there
MP4_AUDIO_CODECS = frozenset({"aac", "mp3", "ac3", "eac3", "alac"})
#: ffprobe `format_name`s accepted as videos (anything else: an image, text, a playlist, ...)
VIDEO_FORMATS = frozenset({
    "mov,mp4,m4a,3gp,3g2,mj2", "matroska,webm", "avi", "mpegts", "mpeg", "flv", "asf",
})
AAC_ARGS = ["-c:a", "aac", "-b:a", "192k"]
#: the demuxers a decoding command may use: those of VIDEO_FORMATS (`-format_whitelist`)
VIDEO_DEMUXERS = ",".join(sorted({name for names in VIDEO_FORMATS for name in names.split(",")}))


def container_for(name: str) -> str:
    """The muxer for an output name; ValueError for an extension this module cannot write."""
    suffix = PurePosixPath(str(name)).suffix.lower()
    if suffix not in CONTAINERS:
        raise ValueError(f"cannot write a video named {name!r}: use .mp4, .mov or .mkv (see output_name_for_video)")
    return CONTAINERS[suffix]


def file_url(path: Any) -> str:
    return f"file:{path}"


def parse_version(text: str) -> tuple[int, int] | None:
    """(major, minor) from `ffmpeg -version` output; None for git builds ("N-...") and unknowns."""
    m = re.search(r"version n?(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def passthrough_args(version: tuple[int, int] | None) -> list[str]:
    # -fps_mode arrived in 5.1; -vsync still works there but is deprecated. Unknown = a recent build.
    if version is not None and version < (5, 1):
        return ["-vsync", "passthrough"]
    return ["-fps_mode", "passthrough"]


def pix_fmt_for(width: int, height: int) -> str:
    return "yuv420p" if width % 2 == 0 and height % 2 == 0 else "yuv444p"


def decoder_pixel_cap(max_pixels: int) -> int:
    """The `-max_pixels` given to ffmpeg's decoders for a limit of `max_pixels`. A decoder counts a
    frame's width rounded up to its memory alignment (64 pixels at most), so the cap is an eighth
    above the limit: no frame of a width over 504 that `check_pixels` admits is refused by ffmpeg,
    and no decoder ever holds much more than the limit."""
    return max_pixels + max_pixels // 8


def max_pixels_args(max_pixels: int | None) -> list[str]:
    """Decoder options (before `-i`) that refuse a picture over `max_pixels` before allocating it."""
    return [] if max_pixels is None else ["-max_pixels", str(decoder_pixel_cap(max_pixels))]


def input_args(path: Any, max_pixels: int | None = None) -> list[str]:
    """`-i` for a file this command decodes: the `file` protocol only, ordinary video demuxers
    only, and (with `max_pixels`) no picture over the limit."""
    return ["-protocol_whitelist", "file", "-format_whitelist", VIDEO_DEMUXERS, *max_pixels_args(max_pixels),
            "-i", file_url(path)]


def probe_command(path: Any, max_pixels: int | None = None) -> list[str]:
    # No -format_whitelist here: the probe decides what a file is ("a still image, not a video")
    # and parse_probe refuses anything but VIDEO_FORMATS; only headers and one frame are read.
    return [FFPROBE, "-v", "error", "-protocol_whitelist", "file", *max_pixels_args(max_pixels),
            "-print_format", "json", "-show_streams", "-show_format", file_url(path)]


def decode_command(path: Any, stream_index: int, version: tuple[int, int] | None = None,
                   gpu: int | None = None, max_pixels: int | None = None) -> list[str]:
    """Raw BGR frames of one video stream on stdout, upright, each decoded frame exactly once.
    `gpu`: decode on that CUDA device (NVDEC), the frames copied back to memory. `max_pixels`:
    a frame bigger than that is refused by the decoder (`max_pixels_args`)."""
    hw = ["-hwaccel", "cuda", "-hwaccel_device", str(gpu)] if gpu is not None else []
    return [FFMPEG, "-nostdin", "-v", "error", *hw, *input_args(path, max_pixels),
            "-map", f"0:{stream_index}", *passthrough_args(version),
            "-f", "rawvideo", "-pix_fmt", "bgr24", "-"]


def frame_command(path: Any, at_seconds: float, out: Any = None, *, codec: str = "png", side: int | None = None,
                  stream_index: int | None = None, max_pixels: int | None = None) -> list[str]:
    """ONE upright frame of `path` at `at_seconds`, encoded by `codec` ("png", "mjpeg") into the file
    `out`, or onto stdout when `out` is None: a video's poster, a frame for the content check.
    `stream_index`: of that stream (None: ffmpeg's choice); `side`: at most that many pixels wide
    (None: full size). It decodes as every command here does (`input_args`): the file protocol and
    video demuxers only, and no picture over `max_pixels`."""
    stream = ["-map", f"0:{stream_index}"] if stream_index is not None else []
    scale = ["-vf", f"scale='min({side},iw)':-2"] if side is not None else []
    muxer, target = ("image2", file_url(out)) if out is not None else ("image2pipe", "-")
    return [FFMPEG, "-nostdin", "-hide_banner", "-loglevel", "error", "-y", "-ss", f"{at_seconds:.3f}",
            *input_args(path, max_pixels), *stream, "-frames:v", "1", *scale, "-f", muxer, "-c:v", codec, target]


def encoder_args(nvenc_gpu: int | None = None, version: tuple[int, int] | None = None) -> list[str]:
    """The H.264 encoder: libx264 (CRF 18), or NVENC on CUDA device `nvenc_gpu` at a like quality."""
    if nvenc_gpu is None:
        return ["-c:v", "libx264", "-preset", "veryfast", "-crf", "18"]
    # p1..p7 arrived with the NVENC SDK 10 presets (ffmpeg 4.3); older builds know "slow" (2-pass hq)
    preset = "slow" if version is not None and version < (4, 3) else "p4"
    return ["-c:v", "h264_nvenc", "-gpu", str(nvenc_gpu), "-preset", preset, "-rc", "vbr", "-cq", "19",
            "-b:v", "0"]


def encode_command(width: int, height: int, fps: Fraction, out_path: Any, *, sar: str | None = None,
                   version: tuple[int, int] | None = None, nvenc_gpu: int | None = None) -> list[str]:
    """H.264 video-only MP4 from raw BGR frames on stdin (audio is added by `mux_command`);
    `nvenc_gpu`: encode with NVENC on that CUDA device (`encoder_args`)."""
    # accurate_rnd: with swscale's default rounding each pass darkens the picture by about one level
    vf = f"scale=out_color_matrix=bt709:out_range=tv:flags=accurate_rnd,format={pix_fmt_for(width, height)}"
    if sar:
        vf += f",setsar={sar.replace(':', '/')}"
    return [FFMPEG, "-nostdin", "-v", "error", "-y",
            "-f", "rawvideo", "-pix_fmt", "bgr24", "-s", f"{width}x{height}", "-r", str(fps), "-i", "-",
            "-map", "0:v:0", *passthrough_args(version), "-vf", vf,
            *encoder_args(nvenc_gpu, version),
            "-colorspace", "bt709", "-color_primaries", "bt709", "-color_trc", "bt709", "-color_range", "tv",
            "-f", "mp4", file_url(out_path)]


def audio_args(container: str, audio_codecs: tuple[str, ...]) -> list[str] | None:
    """How to carry the source's audio into `container`: None (no audio), stream copy, or AAC."""
    if not audio_codecs:
        return None
    if container == "matroska":
        return ["-c:a", "copy"]
    ok = all(c in MP4_AUDIO_CODECS or (container == "mov" and c.startswith("pcm_")) for c in audio_codecs)
    return ["-c:a", "copy"] if ok else list(AAC_ARGS)


def mux_command(video_path: Any, source_path: Any, out_path: Any, container: str,
                audio: list[str] | None, metadata: list[str] | None = None) -> list[str]:
    """The encoded video (copied, untouched) plus every audio stream of the source into `out_path`.
    `metadata`: output options that tag the container (the provenance label, `worker.provenance`)."""
    cmd = [FFMPEG, "-nostdin", "-v", "error", "-y", "-protocol_whitelist", "file", "-i", file_url(video_path)]
    if audio is not None:
        cmd += input_args(source_path)
    cmd += ["-map", "0:v:0"]
    if audio is not None:
        cmd += ["-map", "1:a?", *audio]
    cmd += ["-c:v", "copy"]
    if container in ("mp4", "mov"):
        cmd += ["-movflags", "+faststart"]  # index first, so a browser can start playing at once
    return cmd + list(metadata or []) + ["-f", container, file_url(out_path)]


@dataclass(frozen=True)
class VideoInfo:
    """What the worker needs to know about a video. width/height are the DISPLAY size (after the
    rotation flag is applied), i.e. the size of the frames `frame_fn` receives."""

    width: int
    height: int
    fps: Fraction  # the rate the output is encoded at (see parse_probe)
    frames: int | None  # from the container (MP4/MOV); None where it does not say (MKV/WebM)
    has_audio: bool
    duration: float | None  # seconds
    rotation: int = 0  # 0/90/180/270, as flagged in the source (frames arrive already upright)
    stream_index: int = 0
    audio_codecs: tuple[str, ...] = ()
    sar: str | None = None  # sample aspect ratio "N:M" of the upright frames when not square
    format_name: str = ""

    @property
    def estimated_frames(self) -> int | None:
        """The container's frame count, else duration x rate; None when neither is known."""
        if self.frames:
            return self.frames
        return round(self.duration * self.fps) if self.duration else None


def _rate(text: Any) -> Fraction | None:
    try:
        r = Fraction(str(text))
    except (ValueError, ZeroDivisionError):
        return None
    return r if 0 < r < 1000 else None


def _float(text: Any) -> float | None:
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if v > 0 else None


def _rotation(stream: dict) -> int:
    for side in stream.get("side_data_list") or []:
        if "rotation" in side:
            return int(round(float(side["rotation"]))) % 360
    rotate = (stream.get("tags") or {}).get("rotate")  # ffprobe before 5.0
    return int(round(float(rotate))) % 360 if rotate else 0


#: what ffmpeg writes when `-max_pixels` made a decoder refuse a picture (the stream then has no size)
_REFUSED_PICTURE = re.compile(r"Picture size (\d+)x(\d+) exceeds")


def largest_picture(data: dict, stderr: str = "") -> tuple[int, int]:
    """(width, height) of the biggest picture in a file: of every video stream in `probe_command`'s
    JSON (cover art and image codecs included), and of any picture a decoder refused for
    `-max_pixels`, as its `stderr` says. (0, 0) when there is none."""
    sizes = [(int(s.get("width") or 0), int(s.get("height") or 0))
             for s in data.get("streams") or [] if s.get("codec_type") == "video"]
    sizes += [(int(w), int(h)) for w, h in _REFUSED_PICTURE.findall(stderr)]
    return max(sizes, key=lambda size: size[0] * size[1], default=(0, 0))


def parse_probe(data: dict, name: str) -> VideoInfo:
    """VideoInfo from `probe_command`'s JSON; TargetError in plain words when it is not a video."""
    fmt = data.get("format") or {}
    streams = data.get("streams") or []
    format_name = str(fmt.get("format_name", ""))
    if format_name.endswith("_pipe") or format_name == "image2":
        raise TargetError(f"{name} is a still image, not a video; upload it as an image instead")
    if format_name not in VIDEO_FORMATS:
        raise TargetError(f"{name} is not a video this worker can read; upload an MP4, MOV, MKV or WebM file")
    video = [s for s in streams if s.get("codec_type") == "video"
             and not (s.get("disposition") or {}).get("attached_pic")]
    if not video:
        raise TargetError(f"{name} has no video stream (is it an audio file?)")
    v = video[0]
    width, height = int(v.get("width") or 0), int(v.get("height") or 0)
    if width < 1 or height < 1:
        raise TargetError(f"{name}: the video stream has no picture size; the file may be damaged")
    # Nominal rate for constant-rate video (clean numbers such as 30000/1001); for variable-rate
    # video r_frame_rate is a timestamp grid (e.g. 90000), so the average keeps the duration right.
    r, avg = _rate(v.get("r_frame_rate")), _rate(v.get("avg_frame_rate"))
    if r and avg:
        fps = r if abs(r - avg) <= avg / 200 else avg
    else:
        fps = r or avg
    if fps is None:
        raise TargetError(f"{name}: the video's frame rate cannot be read; the file may be damaged")
    rotation = _rotation(v)
    sar = v.get("sample_aspect_ratio")
    sar = sar if sar and sar not in ("1:1", "0:1", "N/A") else None
    if rotation in (90, 270):
        width, height = height, width
        sar = ":".join(reversed(sar.split(":"))) if sar else None
    nb = v.get("nb_frames")
    frames = int(nb) if nb and str(nb).isdigit() and int(nb) > 0 else None
    audio = tuple(str(s.get("codec_name", "unknown")) for s in streams if s.get("codec_type") == "audio")
    return VideoInfo(width=width, height=height, fps=fps, frames=frames, has_audio=bool(audio),
                     duration=_float(v.get("duration")) or _float(fmt.get("duration")), rotation=rotation,
                     stream_index=int(v.get("index", 0)), audio_codecs=audio, sar=sar, format_name=format_name)
