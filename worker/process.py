"""Processing one target (image or video) with an already-loaded engine and identity.

Pure of process-wide state: everything comes in through arguments (a `Swapper`), so the task
runner, the one-shot `swap` command and the benchmarks share exactly this code.
"""
from __future__ import annotations

import errno
import os
import shutil
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import numpy as np

from .engines.base import Engine, Face, Identity
from .errors import TargetError
from .imageio import format_for, load_image, part_path, save_image
from .manifest import EngineOptions, is_video_name, output_name_for_image, output_name_for_video
from .pipeline import Later
from .selection import select_faces
from .selfcheck import SwapCheck, check_swap
from .tracking import SteadyFaces, decide


@dataclass
class Outcome:
    status: str  # done | no_face | failed (see worker.progress)
    faces_found: int = 0
    faces_swapped: int = 0
    message: str = ""
    frames: int | None = None
    code: str = ""  # the sentence, for the portal to say in the reader's language (worker.errors.TargetError)
    params: dict = field(default_factory=dict)
    #: a photo whose swap did not take by the engine's own measure (worker.selfcheck): its code and values
    check: str = ""
    check_params: dict = field(default_factory=dict)
    #: a video's stage times (`worker.pipeline.StageTimes`) and where ffmpeg ran, for logs and benches
    stages: object | None = None
    codecs: str = ""


@dataclass
class Swapper:
    """An engine, the source identity and the options, built once per task."""

    engine: Engine
    identity: Identity
    options: EngineOptions
    reference: np.ndarray | None = None  # embedding of the reference face (selector 'reference')
    #: the provenance label every changed output carries (`worker.provenance`); None: unlabelled
    label: dict | None = None
    #: the template's visible watermark text ("": none)
    watermark: str = ""
    #: videos: track faces across frames and smooth them (`worker.tracking`); off only to measure
    steady_video: bool = True
    #: the faces the last `swap_frame` without a video state chose (a photo's): what `worker.selfcheck`
    #: looks at again. One swapper serves one thread (worker.gpus gives each GPU its own).
    last_chosen: list = field(default_factory=list, repr=False, compare=False)
    #: look at each photo's result again (worker.selfcheck; the template may turn it off: on the CPU
    #: engine it costs about as much as the swap)
    self_check: bool = True

    def video_state(self) -> SteadyFaces | None:
        """A fresh per-video memory of the faces seen so far, or None when videos are not steadied."""
        return SteadyFaces() if self.steady_video else None

    def swap_frame(self, image: np.ndarray, steady: SteadyFaces | None = None) -> tuple[np.ndarray, int, int]:
        """(new image, faces found, faces swapped) for one picture or video frame.

        `steady`: the video's `video_state()`, given frame after frame in order: each person is then
        decided once for the whole clip and swapped at their smoothed landmarks. The frame itself is
        then swapped in place where the engine can (a video's frame is its own; no copy).
        """
        if steady is not None:
            planned = self._plan(image, steady)
            if isinstance(planned, Later):  # finished here and now: the caller wants the frame
                return planned.finish(planned.frame), planned.found, planned.swapped
            return planned
        faces = self.engine.detect(image)
        chosen = select_faces(
            self.engine, image, faces, self.options.face_selector, self.reference, self.options.reference_distance
        )
        self.last_chosen = chosen
        if not chosen:
            return image, len(faces), 0
        out = self.engine.swap(image, chosen, self.identity)
        # faces the engine left as they are (turned toward profile: ClassicEngine.too_turned) are not swapped
        return out, len(faces), len(chosen) - getattr(self.engine, "last_left_as_is", 0)

    def plan_frame(self, image: np.ndarray, steady: SteadyFaces) -> "tuple[np.ndarray, int, int] | Later":
        """A video frame's faces found, tracked and decided here, and their swap left to a `Later`
        (run by the video's writer thread while this thread goes on to the next frame) where the
        engine swaps in place from any thread (`swaps_in_place`; a video frame is the video's own and
        `steady` kept only crops of it: no copy is needed); elsewhere the swapped frame itself."""
        return self._plan(image, steady)

    def _plan(self, image: np.ndarray, steady: SteadyFaces) -> "tuple[np.ndarray, int, int] | Later":
        chosen, found = self._steady_choice(image, self.engine.detect(image), steady)
        if not chosen:
            return image, found, 0
        if not getattr(self.engine, "swaps_in_place", False):
            return self.engine.swap(image, chosen, self.identity), found, len(chosen)
        engine, identity = self.engine, self.identity
        return Later(image, found, len(chosen), lambda frame: engine.swap(frame, chosen, identity, inplace=True))

    def _steady_choice(self, image: np.ndarray, faces: list, steady: SteadyFaces) -> tuple[list[Face], int]:
        """(the steady faces to swap in this frame, the faces found in it)."""
        items = steady.update(faces, image)
        o = self.options
        chosen = decide(items, o.face_selector,
                        lambda new: select_faces(self.engine, image, new, o.face_selector, self.reference,
                                                 o.reference_distance))
        # a person held through a frame the detector missed is still on screen: counted as found
        found = len(faces) + sum(1 for it in items if it.detected is None)
        return self._not_turned(items, chosen, steady), found

    def _not_turned(self, items: list, chosen: list[Face], steady: SteadyFaces) -> list[Face]:
        """`chosen` without the people turned toward profile, by the engine's rule (when it has one)
        decided per person with hysteresis: a head held near the limit stays swapped, or stays as
        it is, instead of flickering between the two from frame to frame. Who was left, and in how
        many frames, is counted in `steady` for the video's note."""
        rule = getattr(self.engine, "too_turned", None)
        if rule is None:
            return chosen
        track_of = {id(it.face): it.track for it in items}
        kept = []
        for face in chosen:
            track = track_of[id(face)]
            track.turned = bool(rule(face, track.turned))
            if track.turned:
                steady.left_as_is.add(track.id)
            else:
                kept.append(face)
        steady.frames_left_as_is += len(kept) < len(chosen)
        return kept


