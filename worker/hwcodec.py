"""Whether this node's ffmpeg can decode (NVDEC) and encode (NVENC) video on a given GPU.

An ffmpeg build lists `h264_nvenc` whether or not the machine has a GPU with an encoder, and a
data-centre GPU (H100, H200, A100) has decoders but no NVENC at all; so each is TRIED once per
process and GPU, on a tiny generated clip, and used only if that worked. `FFP_VIDEO_HARDWARE=off`
keeps all video work on the CPU (a site whose driver misbehaves).
"""
from __future__ import annotations

import functools
import logging
import os
import subprocess
from dataclasses import dataclass

from . import ffmpeg as ff

log = logging.getLogger("worker.hwcodec")

HARDWARE_ENV = "FFP_VIDEO_HARDWARE"
PROBE_TIMEOUT_S = 30


@dataclass(frozen=True)
class Codecs:
    """Where one video is decoded and encoded: a CUDA device index, or None for the CPU."""

    decode_gpu: int | None = None
    encode_gpu: int | None = None

    def describe(self) -> str:
        dec = "GPU" if self.decode_gpu is not None else "CPU"
        enc = "NVENC" if self.encode_gpu is not None else "libx264"
        return f"decode on the {dec}, encode with {enc}"


CPU_ONLY = Codecs()


def nvenc_probe_command(gpu: int) -> list[str]:
    # NVENC's smallest frame is 145x49 on some GPUs; 256x256 is accepted everywhere.
    return [ff.FFMPEG, "-nostdin", "-v", "error", "-f", "lavfi", "-i", "color=c=gray:s=256x256:r=25",
            "-frames:v", "3", *ff.encoder_args(gpu), "-f", "null", "-"]


def nvdec_probe_command(gpu: int) -> list[str]:
    # A CUDA device that ffmpeg can open is what `-hwaccel cuda` needs; a codec the GPU cannot decode
    # falls back to the CPU inside ffmpeg.
    return [ff.FFMPEG, "-nostdin", "-v", "error", "-init_hw_device", f"cuda=probe:{gpu}", "-f", "lavfi",
            "-i", "nullsrc=s=64x64", "-frames:v", "1", "-f", "null", "-"]


#: GPUs whose NVENC failed in the middle of a video (out of encoder sessions, say): the rest of
#: this process encodes their videos on the CPU
_nvenc_failed: set[int] = set()


@functools.lru_cache(maxsize=None)
def _works(cmd: tuple[str, ...]) -> bool:
    try:
        proc = subprocess.run(list(cmd), stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        log.info("video hardware probe did not run (%s): %s", " ".join(cmd), exc)
        return False
    if proc.returncode != 0:
        log.info("video hardware not usable: %s (%s)", " ".join(cmd),
                 proc.stderr.decode("utf-8", "replace").strip()[-300:])
    return proc.returncode == 0


def forget() -> None:
    """Forget what the probes found and which encoders failed (tests)."""
    _works.cache_clear()
    _nvenc_failed.clear()


def codecs_for(gpu: int | None, env=os.environ) -> Codecs:
    """The codecs for a video whose faces run on CUDA device `gpu` (None: on the CPU, and then so does the video)."""
    if gpu is None or env.get(HARDWARE_ENV, "auto").strip().lower() == "off":
        return CPU_ONLY
    decode = gpu if _works(tuple(nvdec_probe_command(gpu))) else None
    encode = gpu if gpu not in _nvenc_failed and _works(tuple(nvenc_probe_command(gpu))) else None
    return Codecs(decode_gpu=decode, encode_gpu=encode)


def nvenc_failed(gpu: int) -> None:
    """NVENC on `gpu` failed in the middle of a video: its videos are encoded on the CPU from now on."""
    _nvenc_failed.add(gpu)
