"""Provenance labels read back from real outputs (JPEG, PNG, an ffmpeg-made video), the visible
watermark, and the manifest fields that carry both."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.worker import photos
from worker import ffmpeg as ff
from worker.errors import ManifestError
from worker.imageio import save_image
from worker.manifest import EngineOptions, Manifest, Target, default_output_name
from worker.process import process_target
from worker.progress import read_progress_dir
from worker.provenance import draw_watermark, label_for, metadata_args, read_label, write_label
from worker.video import process_video

ROOT = Path(__file__).resolve().parents[2]
LABEL = label_for("5f0c2a7e-0000-4000-8000-000000000001")


def pixels(path: Path) -> np.ndarray:
    with Image.open(path) as im:
        return np.asarray(im.convert("RGBA"), dtype=int)


def test_the_label_says_who_modified_it_and_for_which_job():
    assert LABEL == {"generator": "FaceFusion Portal", "modified": "face fusion",
                     "job": "5f0c2a7e-0000-4000-8000-000000000001"}


def test_a_jpeg_output_carries_the_label_in_xmp_and_keeps_its_pixels(tmp_path):
    img = photos.astronaut()
    save_image(tmp_path / "plain.jpg", img)
    save_image(tmp_path / "out.jpg", img, label=LABEL)
    assert read_label(tmp_path / "out.jpg") == LABEL
    assert read_label(tmp_path / "plain.jpg") is None
    assert np.array_equal(pixels(tmp_path / "out.jpg"), pixels(tmp_path / "plain.jpg"))  # not re-encoded
    data = (tmp_path / "out.jpg").read_bytes()
    assert b"http://ns.adobe.com/xap/1.0/\x00" in data and b"compositeWithTrainedAlgorithmicMedia" in data
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jpg", "plain.jpg"]  # no temp files left


def test_a_jpeg_keeps_its_exif_and_holds_one_label_when_labelled_twice(tmp_path):
    exif = Image.Exif()
    exif[0x010F] = "PhoneMaker"  # Make
    Image.fromarray(photos.astronaut()[:, :, ::-1]).save(tmp_path / "a.jpg", exif=exif.tobytes(), quality=90)
    assert write_label(tmp_path / "a.jpg", label_for("old")) and write_label(tmp_path / "a.jpg", LABEL)
    assert read_label(tmp_path / "a.jpg") == LABEL
    assert (tmp_path / "a.jpg").read_bytes().count(b"http://ns.adobe.com/xap/1.0/\x00") == 1
    with Image.open(tmp_path / "a.jpg") as im:
        assert im.getexif()[0x010F] == "PhoneMaker"
        assert "FaceFusion Portal" in im.info.get("xmp", b"").decode()  # Pillow finds the packet too


def test_a_png_output_carries_the_label_in_an_itxt_chunk_and_keeps_its_alpha(tmp_path):
    rgb = photos.astronaut()
    alpha = np.full(rgb.shape[:2], 200, np.uint8)
    save_image(tmp_path / "out.png", rgb, alpha, label=LABEL)
    assert read_label(tmp_path / "out.png") == LABEL
    with Image.open(tmp_path / "out.png") as im:
        im.load()  # every chunk's CRC is checked
        assert im.mode == "RGBA" and "FaceFusion Portal" in im.info["XML:com.adobe.xmp"]
    assert (pixels(tmp_path / "out.png")[..., 3] == 200).all()


@pytest.mark.parametrize("name, fmt", [("out.webp", "WEBP"), ("out.tif", "TIFF"), ("out.tiff", "TIFF")])
def test_webp_and_tiff_outputs_carry_the_label_in_xmp(tmp_path, name, fmt):
    rgb = photos.astronaut()
    alpha = np.full(rgb.shape[:2], 200, np.uint8)
    save_image(tmp_path / name, rgb, alpha, label=LABEL)
    assert read_label(tmp_path / name) == LABEL
    with Image.open(tmp_path / name) as im:
        im.load()
        assert (im.format, im.mode) == (fmt, "RGBA")
    assert (pixels(tmp_path / name)[..., 3] == 200).all()
    save_image(tmp_path / f"plain-{name}", rgb)
    assert read_label(tmp_path / f"plain-{name}") is None
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([name, f"plain-{name}"])  # no temp files left


def test_a_bmp_which_has_no_place_for_the_label_is_never_written_labelled(tmp_path):
    with pytest.raises(ValueError, match="BMP output cannot carry the provenance label"):
        save_image(tmp_path / "out.bmp", photos.astronaut(), label=LABEL)
    assert list(tmp_path.iterdir()) == []
    save_image(tmp_path / "plain.bmp", photos.astronaut())  # unlabelled, as an unchanged input may be
    assert read_label(tmp_path / "plain.bmp") is None and write_label(tmp_path / "plain.bmp", LABEL) is False
    assert [default_output_name(n) for n in ("scan.bmp", "shoot/Scan.BMP", "a.webp", "b.tif", "c.jpeg")] == [
        "scan.png", "Scan.png", "a.webp", "b.tif", "c.jpeg"]


class _Swapper:
    """A stand-in swapper: brightens the whole photo when `faces`, else finds none."""

    def __init__(self, faces: int):
        self.faces, self.label, self.options = faces, LABEL, EngineOptions(name="classic")

    def swap_frame(self, image, steady=None):
        return (np.clip(image.astype(int) + 40, 0, 255).astype(np.uint8), 1, 1) if self.faces else (image, 0, 0)


@pytest.mark.parametrize("target", ["a.jpg", "a.jpeg", "a.png", "a.webp", "a.tif", "a.tiff", "a.bmp"])
def test_every_format_the_worker_writes_carries_the_label(tmp_path, target):
    """A photo of each format the worker reads, processed: its output (a BMP's is a PNG) reads back labelled."""
    src = tmp_path / target
    Image.fromarray(photos.astronaut()[:, :, ::-1]).save(src)
    out = tmp_path / "out" / default_output_name(target)
    outcome = process_target(_Swapper(faces=1), src, out)
    assert outcome.status == "done", outcome.message
    assert read_label(out) == LABEL
    with Image.open(out) as im:
        assert im.format == {"a.bmp": "PNG"}.get(target, Image.open(src).format)


def test_a_bmp_without_a_face_becomes_the_same_pixels_as_png_unlabelled(tmp_path):
    src = tmp_path / "scan.bmp"
    Image.fromarray(photos.astronaut()[:, :, ::-1]).save(src)
    out = tmp_path / "out" / "scan.png"
    outcome = process_target(_Swapper(faces=0), src, out)
    assert outcome.status == "no_face" and read_label(out) is None  # nothing was modified
    with Image.open(out) as im:
        assert im.format == "PNG"
    assert np.array_equal(pixels(out), pixels(src))


def test_a_bmp_output_name_fails_that_target_in_plain_words(tmp_path):
    src = tmp_path / "scan.bmp"
    Image.fromarray(photos.astronaut()[:, :, ::-1]).save(src)
    outcome = process_target(_Swapper(faces=1), src, tmp_path / "out" / "scan.bmp")
    assert outcome.status == "failed"
    assert outcome.message == "a .bmp output cannot carry the provenance label; name the output scan.png"
    assert not (tmp_path / "out").exists()


def test_the_video_label_goes_into_the_mux_command_as_container_metadata():
    comment = json.dumps(LABEL, sort_keys=True)
    assert metadata_args(LABEL) == ["-metadata", f"comment={comment}"]
    assert metadata_args(None) == []
    assert ff.mux_command("/t/v.mp4", "/in/a.mp4", "/t/out.mp4", "mp4", None, metadata_args(LABEL)) == [
        "ffmpeg", "-nostdin", "-v", "error", "-y", "-protocol_whitelist", "file", "-i", "file:/t/v.mp4",
        "-map", "0:v:0", "-c:v", "copy", "-movflags", "+faststart",
        "-metadata", f"comment={comment}", "-f", "mp4", "file:/t/out.mp4"]


@pytest.mark.parametrize("name", ["out.mp4", "out.mkv"])
def test_a_real_video_output_carries_the_label_in_its_container(tmp_path, name):
    if not shutil.which("ffmpeg"):
        pytest.fail("ffmpeg is not installed: run `make system`", pytrace=False)
    src = tmp_path / "in.mp4"
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=160x120:rate=10:duration=1",
                    "-f", "lavfi", "-i", "sine=duration=1", "-c:v", "libx264", "-preset", "ultrafast",
                    "-pix_fmt", "yuv420p", "-c:a", "aac", str(src)], check=True)
    assert read_label(src) is None
    process_video(src, tmp_path / name, lambda f: (f, 1, 1), label=LABEL)
    assert read_label(tmp_path / name) == LABEL