def _frame_fn(swapper: Swapper,
              steady: SteadyFaces | None = None) -> Callable[[np.ndarray], "tuple[np.ndarray, int, int] | Later"]:
    """`swapper.swap_frame`, with the watermark drawn on every result when the job has one, and the
    video's `steady` state passed along when there is one: then `plan_frame`, whose `Later` the
    video's writer thread finishes.
    (Read with getattr: tests hand in stand-in swappers that have only `swap_frame`.)"""
    text = getattr(swapper, "watermark", "")
    swap = swapper.swap_frame if steady is None else _video_step(swapper, steady)
    if not text:
        return swap
    from .provenance import draw_watermark

    def marked(image: np.ndarray) -> "tuple[np.ndarray, int, int] | Later":
        result = swap(image)
        if isinstance(result, Later):
            finish = result.finish
            return replace(result, finish=lambda frame: draw_watermark(finish(frame), text))
        new, found, swapped = result
        return draw_watermark(new, text), found, swapped

    return marked


def _video_step(swapper: Swapper, steady: SteadyFaces) -> Callable[[np.ndarray], "tuple[np.ndarray, int, int] | Later"]:
    step = getattr(swapper, "plan_frame", swapper.swap_frame)

    def one_frame(image: np.ndarray):
        return step(image, steady)

    return one_frame


def build_swapper(engine: Engine, sources: list[str], options: EngineOptions, label: dict | None = None,
                  watermark: str = "", self_check: bool = True) -> Swapper:
    """Load the source images (and the reference face) and build the identity once. `label` and
    `watermark`: what every changed output carries (`worker.provenance`)."""
    images = []
    for s in sources:
        try:
            images.append(load_image(s, options.max_pixels).bgr)
        except TargetError as exc:
            from .errors import SourceError

            raise SourceError(f"source image unusable: {exc}") from None
    identity = engine.identity(images)
    reference = None
    if options.face_selector == "reference":
        from .errors import SourceError

        try:
            ref_img = load_image(options.reference_face, options.max_pixels).bgr
        except TargetError as exc:
            raise SourceError(f"reference face image unusable: {exc}") from None
        ref_faces = engine.detect(ref_img)
        if not ref_faces:
            raise SourceError("no face found in the reference face image; use a clear photo of the person to replace")
        reference = engine.embed(ref_img, ref_faces[0])
    return Swapper(engine=engine, identity=identity, options=options, reference=reference, label=label,
                   watermark=watermark, self_check=self_check)


