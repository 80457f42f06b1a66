"""The web server's memory while big bodies arrive and big files leave (RSS read from /proc).

Starts the portal's real web server as `make up` does (portal/server.py, through bench/_live_env.py)
on its own port, with a throw-away database (bench/_portal_env.py) and MEDIA_ROOT, and samples the
server process's VmRSS every 20 ms while:

  upload     a logged-in client (API token) POSTs a Start to /api/v1/jobs whose target is a
             --upload-mb file, streamed from a reused buffer (nothing of that size is in memory)
  download   --clients clients GET one --download-mb output; half read 256 KiB/s, half stall
             after the first 64 KiB; for --stall-s seconds, then they hang up
  anonymous  a client with no credentials POSTs an --anonymous-mb body to /api/v1/jobs; it keeps
             sending until the server answers

--repeats rounds, the cases alternating; each run on a fresh server, after a small run of the same
case (imports, caches). Prints per case the server's RSS before it, the peak growth over that, and
the growth still held a second after it (each min / median / max), and what the clients saw.

--guard-mib ends a case once the server has grown that much (a server without flow control grows
by a multiple of the body: give it small sizes, e.g. --upload-mb 100 --download-mb 150).

Usage: .venv/bin/python bench/memory_upload_download.py [--repeats 3] [--upload-mb 2000]
       [--download-mb 1000] [--anonymous-mb 2000] [--clients 4] [--stall-s 10]
Needs the local cluster's Redis (make up / make test) and about 3x --upload-mb of free disk.
"""
from __future__ import annotations

import argparse
import os
import select
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

MEDIA = Path(tempfile.mkdtemp(prefix="ffp-bench-media-"))
os.environ["MEDIA_ROOT"] = str(MEDIA)

from _portal_env import setup  # noqa: E402

setup()

from _live_env import WebServer, session_cookie  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402

from jobs.models import ApiToken, Job, JobStatus, Target, Template  # noqa: E402

MB = 1000 * 1000
MIB = 1024 * 1024
#: one buffer, sent again and again: the client's own memory stays flat whatever the body size
ZEROS = memoryview(bytes(MIB))
#: the first bytes of an MP4 (a `ftyp` box): enough for the portal to take the file as a video
MP4_HEAD = b"\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom"
BOUNDARY = "ffpbenchboundary"
SAMPLE_FACES = Path(os.environ.get("FFP_SAMPLE_FACES", "/srv/ffportal/storage/samples/faces"))


class Sampler(threading.Thread):
    """The peak VmRSS of a process while running."""

    def __init__(self, server: WebServer):
        super().__init__(daemon=True)
        self.server = server
        self.base = server.rss_kib()
        self.peak = self.base
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            self.peak = max(self.peak, self.server.rss_kib())
            time.sleep(0.02)

    def growth_mib(self) -> float:
        return (self.peak - self.base) / 1024

    def stop(self) -> float:
        self.halt.set()
        self.join()
        return self.growth_mib()


def read_answer(sock: socket.socket, timeout: float = 600) -> str:
    """The status line of the answer ('' if the server closed without one); reads only the head."""
    sock.setblocking(True)
    sock.settimeout(timeout)
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except (ConnectionError, socket.timeout):
        pass
    return data.split(b"\r\n", 1)[0].decode(errors="replace")


def stream_request(port: int, head: bytes, body, sampler: Sampler, guard_mib: float) -> dict:
    """Send `head`, then the pieces of `body` for as long as the server does not answer. Returns
    the answer's status line, the bytes of body sent and the seconds taken."""
    t0 = time.perf_counter()
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(head)
    sock.setblocking(False)
    sent, answered, guarded = 0, False, False
    try:
        for piece in body:
            view = memoryview(piece)
            while view:
                readable, writable, _ = select.select([sock], [sock], [], 1.0)
                if readable:
                    answered = True
                    break
                if sampler.growth_mib() > guard_mib:
                    guarded = True
                    break
                if writable:
                    try:
                        n = sock.send(view)
                    except BlockingIOError:
                        continue
                    sent += n
                    view = view[n:]
            if answered or guarded:
                break
        status = "" if guarded else read_answer(sock)
    except (BrokenPipeError, ConnectionResetError):
        status = read_answer(sock)
    finally:
        sock.close()
    return {"status": status or ("stopped by the guard" if guarded else "closed without an answer"),
            "body_mb_sent": round(sent / MB, 1), "seconds": round(time.perf_counter() - t0, 1)}


def multipart_start(upload_bytes: int) -> tuple[int, list]:
    """(length, pieces) of a Start with a small source photo and one `upload_bytes` video target."""
    face = next(p for p in sorted(SAMPLE_FACES.iterdir()) if p.suffix.lower() in (".jpg", ".jpeg", ".png")).read_bytes()

    def field(name: str, value: str) -> bytes:
        return f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()

    def file_head(name: str, filename: str, kind: str) -> bytes:
        return (f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
                f"Content-Type: {kind}\r\n\r\n").encode()

    head = (field("template", "gpu-batch") + field("consent", "true") + field("name", "memory bench")
            + file_head("source", "face.jpg", "image/jpeg") + face + b"\r\n"
            + file_head("targets", "big.mp4", "video/mp4") + MP4_HEAD)
    tail = f"\r\n--{BOUNDARY}--\r\n".encode()
    zeros = upload_bytes - len(MP4_HEAD)
    return len(head) + zeros + len(tail), [head, *zero_pieces(zeros), tail]


def zero_pieces(n: int):
    while n > 0:
        piece = ZEROS[:min(n, MIB)]
        n -= len(piece)
        yield piece


