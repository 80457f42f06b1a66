"""A job's results as files the portal may serve, and all of them as one streamed zip.

Paths stored on targets (`output_file`, `thumbnail_file`, uploads) are trusted only after they
resolve, symlinks followed, to a file under MEDIA_ROOT: a row that points elsewhere serves nothing.
Used by the pages and the JSON API alike.
"""
from __future__ import annotations

import mimetypes
import os
import posixpath
import re
import time
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.utils.http import content_disposition_header
from django.utils.text import slugify

from cluster import PathNotAllowed, check_in_roots, map_path
from jobs import audit
from jobs.clusters import team_roots
from jobs.models import Job, Target
from jobs.uploads.content import MAX_NAME_BYTES, safe_name
from worker.manifest import IMAGE_EXTENSIONS, VIDEO_EXTENSIONS

#: bytes read from an output per zip write: large enough to be fast, small enough to stream
ZIP_CHUNK_BYTES = 1024 * 1024
#: zip dates start in 1980 (a day in, so no time zone turns it into 1979)
_ZIP_EPOCH = 315619200


def media_file(path: str | os.PathLike | None) -> Path | None:
    """The existing file at `path` (absolute, or relative to MEDIA_ROOT) if it lies under MEDIA_ROOT."""
    if not path:
        return None
    root = Path(settings.MEDIA_ROOT).resolve()
    try:
        real = (root / path).resolve()  # an absolute `path` replaces root here
    except (OSError, RuntimeError, ValueError):
        return None
    if not real.is_relative_to(root) or not real.is_file():
        return None
    return real


def output_path(target: Target) -> Path | None:
    """The fetched output of a target, or None while there is none (or it is not ours to serve)."""
    return media_file(target.output_file)


def thumbnail_path(target: Target) -> Path | None:
    return media_file(target.thumbnail_file)


def input_path(target: Target) -> Path | None:
    """The "before" picture: the uploaded target, or a folder target the portal sees on shared storage.

    A folder target is visible here only through the cluster profile's path mapping, and only when
    its cluster path is inside the folders the job may use (the profile's and its team's, never
    another team's: jobs.clusters.team_roots) and the local file stays inside the mapped folder, and
    inside those folders, after symlinks are followed.
    """
    if target.upload:
        return media_file(target.upload.name)
    job = target.job
    profile = job.cluster
    if not target.cluster_path or not profile.path_mapping:
        return None
    roots = team_roots.for_job(job)
    try:
        cluster_path = check_in_roots(target.cluster_path, list(roots.allowed), roots.refused)
        local = map_path(cluster_path, [(cluster, portal) for portal, cluster in profile.path_mapping])
        real = Path(local).resolve()
        # Where the file really is, named as the cluster names it, checked again: a symlink on the
        # shared storage that leads out of it, or into another team's folder, serves nothing.
        back = [(str(Path(portal).resolve()), cluster) for portal, cluster in profile.path_mapping]
        check_in_roots(map_path(str(real), back), list(roots.allowed), roots.refused)
    except (PathNotAllowed, OSError, RuntimeError):
        return None
    return real if real.is_file() else None


#: what a result's download name adds to the original's: "beach.jpg" -> "beach-swapped.jpg"
SWAPPED_SUFFIX = "-swapped"


def download_name(target: Target) -> str:
    """The name a result downloads under, saying what it is: the original's name with `-swapped`
    before the output's extension ("shoot/beach.jpg" -> "beach-swapped.jpg"; a .webm target's
    .mp4 output -> "clip-swapped.mp4"). Passes `safe_name`; a long stem is cut, never the suffix."""
    original = PurePosixPath(safe_name(target.name or target.output_name))
    ext = PurePosixPath(safe_name(target.output_name)).suffix or original.suffix
    tail = f"{SWAPPED_SUFFIX}{ext}"
    room = MAX_NAME_BYTES - len(tail.encode())
    stem = original.stem.encode()[:room].decode(errors="ignore").rstrip() or original.stem[:1] or "file"
    return safe_name(stem + tail)


def fetched_outputs(job: Job) -> list[tuple[str, Path]]:
    """(name in the zip, local file) of every output fetched so far, in target order.

    Names are `download_name`s: no folders, no control characters and no bidi overrides (U+202E
    would make "gpj.exe" read "exe.jpg" in an unzip tool). Names that came out equal (two folders
    each with a beach.jpg) are told apart: "beach-swapped.jpg", "beach-swapped-2.jpg".
    """
    out = []
    used: set[str] = set()
    targets = job.targets.exclude(output_file="").order_by("index").only("index", "name", "output_name", "output_file")
    for target in targets.iterator(chunk_size=2000):
        path = output_path(target)
        if path is not None:
            out.append((_unique_in_zip(download_name(target), used), path))
    return out


