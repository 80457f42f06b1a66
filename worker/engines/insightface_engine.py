"""The insightface engine: SCRFD det_10g detector, ArcFace w600k_r50 recogniser, inswapper_128 swapper.

The three models are checked against their pinned SHA-256 BEFORE insightface is touched: insightface
would otherwise try to download missing files with no timeout (a hang on a firewalled node) or fail
with a bare AssertionError. They are then loaded once through insightface's own `model_zoo.get_model`
(which routes each file to its class by the ONNX signature) and reused for every target of the task.

`device` is what ONNX Runtime actually runs, read back from the sessions: a GPU build of onnxruntime
lists CUDAExecutionProvider even when CUDA or cuDNN cannot load, and then silently runs on the CPU,
ten to fifty times slower. That case is logged as a WARNING so it shows in the task log.
"""
from __future__ import annotations

import contextlib
import io
import logging
import warnings

import cv2
import numpy as np

from .. import pose
from ..errors import EngineUnavailable, ModelError, SourceError
from ..weights import (
    DEFAULT_REGISTRY,
    ENHANCER_MODEL,
    INSIGHTFACE_MODELS,
    POSE_MODEL,
    optional_model,
    verify_models,
)
from .base import Face, Identity
from .enhancer import PasteMask, paste_back
from .head_turn import HeadTurnLandmarks
from .scrfd_speed import install as install_fast_detection
from .similarity import umeyama
from .timing import InferenceClock

log = logging.getLogger("worker.engines.insightface")

CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"
#: FaceFusion's default reference_face_distance for ArcFace embeddings (cosine distance)
REFERENCE_DISTANCE = 0.6
DET_SIZE = (640, 640)
#: a detector with a free input size (the real det_10g) gets a frame's letterbox cut down to one of
#: these short sides instead of 640: a 16:9 frame is then detected at 640x384, 40 % fewer pixels to
#: fill and run than 640x640 with 280 rows of padding. Few sizes, because insightface builds one
#: fixed-size session per size (each with its own GPU memory).
DET_SHORT_SIDES = (384, 512, 640)
DET_THRESH = 0.5
#: a source photo cropped tight to the face (e.g. insightface's 112x112 Tom_Hanks_54745.png) is missed
#: by SCRFD, whose anchors expect a face smaller than the frame: the real SCRFD-2.5G found it (score
#: 0.76) only with its edges repeated outwards by half the photo's side (0.67 with a quarter).
SOURCE_PAD = 0.5


def default_providers(available: list[str], gpu: int | None = None) -> list:
    """CUDA (on device `gpu`, else the first) with the CPU as fallback when this onnxruntime build
    offers CUDA, else the CPU alone."""
    if CUDA not in available:
        return [CPU]
    return [(CUDA, {"device_id": gpu}), CPU] if gpu is not None else [CUDA, CPU]


def session_options(onnxruntime):
    """ONNX Runtime's options for the engine's sessions: its CPU threads wait for work without
    spinning. Spinning keeps a core busy after every run for nothing the next frame needs: on the
    1080p bench it was most of the worker's own CPU time per frame (docs/worker.md)."""
    opts = onnxruntime.SessionOptions()
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return opts


def provider_names(providers: list) -> list[str]:
    """The names in a provider list whose entries are names or (name, options) pairs."""
    return [p[0] if isinstance(p, tuple) else p for p in providers]


@contextlib.contextmanager
def _quiet_insightface():
    """insightface prints to stdout while it loads models, which does not help a person reading a
    task log. Only while the engine is built (one thread): a stdout redirect is process-wide. (Its
    alignments, which call a deprecated scikit-image function, are done by the engine itself.)"""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*estimate.* is deprecated", category=FutureWarning)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            yield
        if out.getvalue().strip():
            log.debug("insightface said: %s", out.getvalue().strip())