def case_upload(server: WebServer, token: str, upload_bytes: int, guard_mib: float) -> dict:
    length, pieces = multipart_start(upload_bytes)
    head = (f"POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nAuthorization: Token {token}\r\n"
            f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\nContent-Length: {length}\r\n\r\n").encode()
    return measured(server, lambda s: stream_request(server.port, head, pieces, s, guard_mib))


def case_anonymous(server: WebServer, body_bytes: int, guard_mib: float) -> dict:
    head = (f"POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
            f"Content-Type: application/octet-stream\r\nContent-Length: {body_bytes}\r\n\r\n").encode()
    return measured(server, lambda s: stream_request(server.port, head, zero_pieces(body_bytes), s, guard_mib))


def case_download(server: WebServer, cookie: str, path: str, clients: int, stall_s: float, guard_mib: float) -> dict:
    def run(sampler: Sampler) -> dict:
        socks = []
        for _ in range(clients):
            s = socket.create_connection(("127.0.0.1", server.port))
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nCookie: {cookie}\r\n\r\n".encode())
            s.setblocking(False)
            socks.append(s)
        got = [0] * clients
        end = time.monotonic() + stall_s
        guarded = False
        while time.monotonic() < end:
            if sampler.growth_mib() > guard_mib:
                guarded = True
                break
            for i, s in enumerate(socks):
                # even clients read 64 KiB every 0.25 s (256 KiB/s); odd ones stall after their first 64 KiB
                want = 64 * 1024 if i % 2 == 0 else 64 * 1024 - got[i]
                if want > 0:
                    try:
                        got[i] += len(s.recv(want))
                    except BlockingIOError:
                        pass
            time.sleep(0.25)
        for s in socks:
            s.close()
        return {"status": "stopped by the guard" if guarded else "hung up as planned",
                "mib_read_per_client": [round(g / MIB, 1) for g in got]}

    return measured(server, run)


def measured(server: WebServer, run) -> dict:
    sampler = Sampler(server)
    sampler.start()
    outcome = run(sampler)
    time.sleep(1.0)  # what the server lets go of once the case is over
    growth = sampler.stop()
    held = (server.rss_kib() - sampler.base) / 1024
    return {"base_mib": sampler.base / 1024, "growth_mib": growth, "held_after_mib": held, **outcome}


def make_output(user, size: int) -> str:
    """A job with one fetched output of `size` bytes (a sparse file: no disk, same bytes on the wire)."""
    template = Template.objects.select_related("cluster").get(slug="gpu-batch")
    job = Job.objects.create(owner=user, template=template, template_snapshot=template.snapshot().to_json(),
                             cluster=template.cluster, status=JobStatus.COMPLETED, total=1)
    out = MEDIA / "bench-outputs" / f"{job.id}.mp4"
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as f:
        f.truncate(size)
    Target.objects.create(job=job, index=0, name="big.mp4", output_name="big.mp4", output_file=str(out))
    return f"/jobs/{job.id}/outputs/0"


def clear_uploads() -> None:
    """Uploads of earlier rounds (the server copied every target into MEDIA_ROOT): free the disk."""
    for child in MEDIA.iterdir():
        if child.name == "bench-outputs":
            continue
        if child.is_dir():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


def summary(name: str, runs: list[dict]) -> str:
    def three(key: str) -> str:
        values = [r[key] for r in runs]
        return f"{min(values):.1f} / {statistics.median(values):.1f} / {max(values):.1f}"

    lines = [f"{name} (MiB, min / median / max of {len(runs)}): RSS before {three('base_mib')}, "
             f"peak growth {three('growth_mib')}, held after {three('held_after_mib')}"]
    for r in runs:
        seen = [r["status"]]
        if "body_mb_sent" in r:
            seen.append(f"{r['body_mb_sent']} MB of body sent, {r['seconds']} s")
        if "mib_read_per_client" in r:
            seen.append(f"MiB read per client {r['mib_read_per_client']}")
        lines.append("    " + ", ".join(seen))
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--upload-mb", type=int, default=2000)
    ap.add_argument("--download-mb", type=int, default=1000)
    ap.add_argument("--anonymous-mb", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--stall-s", type=float, default=10)
    ap.add_argument("--guard-mib", type=float, default=2500)
    args = ap.parse_args()

    user = User.objects.get(username="demo")
    _, token = ApiToken.issue(user)
    cookie = session_cookie(user)
    big = make_output(user, args.download_mb * MB)
    small = make_output(user, 8 * MB)
    cases = {
        f"upload, logged in, {args.upload_mb} MB": (
            lambda server, size: case_upload(server, token, size, args.guard_mib), args.upload_mb * MB),
        f"download, {args.clients} clients, {args.download_mb} MB, {args.stall_s:g} s": (
            lambda server, path: case_download(server, cookie, path, args.clients,
                                               args.stall_s if path == big else 1, args.guard_mib), big),
        f"anonymous body, {args.anonymous_mb} MB": (
            lambda server, size: case_anonymous(server, size, args.guard_mib), args.anonymous_mb * MB),
    }
    warm_up = {name: warm for name, warm in zip(cases, (8 * MB, small, 8 * MB))}
    runs: dict[str, list[dict]] = {name: [] for name in cases}
    try:
        for _ in range(args.repeats):
            for name, (case, size) in cases.items():
                # A fresh server for each run: memory one case freed but kept would hide the next
                # one's growth. Its warm-up (the same case, small) imports what the case needs.
                server = WebServer()
                try:
                    case(server, warm_up[name])
                    clear_uploads()
                    runs[name].append(case(server, size))
                    clear_uploads()
                finally:
                    server.stop()
    finally:
        shutil.rmtree(MEDIA, ignore_errors=True)
    for name, results in runs.items():
        print(summary(name, results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