def process_target(
    swapper: Swapper,
    target: str | os.PathLike,
    output: str | os.PathLike,
    on_frames: Callable[[int, int | None], None] | None = None,
    tmp_root: str | None = None,
    name: str | None = None,
    poster: str | os.PathLike | None = None,
    cancel: threading.Event | None = None,
) -> Outcome:
    """Swap faces in one target and write `output`. Never raises for a bad target: returns `failed`.

    `name` is the target's file name, for messages and to tell a video from an image; it defaults
    to `target`'s own, and is needed when `target` is an opened file's path (`worker.targetfile`).
    An output that cannot be written (a name too long for the file system, a full disk) fails this
    target only. `poster`: where a video writes its poster while it runs (`worker.video.process_video`).
    """
    target, output = Path(target), Path(output)
    name = name or target.name
    try:
        if is_video_name(name):
            return _process_video(swapper, target, output, on_frames, tmp_root, name, poster, cancel)
        return _process_image(swapper, target, output, name)
    except TargetError as exc:
        return Outcome(status="failed", message=str(exc), code=exc.code, params=exc.params)
    except MemoryError:
        return Outcome(status="failed", message="ran out of memory on this target; try a smaller image or a template with more memory",
                       code="out_of_memory")
    except OSError as exc:
        return Outcome(status="failed", message=_file_error(exc, target, name, output))


def _file_error(exc: OSError, target: Path, name: str, output: Path) -> str:
    """Plain words for a file-system error met while processing a target, most likely writing `output`."""
    if exc.filename is not None and os.fspath(exc.filename) == os.fspath(target):
        return f"cannot read {name}: {exc.strerror or exc}"
    if exc.errno == errno.ENAMETOOLONG:
        return (f"the output name is too long for the file system ({len(output.name.encode())} bytes; "
                f"most allow 255): rename the file to something shorter")
    if exc.errno == errno.ENOSPC:
        return "the output could not be written: the cluster's storage is full"
    return f"the output could not be written: {exc.strerror or exc}"


#: the note of a photo with a face turned toward profile, left as it was (jobs.results.target_words: profile_left)
PROFILE_LEFT = "a face in profile was left as is"


def _process_image(swapper: Swapper, target: Path, output: Path, name: str) -> Outcome:
    if output_name_for_image(output.name) != output.name:  # the portal never names one so
        raise TargetError(f"a {output.suffix} output cannot carry the provenance label; name the output "
                          f"{output_name_for_image(output.name)}")
    img = load_image(target, swapper.options.max_pixels, name)
    engine = getattr(swapper, "engine", None)
    if hasattr(engine, "last_left_as_is"):
        engine.last_left_as_is = 0  # this photo's count only, also when no face reaches the engine
    result, found, swapped = _frame_fn(swapper)(img.bgr)
    note = f" ({img.note})" if img.note else ""
    # faces the engine left as they are (turned toward profile: ClassicEngine.too_turned); the target says so
    left = getattr(engine, "last_left_as_is", 0)
    profile = {"code": "profile_left", "params": {"left": left}} if left else {}
    if swapped == 0:
        # FaceFusion's behaviour: no face -> the output is the unchanged input (byte for byte), or
        # its pixels in the output's format where that differs (a BMP target's output is a PNG).
        # Unlabelled either way: nothing was modified.
        if {"MPO": "JPEG"}.get(img.format, img.format) == format_for(output):
            output.parent.mkdir(parents=True, exist_ok=True)
            tmp = part_path(output)
            try:
                shutil.copyfile(target, tmp)
                os.replace(tmp, output)
            finally:
                tmp.unlink(missing_ok=True)
        else:
            save_image(output, img.bgr, img.alpha)
        what = "no face found" if found == 0 else f"{found} face(s) found, none matched the reference face"
        if left:
            return Outcome(status="no_face", faces_found=found, message=f"{PROFILE_LEFT}{note}", **profile)
        return Outcome(status="no_face", faces_found=found, message=f"{what}; output is the unchanged input{note}",
                       code="no_face" if found == 0 else "no_match", params={"found": found})
    save_image(output, result, img.alpha, label=getattr(swapper, "label", None))
    checked = _self_check(swapper, img.bgr, result)
    if left:
        return Outcome(status="done", faces_found=found, faces_swapped=swapped, message=f"{PROFILE_LEFT}{note}",
                       check=checked.code, check_params=checked.params, **profile)
    return Outcome(status="done", faces_found=found, faces_swapped=swapped, message=img.note,
                   check=checked.code, check_params=checked.params)