def test_the_watermark_changes_pixels_only_in_the_bottom_right_corner():
    img = photos.astronaut()
    before = img.copy()
    marked = draw_watermark(img, "Made with AI")
    assert np.array_equal(img, before)  # the input is not modified
    changed = np.argwhere((marked != img).any(axis=2))
    assert len(changed) > 100  # the text is really there
    h, w = img.shape[:2]
    assert changed[:, 0].min() > h * 0.85 and changed[:, 1].min() > w * 0.6  # bottom rows, right part
    assert draw_watermark(img, "   ") is img  # nothing to draw, nothing drawn


def test_a_watermark_outside_ascii_is_still_drawn_not_dropped():
    img = np.full((300, 400, 3), 90, np.uint8)
    assert (draw_watermark(img, "AI 生成") != img).any()


# -- the manifest carries the watermark and the model pin --------------------------------------

def manifest_dict(**over):
    data = {"version": 1, "job": "j", "sources": ["/s/face.jpg"], "targets": [{"path": "/t/a.jpg"}],
            "chunks": [[0]], "output_dir": "/o", "engine": {"name": "classic"}}
    data.update(over)
    return data


def test_old_manifests_still_load_without_watermark_or_models():
    for version in (1, 2):
        m = Manifest.from_dict(manifest_dict(version=version))
        assert m.watermark == "" and m.models is None
        assert "watermark" not in m.to_dict() and "models" not in m.to_dict()