def swap_mask(size: int) -> np.ndarray:
    """insightface's paste-back mask, drawn in the swapper's crop instead of the whole photo: the crop
    shrunk by a tenth of its side (its erosion), then blurred over a twentieth (its Gaussian). One
    pixel more of border than the blur reaches, so the crop's edge stays exactly 0: no seam."""
    k = max(size // 20, 5)
    edge = k + 1
    mask = np.zeros((size, size), np.float32)
    mask[edge:-edge, edge:-edge] = 1.0
    return cv2.GaussianBlur(mask, (2 * k + 1, 2 * k + 1), 0)


#: ArcFace's five-point template (eyes, nose tip, mouth corners) in a 112x112 crop, as insightface's
#: face_align has it
ARCFACE_TEMPLATE = np.array([[38.2946, 51.6963], [73.5318, 51.5014], [56.0252, 71.7366],
                             [41.5493, 92.3655], [70.7299, 92.2041]], np.float32)


def arcface_template(size: int) -> np.ndarray:
    """Where the five points go in a `size`-pixel crop, as insightface's estimate_norm puts them:
    a multiple of 112 (the recogniser's crop) scales the template; any other size (the swapper's
    128) scales it by size/128 and shifts it right by 8/128 of the size."""
    if size % 112 == 0:
        ratio, shift = size / 112.0, 0.0
    else:
        ratio, shift = size / 128.0, 8.0 * size / 128.0
    dst = ARCFACE_TEMPLATE.astype(np.float64) * ratio
    dst[:, 0] += shift
    return dst


def aligned_crop(image: np.ndarray, kps, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(the `size`-pixel crop with the five points `kps` on `arcface_template(size)`, the image ->
    crop matrix): insightface's norm_crop, with the similarity fitted here (its scikit-image
    `estimate` warns of deprecation, and silencing that needs a process-wide filter)."""
    matrix = umeyama(np.asarray(kps, np.float64), arcface_template(size))
    return cv2.warpAffine(image, matrix, (size, size), borderValue=0.0), matrix


def detection_size(shape) -> tuple[int, int]:
    """(width, height) to detect a frame of `shape` at: its long side 640 (DET_SIZE), its short side
    the least of DET_SHORT_SIDES that holds the frame scaled to that: the same scale as 640x640,
    with less padding."""
    h, w = shape[:2]
    long_side = DET_SIZE[0]
    need = long_side * min(h, w) / max(h, w, 1)
    short = next((s for s in DET_SHORT_SIDES if s >= need), long_side)
    return (long_side, short) if w >= h else (short, long_side)


def _normalised(vec: np.ndarray) -> np.ndarray:
    # float32 throughout: numpy 2 would promote to float64, which the ONNX sessions refuse.
    vec = np.asarray(vec, dtype=np.float32).ravel()
    norm = float(np.linalg.norm(vec))
    return (vec / np.float32(norm)).astype(np.float32) if norm > 0 else vec


class InsightFaceEngine:
    """Engine protocol (see base.py) on insightface's models, loaded once per task."""

    name = "insightface"
    default_reference_distance = REFERENCE_DISTANCE

    def __init__(self, models_dir=None, registry=None, providers: list | None = None, gpu: int | None = None):
        """`gpu`: the CUDA device to run on (a task with several GPUs builds one engine per GPU,
        `worker.gpus`); None: the first. `providers` overrides both."""
        # 1. Fail fast on missing/corrupt files, with the fix in the message (ModelError).
        paths = verify_models(models_dir, INSIGHTFACE_MODELS, registry=registry)
        try:
            import onnxruntime
            from insightface import model_zoo
            from insightface.app.common import Face as NativeFace
        except ImportError as exc:
            raise EngineUnavailable(
                f"the insightface engine needs the insightface and onnxruntime packages on this node ({exc})"
            ) from exc
        self._NativeFace = NativeFace
        available = list(onnxruntime.get_available_providers())
        requested = list(providers) if providers else default_providers(available, gpu)
        names = provider_names(requested)

        # 2. Load each model once. Absolute paths: get_model resolves relative ones against the CWD.
        #    ctx_id 0 leaves the providers as requested (a negative ctx_id would rebuild the sessions
        #    for the CPU); the provider list alone decides where inference runs.
        def load(file):
            """insightface's model object for a verified model file; ModelError when it cannot load."""
            path = str(file.resolve())
            try:
                with _quiet_insightface():
                    return model_zoo.get_model(path, providers=requested, sess_options=session_options(onnxruntime))
            except Exception as exc:  # onnxruntime raises its own types for unloadable graphs
                raise ModelError(f"model file {file.name} at {path} could not be loaded: {exc}") from exc

        loaded = {}
        for key, want in zip(INSIGHTFACE_MODELS, ("SCRFD", "ArcFaceONNX", "INSwapper")):
            model = load(paths[key])
            if type(model).__name__ != want:
                raise ModelError(
                    f"model file {paths[key].name} at {paths[key].resolve()} loaded as {type(model).__name__}, not {want}; "
                    f"check the model registry"
                )
            loaded[key] = model
        self._det, self._rec, self._swapper = loaded["det_10g"], loaded["w600k_r50"], loaded["inswapper_128"]
        self._det.prepare(0, input_size=DET_SIZE, det_thresh=DET_THRESH)
        self._rec.prepare(0)
        self._swap_mask = PasteMask.of(swap_mask(self._swapper.input_size[0]))
        self._last_latent = None
        #: faces the last `swap` left as they are (turned toward profile), for the photo's note
        self.last_left_as_is = 0
        install_fast_detection(self._det)
        # insightface builds a fixed-size detector session on first use: do it now, so model loading
        # is all paid (and timed) here and no session is created while targets are processed.
        with _quiet_insightface():
            self._det.detect(np.zeros((DET_SIZE[1], DET_SIZE[0], 3), np.uint8))

        # 3. Read back what actually runs.
        actual = {key: m.session.get_providers()[0] for key, m in loaded.items()}
        kinds = set(actual.values())
        self.device = actual["inswapper_128"] if len(kinds) == 1 else ", ".join(f"{k}={v}" for k, v in actual.items())
        self.providers_requested = requested
        #: the CUDA device the swapper runs on (videos are then decoded and encoded there too); None: the CPU
        self.gpu = (gpu or 0) if actual["inswapper_128"] == CUDA else None
        #: the models' own run time, for the video stage times (worker.pipeline)
        self.clock = InferenceClock()
        self._rec.session = self.clock.wrap(self._rec.session)
        self._swapper.session = self.clock.wrap(self._swapper.session)
        # insightface 2.x's SCRFD runs a session per input size from a pool tied to `session` (replacing
        # it would rebuild the pool): its sessions are wrapped as they are handed out instead.
        pick = getattr(self._det, "_session_for_input_size", None)
        if callable(pick):
            self._det._session_for_input_size = lambda size: self.clock.wrap(pick(size))
        else:
            self._det.session = self.clock.wrap(self._det.session)
        log.info("insightface: providers requested %s (available %s), running on %s", requested, available, self.device)
        if (CUDA in names or CUDA in available) and CPU in kinds:
            log.warning(
                "insightface: CUDA was %s but ONNX Runtime runs %s on the CPU (much slower). Check the node's "
                "CUDA/cuDNN libraries against the onnxruntime-gpu version, and that no CPU-only onnxruntime "
                "is installed next to it.",
                "requested" if CUDA in names else "available",
                ", ".join(k for k, v in actual.items() if v == CPU),
            )

        # 4. The optional head-turn landmarks (faces in profile are then left as they are, worker.pose).
        self.head_turn = None
        pose_path = optional_model(models_dir, POSE_MODEL, registry=registry)
        if pose_path is not None:
            self.head_turn = HeadTurnLandmarks(load(pose_path), str(pose_path.resolve()))
            self.head_turn.session = self.clock.wrap(self.head_turn.session)
            log.info("insightface: faces turned toward profile are left as they are (%s)", pose_path.name)
        else:
            log.info("insightface: no head-turn model (%s) installed: faces in profile are swapped too",
                     DEFAULT_REGISTRY[POSE_MODEL].file)

        # 5. The optional face enhancer, run on each swapped face when an admin installed it.
        self.enhancer = None
        enhancer_path = optional_model(models_dir, ENHANCER_MODEL, registry=registry)
        if enhancer_path is not None:
            from .enhancer import FaceEnhancer

            self.enhancer = FaceEnhancer(enhancer_path.resolve(), providers=requested)
            self.enhancer.session = self.clock.wrap(self.enhancer.session)
            log.info("insightface: face enhancer %s on %s", enhancer_path.name, self.enhancer.device)
        else:
            log.info("insightface: no face enhancer installed (optional; see docs/worker.md)")

    # ---- Engine protocol ------------------------------------------------------------------------

    def inference_seconds(self) -> float:
        """The models' run time so far in this thread (`worker.engines.timing`)."""
        return self.clock.seconds

    def detect(self, image: np.ndarray) -> list[Face]:
        """All faces, largest first; each keeps insightface's own Face in `native` (bbox, kps, det_score)."""
        size = detection_size(image.shape) if getattr(self._det, "static_input_size", DET_SIZE) is None else None
        # not inside _quiet_insightface: detection prints nothing and warns of nothing, and a stdout
        # redirect is process-wide (each GPU of a task detects in its own thread)
        boxes, kpss = self._det.detect(image, input_size=size, max_num=0)
        faces = []
        for i in range(boxes.shape[0]):
            bbox = boxes[i, :4].astype(np.float32)
            kps = kpss[i].astype(np.float32) if kpss is not None else np.zeros((5, 2), np.float32)
            native = self._NativeFace(bbox=bbox, kps=kps, det_score=float(boxes[i, 4]))
            turn = self.head_turn.points(image, bbox) if self.head_turn is not None else None
            faces.append(Face(bbox=tuple(float(v) for v in bbox), landmarks=kps, score=float(boxes[i, 4]),
                              native=native, pose_landmarks=turn))
        faces.sort(key=lambda f: f.area, reverse=True)
        return faces

    def embed(self, image: np.ndarray, face: Face) -> np.ndarray:
        """ArcFace's embedding of `face`: insightface's ArcFaceONNX.get, with the alignment done here
        (as `_swapped_crop` does) so that no thread touches process-wide state."""
        native = self._native(face)
        crop, _ = aligned_crop(image, native.kps, self._rec.input_size[0])
        emb = _normalised(self._rec.get_feat(crop).flatten())
        # `normed_embedding` is a read-only property of insightface's Face: set `embedding` instead.
        native.embedding = emb
        face.embedding = emb
        return emb

    def identity(self, sources: list[np.ndarray]) -> Identity:
        """The mean of the normalised embeddings of the largest face of each source image."""
        embeddings = []
        for image in sources:
            faces = self.detect(image)
            if not faces:
                image, faces = self._padded_for_detection(image)
            if faces:
                embeddings.append(self.embed(image, faces[0]))
        if not embeddings:
            raise SourceError(f"no face found in the source image{'s' if len(sources) != 1 else ''} "
                              f"({len(sources)} checked); use a clear, front-facing photo of the person")
        mean = _normalised(np.mean(np.stack(embeddings), axis=0))
        return Identity(embedding=mean, sources_used=len(embeddings), native=self._NativeFace(embedding=mean))

    #: `swap(..., inplace=True)` changes the frame itself (`worker.process` does so for video frames)
    swaps_in_place = True

    def too_turned(self, face: Face, was_turned: bool = False) -> bool:
        """Whether `face` is turned so far toward profile that the swap leaves it as it is: the classic
        engine's rule (`worker.pose`) on the head-turn model's 68 points. Without points (no such
        model: never turned), a video's person keeps what was decided for them (`was_turned`)."""
        if face.pose_landmarks is None:
            return was_turned
        return pose.is_profile(face.pose_landmarks, pose.PROFILE_YAW_BACK if was_turned else pose.PROFILE_YAW)

    def swap(self, image: np.ndarray, faces: list[Face], identity: Identity, inplace: bool = False) -> np.ndarray:
        """`inplace`: swap into `image` itself instead of a copy (a video frame, which nothing reads
        afterwards: a 1080p copy is 6 MB, 1.4 ms of CPU per frame). Faces turned toward profile
        (`too_turned`) are left as they are; how many, of the last call, is in `last_left_as_is`.

        Safe to call from another thread than `detect` (a video's writer thread, `worker.pipeline.Later`):
        it touches no process-wide state (no stdout redirect, no warning filters)."""
        latent = self._latent(identity)
        out = image if inplace and image.flags.writeable else image.copy()
        kept = [f for f in faces if not self.too_turned(f)]
        self.last_left_as_is = len(faces) - len(kept)
        faces = kept
        for face in faces:
            # Chained: each face is pasted into the result of the previous one. insightface's own
            # paste-back warps, erodes and blurs masks the size of the WHOLE photo for every face
            # (27 s for the 29 faces of the 3000x2171 Solvay photo); pasting within the crop's
            # footprint with the same kind of mask took 0.9 s there.
            fake, matrix = self._swapped_crop(out, self._native(face).kps, latent)
            out = paste_back(out, fake, matrix, self._swap_mask, inplace=True)  # `out` is our copy
        if self.enhancer is not None:
            for face in faces:
                out = self.enhancer.enhance(out, self._native(face).kps)
        return np.ascontiguousarray(out, dtype=np.uint8)

    def _latent(self, identity: Identity) -> np.ndarray:
        """The swapper's identity input: the source embedding through the model's own matrix
        (`emap`), normalised, as insightface's INSwapper.get computes it for every face; here once
        per identity."""
        last = self._last_latent  # (identity, latent): a task swaps one identity, frame after frame
        if last is not None and last[0] is identity:
            return last[1]
        latent = _normalised(identity.embedding).reshape(1, -1) @ self._swapper.emap
        latent = (latent / np.linalg.norm(latent)).astype(np.float32)
        self._last_latent = (identity, latent)
        return latent

    def _swapped_crop(self, image: np.ndarray, kps: np.ndarray, latent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the swapper's BGR output crop, the image -> crop matrix) for the face at `kps`: what
        insightface's INSwapper.get(paste_back=False) returns, with the alignment computed here
        (the same similarity as its scikit-image estimate, without that call's deprecation warning,
        which needed a process-wide filter) so that it can run in any thread."""
        sw = self._swapper
        crop, matrix = aligned_crop(image, kps, sw.input_size[0])
        blob = cv2.dnn.blobFromImage(crop, 1.0 / sw.input_std, sw.input_size, (sw.input_mean,) * 3, swapRB=True)
        pred = sw.session.run(sw.output_names, {sw.input_names[0]: blob, sw.input_names[1]: latent})[0]
        fake = np.clip(255 * pred.transpose((0, 2, 3, 1))[0], 0, 255).astype(np.uint8)[:, :, ::-1]
        return fake, matrix

    # ---- helpers --------------------------------------------------------------------------------

    def _padded_for_detection(self, image: np.ndarray) -> tuple[np.ndarray, list[Face]]:
        """`image` with its edges repeated outwards (see SOURCE_PAD), and the faces found in it.

        Repeated edges rather than black: a border of another colour is itself an edge, which a
        detector may take for part of a face. Embed the faces on the padded image they came from.
        """
        pad = int(round(max(image.shape[:2]) * SOURCE_PAD))
        padded = cv2.copyMakeBorder(image, pad, pad, pad, pad, cv2.BORDER_REPLICATE)
        return padded, self.detect(padded)

    def _native(self, face: Face):
        """insightface's Face for `face`; rebuilt from the 5 landmarks when it came from elsewhere."""
        if isinstance(face.native, self._NativeFace) and face.native.kps is not None:
            return face.native
        kps = np.asarray(face.landmarks, dtype=np.float32)
        if kps.shape != (5, 2):
            raise ValueError(f"the insightface engine needs 5 landmarks per face, got shape {kps.shape}")
        face.native = self._NativeFace(bbox=np.asarray(face.bbox, np.float32), kps=kps, det_score=face.score)
        return face.native
