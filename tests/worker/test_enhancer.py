"""The optional face enhancer (worker/engines/enhancer.py) inside the insightface engine.

GFPGAN/CodeFormer weights cannot be fetched here, so the tests build ONNX models with the same I/O
(1x3x512x512, RGB in [-1, 1]) that brighten the face: the effect must show on the face and nowhere
else, the file must pass its registered SHA-256, and no file must mean no enhancer and no error.
"""
import hashlib
import json
import logging

import cv2
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.worker import photos
from tests.worker.fake_models import IR_VERSION, OPSET
from worker.engines import enhancer as enh
from worker.engines.insightface_engine import CPU, InsightFaceEngine, swap_mask
from worker.errors import ModelError
from worker.weights import ENHANCER_MODEL

BRIGHTEN = 0.5  # in the model's [-1, 1] scale: +64 grey levels before the blend


def enhancer_model(path, size=512, codeformer=False):
    """output = clip(input + BRIGHTEN (+ 0 * weight), -1, 1), the I/O of GFPGAN 1.4 (or CodeFormer)."""
    nodes = [helper.make_node("Add", ["input", "lift"], ["lifted"])]
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])]
    inits = [numpy_helper.from_array(np.array(BRIGHTEN, np.float32), "lift"),
             numpy_helper.from_array(np.array(-1.0, np.float32), "lo"),
             numpy_helper.from_array(np.array(1.0, np.float32), "hi")]
    if codeformer:  # the fidelity input must be fed (as a double) or onnxruntime refuses to run
        inputs.append(helper.make_tensor_value_info("weight", TensorProto.DOUBLE, [1]))
        inits.append(numpy_helper.from_array(np.array(0.0, np.float32), "zero"))
        nodes = [helper.make_node("Cast", ["weight"], ["w32"], to=TensorProto.FLOAT),
                 helper.make_node("Mul", ["w32", "zero"], ["w0"]),
                 helper.make_node("Add", ["input", "w0"], ["input_w"]),
                 helper.make_node("Add", ["input_w", "lift"], ["lifted"])]
    nodes.append(helper.make_node("Clip", ["lifted", "lo", "hi"], ["output"]))
    out = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, size, size])
    model = helper.make_model(helper.make_graph(nodes, "fake_enhancer", inputs, [out], initializer=inits),
                              opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    data = path.read_bytes()
    return {"file": path.name, "url": "https://models.invalid/enhancer.onnx",
            "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def registry_file(folder, fake_models, enhancer_entry=None):
    """The admin's way in: a registry JSON ($FACEFUSION_MODEL_REGISTRY) with the enhancer's entry."""
    entries = {name: {"file": s.file, "url": s.url, "sha256": s.sha256, "size": s.size} for name, s in fake_models.items()}
    if enhancer_entry:
        entries[ENHANCER_MODEL] = enhancer_entry
    path = folder / "registry.json"
    path.write_text(json.dumps(entries))
    return path


def installed(tmp_path, fake_models, **kwargs):
    """A models folder holding the stand-ins and an enhancer, and the registry JSON naming them all."""
    folder, registry = fake_models
    models = tmp_path / "models"
    models.mkdir()
    for spec in registry.values():
        (models / spec.file).write_bytes((folder / spec.file).read_bytes())
    entry = enhancer_model(models / "face_enhancer.onnx", **kwargs)
    return models, registry_file(tmp_path, registry, entry)


@pytest.fixture(scope="module")
def plain(fake_models):
    folder, registry = fake_models
    return InsightFaceEngine(models_dir=folder, registry=registry, providers=[CPU])


def face_region(image_shape, landmarks):
    """Where the enhancer's 512-pixel crop lands in the image."""
    import cv2

    matrix, _ = cv2.estimateAffinePartial2D(np.float32(landmarks), enh.FFHQ_TEMPLATE * enh.SIZE,
                                            method=cv2.RANSAC, ransacReprojThreshold=100)
    corners = np.array([[0, 0, 1], [512, 0, 1], [512, 512, 1], [0, 512, 1]], np.float64)
    quad = corners @ cv2.invertAffineTransform(matrix).T
    area = np.zeros(image_shape[:2], np.uint8)
    cv2.fillConvexPoly(area, np.round(quad).astype(np.int32), 1)
    return cv2.dilate(area, np.ones((5, 5), np.uint8)).astype(bool)


def test_without_a_registered_enhancer_the_engine_runs_without_one(plain, caplog, fake_models):
    assert plain.enhancer is None
    folder, registry = fake_models
    with caplog.at_level(logging.INFO, logger="worker.engines.insightface"):
        InsightFaceEngine(models_dir=folder, registry=registry, providers=[CPU])
    assert "no face enhancer installed" in caplog.text


def test_a_registered_enhancer_whose_file_is_absent_is_no_error(fake_models, tmp_path, plain):
    folder, registry = fake_models
    entry = enhancer_model(tmp_path / "gfpgan_1.4.onnx")  # built elsewhere: not in the models folder
    engine = InsightFaceEngine(models_dir=folder, registry=registry_file(tmp_path, registry, entry), providers=[CPU])
    assert engine.enhancer is None
    photo = photos.astronaut()
    ident = plain.identity([photos.t1()])
    assert np.array_equal(engine.swap(photo, engine.detect(photo), ident), plain.swap(photo, plain.detect(photo), ident))


@pytest.mark.parametrize("codeformer", [False, True], ids=["gfpgan", "codeformer"])
def test_an_installed_enhancer_brightens_the_swapped_face_and_nothing_else(fake_models, tmp_path, plain, codeformer):
    models, registry = installed(tmp_path, fake_models, codeformer=codeformer)
    engine = InsightFaceEngine(models_dir=models, registry=registry, providers=[CPU])
    assert engine.enhancer is not None and engine.enhancer.device == CPU

    photo = photos.astronaut()
    faces = engine.detect(photo)
    ident = plain.identity([photos.t1()])
    swapped = plain.swap(photo, plain.detect(photo), ident)
    enhanced = engine.swap(photo, faces, ident)
    lift = enhanced.astype(np.int16) - swapped
    x1, y1, x2, y2 = (int(v) for v in faces[0].bbox)
    cx, cy, qw, qh = (x1 + x2) // 2, (y1 + y2) // 2, (x2 - x1) // 4, (y2 - y1) // 4
    centre = lift[cy - qh:cy + qh, cx - qw:cx + qw]
    # +64 levels blended at 0.8 (clipped where already bright): the middle of the face is ~+50.
    assert centre.mean() > 35 and centre.min() >= 0
    outside = ~face_region(photo.shape, faces[0].landmarks)
    assert not lift[outside].any()  # byte-identical beyond the enhancer's crop
    assert outside.mean() > 0.5  # (most of the photo: that check had something to look at)
    # The job records the enhancer among the model files its tasks used (name and SHA-256).
    from worker.modelset import engine_models
    from worker.weights import load_registry

    used = {m["name"]: m["sha256"] for m in engine_models(engine, load_registry(registry))}
    assert used["face_enhancer.onnx"] == hashlib.sha256((models / "face_enhancer.onnx").read_bytes()).hexdigest()
    assert "face_enhancer.onnx" not in {m["name"] for m in engine_models(plain, fake_models[1])}


def test_a_changed_enhancer_file_stops_the_engine(fake_models, tmp_path):
    models, registry = installed(tmp_path, fake_models)
    data = bytearray((models / "face_enhancer.onnx").read_bytes())
    data[-10] ^= 0x01
    (models / "face_enhancer.onnx").write_bytes(bytes(data))
    with pytest.raises(ModelError, match=r"face_enhancer\.onnx is corrupt .*replace it or remove it"):
        InsightFaceEngine(models_dir=models, registry=registry, providers=[CPU])


def test_an_enhancer_of_another_size_is_refused_with_the_expected_shape(tmp_path):
    enhancer_model(tmp_path / "small.onnx", size=256)
    with pytest.raises(ModelError, match=r"has shape \[1, 3, 256, 256\], expected 1x3x512x512"):
        enh.FaceEnhancer(tmp_path / "small.onnx", providers=[CPU])


def test_paste_back_keeps_every_pixel_the_mask_leaves_out():
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (300, 400, 3), np.uint8)
    crop = np.full((64, 64, 3), 255, np.uint8)
    matrix = np.array([[1.0, 0.0, -100.0], [0.0, 1.0, -50.0]])  # the crop is image[50:114, 100:164]
    out = enh.paste_back(image, crop, matrix, enh.soft_box_mask(64), blend=1.0)
    changed = (out != image).any(axis=2)
    assert not changed[:50].any() and not changed[115:].any() and not changed[:, :100].any() and not changed[:, 165:].any()
    assert (out[82, 132] == 255).all()  # the middle takes the crop fully
    assert not changed[50, 100:164].any()  # the mask's edge is 0: no seam


@pytest.mark.parametrize("angle, scale", [(0.0, 1.0), (17.0, 2.3), (-40.0, 0.7)])
def test_paste_back_over_the_masks_footprint_alone_is_the_whole_crops_paste(angle, scale):
    """Only where the mask is above 0 can a pixel change, so only that part of the crop is warped
    (a tenth less area for the swapper's mask): every pixel is what warping all of it gives."""
    rng = np.random.default_rng(5)
    image = rng.integers(0, 256, (400, 500, 3), np.uint8)
    # smooth, so that warping from another origin (a sub-pixel rounding apart) moves values by < 1 level
    crop = cv2.GaussianBlur(rng.integers(0, 256, (128, 128, 3), np.uint8), (0, 0), 4)
    crop = cv2.normalize(crop, None, 0, 255, cv2.NORM_MINMAX)
    mask = swap_mask(128)
    to_image = cv2.getRotationMatrix2D((64, 64), angle, scale)
    to_image[:, 2] += (250 - 64, 200 - 64)
    matrix = cv2.invertAffineTransform(to_image)  # image -> crop
    got = enh.paste_back(image, crop, matrix, mask)
    # the whole frame, the plain way, in floats: the crop premultiplied by its mask, warped, added
    alpha = np.rint(mask * 255).astype(np.float32)[..., None]
    both = cv2.warpAffine(np.dstack([crop * alpha / 255, alpha]), to_image, (500, 400),
                          flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT)
    weight = both[..., 3:]
    want = both[..., :3] + (255 - weight) * image / 255
    # 8-bit rounding: of the premultiplied crop, of the warp (whose bilinear weights OpenCV quantises
    # to 1/32 pixel), of the image's remaining share and of the product: at most half a level each
    error = np.abs(got.astype(np.float32) - want)
    assert error.max() <= 3.0
    assert error[weight[..., 0] > 0].mean() < 0.5  # and no bias: rounding, not a different blend
    untouched = weight[..., 0] == 0
    assert np.array_equal(got[untouched], image[untouched])
    assert (got != image).any(axis=2).sum() > 0.5 * (128 * scale * 0.8) ** 2


@pytest.mark.parametrize("which", ["swap", "enhancer"])
def test_paste_back_is_the_same_bit_for_bit_whatever_the_warp_puts_past_the_crops_edge(monkeypatch, which):
    """Both engines' masks are 0 all round the crop's edge, so the faster constant border of the warp
    gives exactly the pixels the repeated border gives, at any angle, scale and sub-pixel place."""
    rng = np.random.default_rng(11)
    mask = enh.PasteMask.of(swap_mask(128) if which == "swap" else enh.soft_box_mask(128))
    cases = []
    for _ in range(60):
        image = rng.integers(0, 256, (300, 400, 3), np.uint8)
        crop = rng.integers(0, 256, (128, 128, 3), np.uint8)  # noisy: any difference at the edge shows
        to_image = cv2.getRotationMatrix2D((64, 64), rng.uniform(-180, 180), rng.uniform(0.3, 3.0))
        to_image[:, 2] += rng.uniform(-50, 350, 2)
        cases.append((image, crop, cv2.invertAffineTransform(to_image)))
    fast = [enh.paste_back(image, crop, matrix, mask) for image, crop, matrix in cases]
    monkeypatch.setattr(enh, "_border", lambda *args: cv2.BORDER_REPLICATE)
    for (image, crop, matrix), got in zip(cases, fast):
        assert np.array_equal(got, enh.paste_back(image, crop, matrix, mask))


def test_a_mask_that_reaches_the_crops_edge_blends_no_black_in_there():
    """A mask non-zero on the edge: the crop's edge pixels are repeated outwards as before, so a white
    crop pasted half a pixel off the grid is white up to its footprint's last pixel (the pixels half
    over its edge, columns and rows 30 and 70, too)."""
    image = np.zeros((100, 100, 3), np.uint8)
    crop = np.full((40, 40, 3), 255, np.uint8)
    matrix = np.array([[1.0, 0.0, -30.5], [0.0, 1.0, -30.5]])  # the crop lies over image[30.5:70.5]
    out = enh.paste_back(image, crop, matrix, np.ones((40, 40), np.float32))
    assert (out[30:71, 30:71] == 255).all()
    assert not out[:30].any() and not out[71:].any()