def test_watermark_and_models_are_written_as_version_2_and_read_back():
    pin = {"set": "2026-11", "folder": "/storage/models/2026-11",
           "files": [{"name": "inswapper_128.onnx", "sha256": "ab" * 32}]}
    m = Manifest.from_dict(manifest_dict(version=2, watermark="Made with AI", models=pin))
    assert m.version == 2 and m.watermark == "Made with AI" and m.models.folder == "/storage/models/2026-11"
    data = json.loads(m.dumps())
    assert data["version"] == 2 and data["models"] == pin and data["watermark"] == "Made with AI"
    assert Manifest.from_dict(data) == m


@pytest.mark.parametrize("over, message", [
    ({"version": 1, "watermark": "x"}, "unknown manifest field\\(s\\) for version 1: watermark"),
    ({"version": 2, "watermark": "two\nlines"}, "one line of text"),
    ({"version": 2, "models": {"folder": "rel", "files": []}}, "absolute folder"),
    ({"version": 2, "models": {"folder": "/m", "files": [{"name": "../x.onnx", "sha256": "ab" * 32}]}},
     "plain file name"),
    ({"version": 2, "models": {"folder": "/m", "files": [{"name": "x.onnx", "sha256": "abc"}]}}, "64 hexadecimal"),
])
def test_bad_watermark_or_models_are_refused_in_plain_words(over, message):
    with pytest.raises(ManifestError, match=message):
        Manifest.from_dict(manifest_dict(**over))


# -- a real task: classic engine, a real photo -------------------------------------------------

def test_a_real_task_labels_and_watermarks_its_outputs_and_records_its_models(tmp_path):
    shutil.copyfile(photos.tom_hanks_path(), tmp_path / "source.png")
    Image.fromarray(photos.astronaut()[:, :, ::-1]).save(tmp_path / "astronaut.jpg", quality=92)
    m = Manifest(job="job-7", sources=("source.png",), targets=(Target("astronaut.jpg", "astronaut.jpg"),),
                 chunks=((0,),), output_dir="out", engine=EngineOptions(name="classic"), watermark="AI edit")
    m.write(tmp_path / "manifest.json")
    run = subprocess.run([sys.executable, "-m", "worker", "run", "--manifest", str(tmp_path / "manifest.json"),
                          "--task-index", "0"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    out = tmp_path / "out" / "outputs" / "astronaut.jpg"
    assert read_label(out) == label_for("job-7")
    [task] = read_progress_dir(tmp_path / "out" / "progress")
    assert task.targets[0].status == "done"
    names = {f["name"] for f in task.models}
    assert names == {"shape_predictor_68_face_landmarks.dat", "dlib_face_recognition_resnet_model_v1.dat"}
    assert all(len(f["sha256"]) == 64 for f in task.models)
    # the watermark: the bottom-right corner differs from the input far more than JPEG noise
    got, src = pixels(out)[..., :3], pixels(tmp_path / "astronaut.jpg")[..., :3]
    corner = np.abs(got[-30:, -200:] - src[-30:, -200:]).max()
    assert corner > 100
