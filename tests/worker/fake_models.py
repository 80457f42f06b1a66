"""Tiny stand-ins for the three insightface models, so the real insightface code path runs in tests.

The real weights (det_10g 17 MB, w600k_r50 174 MB, inswapper_128 554 MB) cannot be downloaded in CI.
These ONNX graphs (opset 17, about 2 MB together) have the same input/output signatures, so
`insightface.model_zoo.get_model` routes them to SCRFD, ArcFaceONNX and INSwapper, and the engine
runs insightface's own pre/post-processing (letterbox, anchor decoding, NMS, alignment, paste-back):

- det_10g: reports ONE face at fixed fractions of the detector input (`FACE_BBOX`, `FACE_KPS`, placed
  on the face of `skimage.data.astronaut()`); for a square image that is the same place in the image.
  Its score is the contrast (standard deviation) inside that box, so a flat image has no face.
- w600k_r50: a fixed random projection of the 8x8-pooled, mean-centred aligned crop: different faces
  get different embeddings, the same crop the same one.
- inswapper_128: output = clip(0.5 * target + 0.5 * colour(source)), the colour a sigmoid of a fixed
  projection of the source latent, so the swapped region visibly changes with the source. Its `emap`
  is the LAST initializer (insightface reads it from there), here the identity.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from worker.weights import ModelSpec

OPSET = 17
#: IR 8 keeps the files loadable by older onnxruntime(-gpu) builds too (the CUDA 12 line).
IR_VERSION = 8

#: (x1, y1, x2, y2) of the fake face as fractions of the detector input (astronaut(): 512x512).
FACE_BBOX = (176 / 512, 70 / 512, 272 / 512, 182 / 512)
#: left eye, right eye, nose tip, left and right mouth corners (dlib's 68 points on astronaut()).
FACE_KPS = ((203.2, 101.5), (246.5, 104.2), (225.0, 127.0), (201.0, 139.0), (246.0, 141.0))
FACE_KPS = tuple((x / 512, y / 512) for x, y in FACE_KPS)
#: contrast (std of the normalised input) -> score; a photo saturates at SCORE_MAX, a flat image is 0
SCORE_GAIN, SCORE_MAX = 10.0, 0.9


def _const(name: str, value, dtype=np.float32) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value, dtype=dtype), name))


def _save(graph: onnx.GraphProto, path: Path) -> None:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="facefusion-portal-tests")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))


def detector_graph() -> onnx.GraphProto:
    """SCRFD-shaped: input [1,3,H,W]; outputs scores/bboxes/kps for strides 8, 16, 32 (2 anchors each)."""
    x1, y1, x2, y2 = FACE_BBOX
    n = []  # nodes
    n += [
        helper.make_node("Shape", ["input.1"], ["shape"]),
        _const("i2", [2], np.int64), _const("i3", [3], np.int64),
        helper.make_node("Gather", ["shape", "i2"], ["H"]),  # [1] int64
        helper.make_node("Gather", ["shape", "i3"], ["W"]),
        helper.make_node("Cast", ["H"], ["Hf"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["W"], ["Wf"], to=TensorProto.FLOAT),
        # Score: contrast inside the face box (rows y1..y2, columns x1..x2 of the input).
        _const("fy", [y1, y2]), _const("fx", [x1, x2]),
        helper.make_node("Mul", ["Hf", "fy"], ["ry"]), helper.make_node("Mul", ["Wf", "fx"], ["rx"]),
        helper.make_node("Floor", ["ry"], ["ryf"]), helper.make_node("Floor", ["rx"], ["rxf"]),
        helper.make_node("Cast", ["ryf"], ["ryi"], to=TensorProto.INT64),
        helper.make_node("Cast", ["rxf"], ["rxi"], to=TensorProto.INT64),
        _const("i0", [0], np.int64), _const("i1", [1], np.int64),
        helper.make_node("Gather", ["ryi", "i0"], ["sy"]), helper.make_node("Gather", ["ryi", "i1"], ["ey"]),
        helper.make_node("Gather", ["rxi", "i0"], ["sx"]), helper.make_node("Gather", ["rxi", "i1"], ["ex"]),
        helper.make_node("Concat", ["sy", "sx"], ["starts"], axis=0),
        helper.make_node("Concat", ["ey", "ex"], ["ends"], axis=0),
        _const("axes23", [2, 3], np.int64),
        helper.make_node("Slice", ["input.1", "starts", "ends", "axes23"], ["region"]),
        helper.make_node("ReduceMean", ["region"], ["rmean"], keepdims=1),
        helper.make_node("Sub", ["region", "rmean"], ["rdev"]),
        helper.make_node("Mul", ["rdev", "rdev"], ["rsq"]),
        helper.make_node("ReduceMean", ["rsq"], ["rvar"], keepdims=0),
        helper.make_node("Sqrt", ["rvar"], ["rstd"]),
        _const("gain", SCORE_GAIN), _const("zero", 0.0), _const("smax", SCORE_MAX),
        helper.make_node("Mul", ["rstd", "gain"], ["rs"]),
        helper.make_node("Clip", ["rs", "zero", "smax"], ["score"]),  # scalar
        # The face in input pixels: box T = [x1, y1, x2, y2] and keypoints K = [kx0, ky0, ...].
        _const("bx", [[x1, 0, x2, 0]]), _const("by", [[0, y1, 0, y2]]),
        helper.make_node("Mul", ["Wf", "bx"], ["tbx"]), helper.make_node("Mul", ["Hf", "by"], ["tby"]),
        helper.make_node("Add", ["tbx", "tby"], ["T"]),  # [1, 4]
        _const("kx", [[v if i % 2 == 0 else 0.0 for i, v in enumerate(np.ravel(FACE_KPS))]]),
        _const("ky", [[v if i % 2 == 1 else 0.0 for i, v in enumerate(np.ravel(FACE_KPS))]]),
        helper.make_node("Mul", ["Wf", "kx"], ["tkx"]), helper.make_node("Mul", ["Hf", "ky"], ["tky"]),
        helper.make_node("Add", ["tkx", "tky"], ["K"]),  # [1, 10]
        _const("two", [2], np.int64), _const("one_i", 1, np.int64), _const("zero_i", 0, np.int64),
        _const("sign", [[1.0, 1.0, -1.0, -1.0]]),
    ]
    outputs = {"score": [], "bbox": [], "kps": []}
    for s in (8, 16, 32):
        h, w, cnt = f"h{s}", f"w{s}", f"n{s}"
        n += [
            _const(f"s{s}", [s], np.int64),
            helper.make_node("Div", ["H", f"s{s}"], [h]), helper.make_node("Div", ["W", f"s{s}"], [w]),
            helper.make_node("Mul", [h, w], [f"hw{s}"]),
            helper.make_node("Mul", [f"hw{s}", "two"], [cnt]),  # [1]: anchors at this stride
        ]
        if s != 32:
            # Only stride 32 reports the face; the finer levels report nothing (zero scores).
            for key, width in (("score", 1), ("bbox", 4), ("kps", 10)):
                n += [
                    _const(f"wd_{key}{s}", [width], np.int64),
                    helper.make_node("Concat", [cnt, f"wd_{key}{s}"], [f"shp_{key}{s}"], axis=0),
                    helper.make_node("ConstantOfShape", [f"shp_{key}{s}"], [f"{key}_{s}"],
                                     value=numpy_helper.from_array(np.zeros(1, np.float32))),
                ]
                outputs[key].append((f"{key}_{s}", width, cnt))
            continue
        # Anchor centres exactly as SCRFD.forward builds them: row-major cells, 2 anchors per cell.
        n += [
            helper.make_node("Squeeze", [h], [f"{h}_"]), helper.make_node("Squeeze", [w], [f"{w}_"]),
            helper.make_node("Range", ["zero_i", f"{h}_", "one_i"], ["ry32"]),
            helper.make_node("Range", ["zero_i", f"{w}_", "one_i"], ["rx32"]),
            helper.make_node("Cast", ["ry32"], ["ryf32"], to=TensorProto.FLOAT),
            helper.make_node("Cast", ["rx32"], ["rxf32"], to=TensorProto.FLOAT),
            _const("sf32", float(s)),
            helper.make_node("Mul", ["ryf32", "sf32"], ["ay1d"]), helper.make_node("Mul", ["rxf32", "sf32"], ["ax1d"]),
            _const("ax_col", [1], np.int64), _const("ax_row", [0], np.int64),
            helper.make_node("Unsqueeze", ["ay1d", "ax_col"], ["ay_col"]),  # [h, 1]
            helper.make_node("Unsqueeze", ["ax1d", "ax_row"], ["ax_row_"]),  # [1, w]
            helper.make_node("Concat", [h, w], ["hw_shape"], axis=0),
            helper.make_node("Expand", ["ay_col", "hw_shape"], ["AY"]),
            helper.make_node("Expand", ["ax_row_", "hw_shape"], ["AX"]),
            _const("shape_cells", [-1, 1, 1], np.int64),
            helper.make_node("Reshape", ["AX", "shape_cells"], ["ax3"]),
            helper.make_node("Reshape", ["AY", "shape_cells"], ["ay3"]),
            helper.make_node("Concat", ["ax3", "ay3"], ["cell_xy"], axis=2),  # [h*w, 1, 2]
            _const("shape_anchor2", [1, 2, 1], np.int64),
            helper.make_node("Tile", ["cell_xy", "shape_anchor2"], ["anch3"]),  # [h*w, 2, 2]
            _const("shape_n2", [-1, 2], np.int64),
            helper.make_node("Reshape", ["anch3", "shape_n2"], ["A"]),  # [n, 2] = (x, y)
            # bbox distances (x - x1, y - y1, x2 - x, y2 - y) / stride, identical box from every anchor.
            _const("rep2", [1, 2], np.int64), _const("rep5", [1, 5], np.int64),
            helper.make_node("Tile", ["A", "rep2"], ["A4"]),
            helper.make_node("Sub", ["A4", "T"], ["dA4"]),
            helper.make_node("Mul", ["dA4", "sign"], ["dist4"]),
            helper.make_node("Div", ["dist4", "sf32"], ["bbox_32"]),
            helper.make_node("Tile", ["A", "rep5"], ["A10"]),
            helper.make_node("Sub", ["K", "A10"], ["dK"]),
            helper.make_node("Div", ["dK", "sf32"], ["kps_32"]),
            _const("w1", [1], np.int64),
            helper.make_node("Concat", [cnt, "w1"], ["shp_score32"], axis=0),
            helper.make_node("Expand", ["score", "shp_score32"], ["score_32"]),
        ]
        for key, width in (("score", 1), ("bbox", 4), ("kps", 10)):
            outputs[key].append((f"{key}_{s}", width, cnt))
    outs = [
        helper.make_tensor_value_info(name, TensorProto.FLOAT, [cnt, width])
        for key in ("score", "bbox", "kps") for name, width, cnt in outputs[key]
    ]
    inp = helper.make_tensor_value_info("input.1", TensorProto.FLOAT, [1, 3, "height", "width"])
    return helper.make_graph(n, "fake_scrfd", [inp], outs)


def recognizer_graph(seed: int = 0) -> onnx.GraphProto:
    """ArcFace-shaped: [N,3,112,112] -> [N,512]. No node is named Sub*/Mul*: insightface then uses
    the 127.5/127.5 normalisation of w600k_r50 rather than the mxnet-style one."""
    proj = np.random.default_rng(seed).standard_normal((3 * 14 * 14, 512)).astype(np.float32) / 24.0
    nodes = [
        helper.make_node("AveragePool", ["input.1"], ["pooled"], kernel_shape=[8, 8], strides=[8, 8], name="pool"),
        helper.make_node("Flatten", ["pooled"], ["flat"], axis=1, name="flatten"),
        helper.make_node("ReduceMean", ["flat"], ["fmean"], axes=[1], keepdims=1, name="center_mean"),
        helper.make_node("Sub", ["flat", "fmean"], ["centred"], name="center"),
        helper.make_node("MatMul", ["centred", "proj"], ["683"], name="project"),
    ]
    inp = helper.make_tensor_value_info("input.1", TensorProto.FLOAT, ["N", 3, 112, 112])
    out = helper.make_tensor_value_info("683", TensorProto.FLOAT, ["N", 512])
    return helper.make_graph(nodes, "fake_arcface", [inp], [out], initializer=[numpy_helper.from_array(proj, "proj")])


def swapper_graph(seed: int = 1) -> onnx.GraphProto:
    """INSwapper-shaped: target [1,3,128,128] (RGB in 0..1) + source latent [1,512] -> [1,3,128,128]."""
    colour = np.random.default_rng(seed).standard_normal((512, 3)).astype(np.float32) * 2.0
    emap = np.eye(512, dtype=np.float32)
    nodes = [
        # The latent already went through emap outside the graph (as in insightface); using emap here
        # once more (identity) keeps ONNX Runtime from dropping an "unused" initializer with a warning.
        helper.make_node("MatMul", ["source", "emap"], ["latent"]),
        helper.make_node("MatMul", ["latent", "colour"], ["c3"]),
        helper.make_node("Sigmoid", ["c3"], ["c3s"]),
        helper.make_node("Reshape", ["c3s", "c_shape"], ["c"]),  # [1, 3, 1, 1]
        helper.make_node("Mul", ["target", "half"], ["t_half"]),
        helper.make_node("Mul", ["c", "half"], ["c_half"]),
        helper.make_node("Add", ["t_half", "c_half"], ["mix"]),
        helper.make_node("Clip", ["mix", "lo", "hi"], ["output"]),
    ]
    inits = [
        numpy_helper.from_array(colour, "colour"),
        numpy_helper.from_array(np.array([1, 3, 1, 1], np.int64), "c_shape"),
        numpy_helper.from_array(np.array(0.5, np.float32), "half"),
        numpy_helper.from_array(np.array(0.0, np.float32), "lo"),
        numpy_helper.from_array(np.array(1.0, np.float32), "hi"),
        numpy_helper.from_array(emap, "emap"),  # must stay LAST: INSwapper reads graph.initializer[-1]
    ]
    inputs = [
        helper.make_tensor_value_info("target", TensorProto.FLOAT, [1, 3, 128, 128]),
        helper.make_tensor_value_info("source", TensorProto.FLOAT, [1, 512]),
    ]
    out = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, 128, 128])
    return helper.make_graph(nodes, "fake_inswapper", inputs, [out], initializer=inits)


def build_fake_models(folder: str | Path) -> dict[str, ModelSpec]:
    """Write det_10g.onnx, w600k_r50.onnx and inswapper_128.onnx into `folder`; return their registry.

    The files are deterministic, so their hashes are the same on every run; the URLs are unreachable
    on purpose (`.invalid`): nothing may try to download them.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    registry = {}
    for name, graph in (("det_10g", detector_graph()), ("w600k_r50", recognizer_graph()),
                        ("inswapper_128", swapper_graph())):
        path = folder / f"{name}.onnx"
        _save(graph, path)
        registry[name] = spec_of(name, path)
    return registry


def face_box_in(image_shape: tuple[int, ...]) -> tuple[float, float, float, float]:
    """Where the fake detector puts the face in a SQUARE image of this shape (pixels)."""
    h, w = image_shape[:2]
    x1, y1, x2, y2 = FACE_BBOX
    return x1 * w, y1 * h, x2 * w, y2 * h


def spec_of(name: str, path) -> ModelSpec:
    """A registry entry for the file at `path`, pinned to its present bytes (the URL goes nowhere)."""
    data = path.read_bytes()
    return ModelSpec(name=name, file=path.name, url=f"https://models.invalid/{path.name}",
                     sha256=hashlib.sha256(data).hexdigest(), size=len(data))
