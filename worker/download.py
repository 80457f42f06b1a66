"""Downloading model weights: `python -m worker models fetch`, where the internet is reachable.

A task never downloads (compute nodes usually have no internet, `worker.weights`): an admin fetches
the models once into the models folder, and every task then verifies them there. A download
resumes where an interrupted one stopped, and a file enters the folder only once its SHA-256 is the
registry's.
"""
from __future__ import annotations

import hashlib
import http.client
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable, Iterable

from .errors import ModelError
from .weights import (
    HASH_BLOCK_BYTES,
    HashCache,
    ModelSpec,
    ModelState,
    check_models,
    file_state,
    hash_file,
    resolve_models,
    specs_named,
)

#: seconds for connecting and for each read: a stalled mirror fails instead of hanging the fetch
FETCH_TIMEOUT_S = 30.0
USER_AGENT = "facefusion-portal-worker (model fetch)"


def fetch_models(
    models_dir,
    names: Iterable[str],
    registry=None,
    progress: Callable[[str], object] = print,
    timeout: float = FETCH_TIMEOUT_S,
) -> list[ModelState]:
    """Download each named model that is missing or corrupt, then return every model's state.

    Downloads go to `<file>.part` and resume with an HTTP Range request after an interruption. The
    file is renamed into place only once its SHA-256 matches; a mismatch deletes the `.part` and
    raises ModelError. A network failure raises ModelError and keeps the `.part` for the next try.
    """
    folder, registry = resolve_models(models_dir, registry)
    specs = specs_named(registry, names)
    folder.mkdir(parents=True, exist_ok=True)
    cache = HashCache(folder)
    try:
        for spec in specs:
            state = file_state(folder, spec, cache)
            if state.ok:
                progress(f"{spec.file}: already present and verified")
                continue
            progress(f"{spec.file}: {state.state} ({state.detail}); downloading from {spec.url}")
            _download(spec, folder, cache, progress, timeout)
    finally:
        cache.save()
    return check_models(folder, [s.name for s in specs], registry)


def _download(spec: ModelSpec, folder: Path, cache: HashCache, progress, timeout: float) -> None:
    dest = folder / spec.file
    part = folder / (spec.file + ".part")
    if not spec.url.startswith(("http://", "https://")):
        raise ModelError(f"cannot fetch {spec.file}: only http(s) URLs are supported, not {spec.url!r}")
    offset = part.stat().st_size if part.exists() else 0
    if spec.size is not None and offset > spec.size:
        part.unlink()
        offset = 0
    # Feed the bytes already on disk to the hash so the finished file is not read twice.
    digest = hash_file(part) if offset else hashlib.sha256()
    if spec.size is None or offset < spec.size:
        try:
            offset, digest = _transfer(spec, part, offset, digest, progress, timeout)
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", None) or exc
            kept = f"; {part} keeps the partial download for the next try" if part.exists() else ""
            raise ModelError(f"could not download {spec.file} from {spec.url}: {reason}{kept}") from exc
    got = digest.hexdigest()
    if got != spec.sha256:
        part.unlink(missing_ok=True)
        raise ModelError(
            f"downloaded {spec.file} from {spec.url} but its SHA-256 {got[:12]}… does not match the "
            f"expected {spec.sha256[:12]}…; the download was deleted"
        )
    os.replace(part, dest)
    cache.record(dest, dest.stat(), got)
    progress(f"{spec.file}: {offset / 1e6:.1f} MB downloaded, SHA-256 verified")


def _transfer(spec: ModelSpec, part: Path, offset: int, digest, progress, timeout: float):
    """Stream the body into `part` from `offset`; returns (total bytes, hash of the whole file)."""
    req = urllib.request.Request(spec.url, headers={"User-Agent": USER_AGENT})
    if offset:
        req.add_header("Range", f"bytes={offset}-")
    try:
        resp = urllib.request.urlopen(req, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and offset:
            # "Range not satisfiable": the .part already holds the whole file; the hash decides.
            return offset, digest
        raise
    with resp:
        if offset and resp.status == 206:
            start = resp.headers.get("Content-Range", "").removeprefix("bytes ").split("-")[0]
            if start != str(offset):
                raise ValueError(f"server resumed at byte {start or '?'} instead of {offset}")
            mode = "ab"
            progress(f"{spec.file}: resuming at {offset / 1e6:.1f} MB")
        else:
            # The server ignored the Range header (200): start again from the first byte.
            mode, offset, digest = "wb", 0, hashlib.sha256()
        length = resp.headers.get("Content-Length")
        total = offset + int(length) if length and length.isdigit() else spec.size
        next_report = time.monotonic() + 5.0
        with open(part, mode) as fh:
            while block := resp.read(HASH_BLOCK_BYTES):
                fh.write(block)
                digest.update(block)
                offset += len(block)
                if spec.size is not None and offset > spec.size:
                    raise ValueError(f"server sent more than the expected {spec.size} bytes")
                if time.monotonic() >= next_report:
                    next_report = time.monotonic() + 5.0
                    of = f" of {total / 1e6:.1f}" if total else ""
                    progress(f"{spec.file}: {offset / 1e6:.1f}{of} MB")
    if total is not None and offset < total:
        # http.client returns b"" when the peer closes early; keep the .part so the next try resumes.
        raise ConnectionError(f"connection closed after {offset} of {total} bytes")
    return offset, digest