def _unique_in_zip(name: str, used: set[str]) -> str:
    """`name`, or `name-2` ... unlike every name in `used` (casefolded: "A.jpg" and "a.jpg" are one
    file once unzipped on Windows or macOS). Adds the answer to `used`."""
    stem, ext = posixpath.splitext(name)
    candidate, n = name, 1
    while candidate.casefold() in used:
        n += 1
        candidate = f"{stem}-{n}{ext}"
    used.add(candidate.casefold())
    return candidate


def results_zip_name(job: Job) -> str:
    stem = slugify(job.name, allow_unicode=True)[:60] or "job"
    return f"{stem}-{str(job.id)[:8]}-results.zip"


class OnePieceAtATime:
    """Under ASGI, Django reads a sync iterator to the end into a list before sending the
    first byte (`StreamingHttpResponse.__aiter__`): a 2 GB zip or video would sit in memory. This
    pulls one piece at a time from a worker thread instead. Under WSGI nothing changes.

    `reads_database`: the pieces come from a database cursor, which belongs to the thread whose
    connection opened it, so they are pulled on the request's own thread (thread_sensitive);
    file reads need no such thread and run beside it."""

    reads_database = False

    async def __aiter__(self):
        if self.is_async:
            async for part in super().__aiter__():
                yield part
            return
        parts = iter(self.streaming_content)
        pull = sync_to_async(next, thread_sensitive=self.reads_database)
        end = object()
        while (part := await pull(parts, end)) is not end:
            yield part


class ResultsZipResponse(OnePieceAtATime, StreamingHttpResponse):
    pass


class MediaFileResponse(OnePieceAtATime, FileResponse):
    pass


def stream_results_zip(job: Job) -> StreamingHttpResponse:
    """Every fetched output of `job` as a zip, streamed as it is written: nothing is built in
    memory or on disk first, so a zip of thousands of videos costs one read buffer."""
    response = ResultsZipResponse(iter_zip(fetched_outputs(job)), content_type="application/zip")
    response["Content-Disposition"] = content_disposition_header(as_attachment=True, filename=results_zip_name(job))
    response["Cache-Control"] = "private, no-store"
    return response


class _Pipe:
    """The write end ZipFile writes to; the generator hands on what it collected after each write.

    It has no tell()/seek(), so ZipFile writes in streaming mode (sizes and CRC after each entry).
    """

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def write(self, data) -> int:
        self._parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def take(self) -> bytes:
        data = b"".join(self._parts)
        self._parts.clear()
        return data


