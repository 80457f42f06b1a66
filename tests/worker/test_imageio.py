"""Odd and bad image files: each gets a clear message or is read correctly, nothing crashes."""
import numpy as np
import pytest
from PIL import Image

from tests.worker import badfiles
from worker.errors import TargetError
from worker.imageio import load_image, save_image

LIMIT = 50_000_000


@pytest.fixture
def rgb():
    from skimage import data

    return data.astronaut()  # 512x512 RGB, a real photo


def test_it_reads_a_plain_jpeg_as_bgr(tmp_path, rgb):
    img = load_image(badfiles.photo(rgb, tmp_path / "a.png"), LIMIT)
    assert img.bgr.shape == (512, 512, 3) and img.bgr.dtype == np.uint8
    assert np.array_equal(img.bgr[:, :, ::-1], rgb)
    assert img.alpha is None


def test_it_refuses_a_zero_byte_file(tmp_path):
    with pytest.raises(TargetError, match="empty"):
        load_image(badfiles.zero_bytes(tmp_path / "z.jpg"), LIMIT)


def test_it_refuses_text_with_an_image_extension(tmp_path):
    with pytest.raises(TargetError, match="not an image"):
        load_image(badfiles.not_an_image(tmp_path / "fake.jpg"), LIMIT)


def test_it_refuses_a_truncated_jpeg(tmp_path, rgb):
    with pytest.raises(TargetError, match="truncated or corrupt"):
        load_image(badfiles.truncated(rgb, tmp_path / "t.jpg"), LIMIT)


def test_it_refuses_a_decompression_bomb_before_decoding(tmp_path):
    import resource

    bomb = badfiles.png_bomb(tmp_path / "bomb.png")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(TargetError, match="100 megapixels, over the limit of 50"):
        load_image(bomb, LIMIT)
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kb < 50_000  # the 100-megapixel body was never decoded


def test_it_reads_grayscale_as_three_channels(tmp_path, rgb):
    img = load_image(badfiles.grayscale(rgb, tmp_path / "g.png"), LIMIT)
    assert img.bgr.shape == (512, 512, 3)
    assert np.array_equal(img.bgr[:, :, 0], img.bgr[:, :, 2])
    assert "grayscale" in img.note


def test_it_converts_16_bit_to_8_bit(tmp_path, rgb):
    img = load_image(badfiles.sixteen_bit(rgb, tmp_path / "s.png"), LIMIT)
    gray8 = np.asarray(Image.fromarray(rgb).convert("L"))
    assert img.bgr.dtype == np.uint8
    assert np.abs(img.bgr[:, :, 0].astype(int) - gray8).max() <= 1
    assert "16-bit" in img.note


def test_it_keeps_alpha_through_a_save(tmp_path, rgb):
    img = load_image(badfiles.alpha_png(rgb, tmp_path / "a.png"), LIMIT)
    assert img.alpha is not None and img.alpha[0, 0] == 0 and img.alpha[100, 100] == 255
    out = tmp_path / "out.png"
    save_image(out, img.bgr, img.alpha)
    back = np.asarray(Image.open(out))
    assert back.shape == (512, 512, 4) and back[0, 0, 3] == 0


def test_it_converts_cmyk_jpeg_to_rgb(tmp_path, rgb):
    img = load_image(badfiles.cmyk_jpeg(rgb, tmp_path / "c.jpg"), LIMIT)
    assert img.bgr.shape == (512, 512, 3)
    # colours survive the round trip through CMYK within JPEG noise
    assert np.abs(img.bgr[:, :, ::-1].astype(int) - rgb).mean() < 20
    assert "CMYK" in img.note


def test_it_applies_exif_rotation(tmp_path, rgb):
    tall = rgb[:, :300]  # 512 high, 300 wide: rotation is visible in the shape
    img = load_image(badfiles.exif_rotated(tall, tmp_path / "r.jpg"), LIMIT)
    assert img.bgr.shape[:2] == (512, 300)
    assert np.abs(img.bgr[:, :, ::-1].astype(int) - tall).mean() < 12


def test_it_writes_outputs_atomically(tmp_path, rgb):
    out = tmp_path / "sub" / "o.jpg"
    save_image(out, rgb[:, :, ::-1].copy())
    assert out.exists() and list(out.parent.iterdir()) == [out]
    assert Image.open(out).format == "JPEG"