def _self_check(swapper: Swapper, before: np.ndarray, after: np.ndarray) -> SwapCheck:
    """`worker.selfcheck` over the faces this photo's swap changed: those chosen, but the ones the
    engine left as they are (turned toward profile: its `too_turned` rule, as its `swap` applies it).
    Nothing to check with a stand-in swapper (tests) or an engine without a recogniser."""
    engine = getattr(swapper, "engine", None)
    chosen = getattr(swapper, "last_chosen", None)
    if not chosen or not hasattr(engine, "embed") or not getattr(swapper, "self_check", True):
        return SwapCheck()
    turned = getattr(engine, "too_turned", None)
    swapped = [f for f in chosen if turned is None or not turned(f)]
    return check_swap(engine, swapper.identity, before, after, swapped) if swapped else SwapCheck()


def _process_video(swapper, target: Path, output: Path, on_frames, tmp_root, name: str, poster=None,
                   cancel: threading.Event | None = None) -> Outcome:
    from .video import probe_video, process_video

    if output_name_for_video(output.name) != output.name:
        raise TargetError(f"H.264 video cannot be stored as {output.suffix}; name the output "
                          f"{output_name_for_video(output.name)}")
    # refused (too big, not a video) before the engine's video state is made; process_video checks again
    probe_video(target, name, swapper.options.max_pixels)
    state = swapper.video_state() if hasattr(swapper, "video_state") else None
    engine = getattr(swapper, "engine", None)
    res = process_video(
        target,
        output,
        _frame_fn(swapper, state),
        tmp_root=tmp_root,
        progress_every=swapper.options.video_progress_every,
        on_progress=on_frames,
        name=name,
        poster=poster,
        label=getattr(swapper, "label", None),
        # on a GPU node the video is decoded and encoded on the engine's GPU where ffmpeg can
        gpu=getattr(engine, "gpu", None),
        inference_seconds=getattr(engine, "inference_seconds", None),
        cancel=cancel,
        max_pixels=swapper.options.max_pixels,
    )
    # A video's faces are the most seen in one frame (people on screen at once), not detections x
    # frames: a 4 s clip of one person is "1 person", not "100 faces".
    left = len(state.left_as_is) if state is not None else 0
    # people turned toward profile were left as they are in some frames: the video says so, as a photo does
    profile = {"message": PROFILE_LEFT, "code": "profile_left",
               "params": {"left": left, "frames": state.frames_left_as_is}} if left else {}
    if res.faces_swapped == 0:
        return Outcome(status="no_face", faces_found=res.most_faces_found, frames=res.frames,
                       **(profile or {"message": "no face found in any frame; output is the re-encoded input",
                                      "code": "no_face_video"}),
                       stages=res.stages, codecs=res.codecs)
    return Outcome(status="done", faces_found=res.most_faces_found, faces_swapped=res.most_faces_swapped,
                   frames=res.frames, stages=res.stages, codecs=res.codecs, **profile)


def timed(fn: Callable[[], Outcome]) -> tuple[Outcome, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0