def iter_zip(files: Iterable[tuple[str, Path]], chunk_bytes: int = ZIP_CHUNK_BYTES) -> Iterator[bytes]:
    """The bytes of a zip of `files` ((name in the zip, path) pairs), a piece at a time.

    Entries are stored, not deflated: photos and videos are compressed already. Non-ASCII names
    are kept (zipfile marks them UTF-8). A file that vanished since it was listed is left out.
    """
    pipe = _Pipe()
    with zipfile.ZipFile(pipe, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, path in files:
            try:
                f = open(path, "rb")
            except OSError:
                continue
            with f:
                st = os.fstat(f.fileno())
                info = zipfile.ZipInfo(name, date_time=time.localtime(max(st.st_mtime, _ZIP_EPOCH))[:6])
                info.compress_type = zipfile.ZIP_STORED
                info.file_size = st.st_size  # tells zipfile up front whether the entry needs ZIP64
                with zf.open(info, mode="w") as entry:
                    while chunk := f.read(chunk_bytes):
                        entry.write(chunk)
                        yield from _nonempty(pipe.take())
            yield from _nonempty(pipe.take())
    yield from _nonempty(pipe.take())


def _nonempty(data: bytes) -> Iterator[bytes]:
    if data:
        yield data


# ---- serving a file --------------------------------------------------------------------------

def record_download(request: HttpRequest, job, kind: str, target=None, via: str = "page") -> None:
    """One "job.download" audit entry: `kind` is "zip", "output" or "input"; `via` "page" or "api"."""
    details = {"file": kind, "via": via}
    if target is not None:
        details.update(index=target.index, name=target.output_name if kind == "output" else target.name)
    audit.record(request.user, "job.download", target=job, details=details, request=request)


def serve_file(path: Path | None, name: str, download: bool = False,
               request: HttpRequest | None = None) -> HttpResponse:
    """Stream a checked file. Only photo and video types are shown in the browser; anything else
    is a download, so an upload can never run as a page of this site. The name a browser offers
    to save it under passes `safe_name` (no control characters, no bidi overrides); a name that
    is not ASCII goes in RFC 6266's `filename*`.

    With `request`, a single `Range: bytes=...` is answered 206 with just those bytes: a browser
    seeks in a video by asking for the part it needs, never by downloading the whole file first."""
    if path is None:
        raise Http404("No such file")
    name = safe_name(name)
    content_type = None
    if name.lower().endswith(IMAGE_EXTENSIONS + VIDEO_EXTENSIONS):
        content_type = mimetypes.guess_type(name)[0]
    if settings.SENDFILE_BACKEND and request is not None:
        return handed_to_web_server(request, path, name, download or content_type is None, content_type)
    f = open(path, "rb")
    size = os.fstat(f.fileno()).st_size
    wanted = byte_range(request.headers.get("Range", "") if request is not None else "", size)
    if wanted == "unsatisfiable":
        f.close()
        response = HttpResponse(status=416)
        response["Content-Range"] = f"bytes */{size}"
        return response
    body = f if wanted is None else _Slice(f, *wanted)
    response = MediaFileResponse(body, as_attachment=download or content_type is None, filename=name,
                                 content_type=content_type or "application/octet-stream")
    if wanted is not None:
        start, length = wanted
        response.status_code = 206
        response["Content-Range"] = f"bytes {start}-{start + length - 1}/{size}"
        response["Content-Length"] = str(length)
    response["Accept-Ranges"] = "bytes"
    response["Content-Security-Policy"] = "sandbox; default-src 'none'"
    response["Cache-Control"] = "private, max-age=3600"
    return response


def handed_to_web_server(request: HttpRequest, path: Path, name: str, attachment: bool,
                         content_type: str | None) -> HttpResponse:
    """The answer that lets the web server in front send `path` (settings.SENDFILE_BACKEND; nginx:
    an empty response with X-Accel-Redirect, and nginx serves ranges itself). The headers are the
    ones `serve_file` sends, so a browser sees no difference; nginx repeats the sandbox CSP for
    the file (deploy/nginx/), as it keeps only some of the portal's headers."""
    from django_sendfile import sendfile

    response = sendfile(request, path, mimetype=content_type or "application/octet-stream")
    # The library announces the file's size, but this answer's own body is empty: an ASGI server
    # refuses to send less than the Content-Length it announced (nginx sets the file's length).
    if response.get("X-Accel-Redirect"):
        del response["Content-Length"]
    response["Content-Disposition"] = content_disposition_header(as_attachment=attachment, filename=name)
    response["Content-Security-Policy"] = "sandbox; default-src 'none'"
    response["Cache-Control"] = "private, max-age=3600"
    return response


_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


def byte_range(header: str, size: int) -> tuple[int, int] | None | str:
    """(first byte, length) of a single-range `Range` header for a file of `size` bytes; None to
    send the whole file (no header, several ranges, or one we do not understand: RFC 9110 lets a
    server ignore Range); "unsatisfiable" when it starts past the end."""
    m = _RANGE.match(header.strip())
    if not m or not (m[1] or m[2]):
        return None
    if not m[1]:  # "bytes=-500": the last 500 bytes
        length = min(int(m[2]), size)
        return (size - length, length) if length else "unsatisfiable"
    start = int(m[1])
    if start >= size:
        return "unsatisfiable"
    end = min(int(m[2]), size - 1) if m[2] else size - 1
    if end < start:
        return None
    return start, end - start + 1


class _Slice:
    """`length` bytes of an open file from `start`, read like a file (no name or seek, so
    FileResponse neither measures nor rewinds it)."""

    def __init__(self, f, start: int, length: int) -> None:
        f.seek(start)
        self._f, self._left = f, length

    def read(self, n: int = -1) -> bytes:
        n = self._left if n is None or n < 0 else min(n, self._left)
        data = self._f.read(n) if n else b""
        self._left -= len(data)
        return data

    def close(self) -> None:
        self._f.close()
