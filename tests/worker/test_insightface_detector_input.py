"""What the insightface engine's detector is given (worker/engines/scrfd_speed.py and
`detection_size`): its input blob, OpenCV's bit for bit and one per thread; frames scaled down
exactly as bilinear scaling does where that is cheap; insightface's letterbox; the detection size
that fits a frame's shape. Pure functions on arrays, no model. The engine itself:
test_insightface_engine.py."""
import threading

import cv2
import numpy as np
import pytest

from worker.engines.scrfd_speed import DetectorBlob, exact_downscale, letterbox_size


@pytest.mark.parametrize("size", [(640, 640), (640, 384), (320, 320)])
def test_the_detector_blob_is_opencvs_bit_for_bit_frame_after_frame(size):
    make = DetectorBlob(127.5, 128.0)
    rng = np.random.default_rng(3)
    for _ in range(3):  # the buffer is reused: each frame's blob is that frame's alone
        image = rng.integers(0, 256, (size[1], size[0], 3), np.uint8)
        want = cv2.dnn.blobFromImage(image, 1 / 128.0, size, (127.5, 127.5, 127.5), swapRB=True)
        got = make(image, size)
        assert got.shape == (1, 3, size[1], size[0]) and got.dtype == np.float32
        assert np.array_equal(got, want)


def test_the_detector_blob_falls_back_to_opencv_for_what_it_does_not_do():
    image = np.random.default_rng(4).integers(0, 256, (100, 200, 3), np.uint8)
    want = cv2.dnn.blobFromImage(image, 1 / 128.0, (64, 32), (127.5,) * 3, swapRB=True)
    assert np.array_equal(DetectorBlob(127.5, 128.0)(image, (64, 32)), want)  # a resize on the way
    half = DetectorBlob(127.5, 128.0, np.float16)(image, (200, 100))
    assert half.dtype == np.float16


@pytest.mark.parametrize("frame, size", [((1080, 1920), (640, 360)), ((1500, 2500), (500, 300)),
                                         ((1080, 1080), (360, 216))])
def test_a_frame_an_odd_multiple_of_the_letterbox_is_scaled_down_as_bilinear_scaling_does(frame, size):
    """1080p into SCRFD's 640x360 (3x), 5x, and 3x across by 5x down: the pixels cv2.resize gives."""
    rng = np.random.default_rng(8)
    for channels in (3, 1):
        image = rng.integers(0, 256, frame + ((channels,) if channels == 3 else ()), np.uint8)
        got = exact_downscale(image, size)
        assert got is not None and np.array_equal(got, cv2.resize(image, size))


@pytest.mark.parametrize("frame, size", [((720, 1280), (640, 360)), ((2160, 3840), (640, 360)),
                                         ((1080, 1920), (640, 384)), ((360, 640), (640, 360))])
def test_any_other_frame_is_left_to_the_detectors_own_scaling(frame, size):
    """An even multiple (2x, 6x: bilinear mixes pixels there), not a whole multiple, or no scaling."""
    assert exact_downscale(np.zeros(frame + (3,), np.uint8), size) is None


@pytest.mark.parametrize("shape, box, want", [((1080, 1920), (640, 384), (640, 360)),
                                              ((1920, 1080), (384, 640), (360, 640)),
                                              ((2171, 3000), (640, 640), (640, 463))])
def test_the_letterbox_is_insightfaces(shape, box, want):
    """1080p and its portrait form in their 640x384 and 384x640 boxes; the Solvay photo in 640x640."""
    assert letterbox_size(shape, box) == want


def test_each_thread_fills_its_own_detector_blob():
    """One engine per GPU, each in its own thread: one thread's next frame never overwrites the
    blob another is about to run."""
    make = DetectorBlob(0.0, 1.0)
    blobs = {}

    def fill(value):
        blobs[value] = make(np.full((32, 32, 3), value, np.uint8), (32, 32))

    threads = [threading.Thread(target=fill, args=(v,)) for v in (10, 200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert blobs[10] is not blobs[200]
    assert (blobs[10] == 10).all() and (blobs[200] == 200).all()


@pytest.mark.parametrize("shape, size", [
    ((1080, 1920), (640, 384)),  # 16:9: 360 rows of picture, not 640 with 280 of padding
    ((1920, 1080), (384, 640)),
    ((480, 640), (640, 512)),
    ((1000, 1000), (640, 640)),
    ((100, 2000), (640, 384)),  # a strip: never below the smallest size kept
])
def test_a_frame_is_detected_at_the_size_that_fits_its_shape(shape, size):
    from worker.engines.insightface_engine import detection_size

    assert detection_size(shape) == size
