"""Files sent ahead of Start over tus (jobs/web/views/uploads.py): what pieces cost, and what a cut
connection costs.

Starts the portal's real web server (portal/server.py, as `make up` does) with a throw-away database
and MEDIA_ROOT, then sends a --mb file as the New job page does (a tus POST, then PATCHes at the
offset), with an API token:

  pieces    the whole file in 8 MiB pieces (the page's size) and in 1 MiB pieces, alternating, --repeats
            times each: MB/s, and the ratio 8 MiB / 1 MiB of the medians (what a request costs)
  cut       the connection is cut halfway through a piece at 25 %, 50 % and 75 % of the file (the
            socket closed mid-body, as a closed tab does); the client asks HEAD where to go on and
            sends the rest. Bytes the client sent in all / the file's size, and bytes the server
            wrote in all (Upload.received) / the file's size

Every file is the same bytes (a reused buffer: the client's memory stays flat). Prints only what it
measured, min / median / max over the repeats.

Usage: .venv/bin/python bench/upload_resume.py [--mb 200] [--repeats 3]
Needs the local cluster's Redis (make up / make test) and about 2x --mb of free disk.
"""
from __future__ import annotations

import argparse
import base64
import http.client
import os
import socket
import statistics
import tempfile
import time
from pathlib import Path

MEDIA = Path(tempfile.mkdtemp(prefix="ffp-bench-media-"))
os.environ["MEDIA_ROOT"] = str(MEDIA)

from _portal_env import setup  # noqa: E402

setup()

from _live_env import WebServer  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402

from jobs.models import ApiToken, Upload  # noqa: E402

MB = 1000 * 1000
MIB = 1024 * 1024
BUFFER = memoryview(bytes(8 * MIB))


class Client:
    def __init__(self, port: int, token: str):
        self.port, self.headers = port, {"Authorization": f"Token {token}", "Tus-Resumable": "1.0.0"}
        self.sent = 0

    def request(self, method: str, path: str, body=None, headers=None) -> http.client.HTTPResponse:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        conn.request(method, path, body=body, headers={**self.headers, **(headers or {})})
        response = conn.getresponse()
        response.read()
        conn.close()
        return response

    def create(self, size: int) -> str:
        meta = f"filename {base64.b64encode(b'bench.mp4').decode()},kind {base64.b64encode(b'target').decode()}"
        r = self.request("POST", "/uploads/", headers={"Upload-Length": str(size), "Upload-Metadata": meta})
        assert r.status == 201, r.status
        return r.getheader("Location")

    def patch(self, url: str, offset: int, length: int) -> int:
        r = self.request("PATCH", url, body=BUFFER[:length], headers={
            "Content-Type": "application/offset+octet-stream", "Upload-Offset": str(offset)})
        assert r.status == 204, r.status
        self.sent += length
        return int(r.getheader("Upload-Offset"))

    def cut(self, url: str, offset: int, length: int) -> None:
        """Send the head and half the body of a piece, then close the socket (a closed tab)."""
        head = (f"PATCH {url} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {self.headers['Authorization']}\r\n"
                f"Tus-Resumable: 1.0.0\r\nContent-Type: application/offset+octet-stream\r\n"
                f"Upload-Offset: {offset}\r\nContent-Length: {length}\r\n\r\n").encode()
        with socket.create_connection(("127.0.0.1", self.port)) as s:
            s.sendall(head)
            s.sendall(BUFFER[:length // 2])
        self.sent += length // 2

    def offset(self, url: str) -> int:
        return int(self.request("HEAD", url).getheader("Upload-Offset"))


def send(client: Client, size: int, piece: int, cut_at: tuple[float, ...] = ()) -> str:
    url = client.create(size)
    offset, cuts = 0, list(cut_at)
    while offset < size:
        length = min(piece, size - offset)
        if cuts and offset >= cuts[0] * size:
            cuts.pop(0)
            client.cut(url, offset, length)
            time.sleep(0.05)  # the server sees the hang-up
            offset = client.offset(url)
            continue
        offset = client.patch(url, offset, length)
    return url


def clear() -> None:
    for upload in Upload.objects.all():
        upload.remove_files()
    Upload.objects.all().delete()


def stats(values: list[float], fmt: str = "{:.1f}") -> str:
    return " / ".join(fmt.format(v) for v in (min(values), statistics.median(values), max(values)))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    size = args.mb * MB
    _, token = ApiToken.issue(User.objects.get(username="demo"))
    server = WebServer()
    try:
        client = Client(server.port, token)
        send(client, 16 * MIB, 8 * MIB)  # warm-up: imports, first connections
        clear()
        speeds: dict[str, list[float]] = {"8 MiB": [], "1 MiB": []}
        for _ in range(args.repeats):
            for name, piece in (("8 MiB", 8 * MIB), ("1 MiB", MIB)):  # alternating
                t0 = time.perf_counter()
                send(client, size, piece)
                speeds[name].append(size / MB / (time.perf_counter() - t0))
                clear()
        wire, written = [], []
        for _ in range(args.repeats):
            client.sent = 0
            url = send(client, size, 8 * MIB, cut_at=(0.25, 0.5, 0.75))
            upload = Upload.objects.get(pk=url.rstrip("/").rsplit("/", 1)[1])
            assert upload.offset == size, (upload.offset, size)
            wire.append(client.sent / size)
            written.append(upload.received / size)
            clear()
    finally:
        server.stop()
    print(f"{args.mb} MB file, {args.repeats} repeats, min / median / max")
    for name, values in speeds.items():
        print(f"  pieces of {name}: {stats(values)} MB/s")
    print(f"  8 MiB / 1 MiB pieces, median speed ratio: {statistics.median(speeds['8 MiB']) / statistics.median(speeds['1 MiB']):.2f}")
    print(f"  cut 3 times mid-piece, bytes sent / file size: {stats(wire, '{:.3f}')}")
    print(f"  cut 3 times mid-piece, bytes the server wrote / file size: {stats(written, '{:.3f}')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
