"""usage.csv's memory does not grow with the number of charged jobs: 1,000 vs 100,000 records.

Serves /usage.csv through the portal's ASGI application, as uvicorn calls it (portal.asgi), to a
client that reads and drops every piece, and measures the peak of Python's allocations during
the request (tracemalloc; every thread: the request's database reads run on a thread of their own).
A user with 1,000 charged jobs and one with 100,000, alternated, 3 repetitions each; prints each
size's min/median/max peak and the ratio of the medians (target: close to 1, i.e. constant).

Usage: .venv/bin/python bench/usage_csv.py [REPETITIONS]   (needs Redis (REDIS_URL), not the cluster)
"""
from __future__ import annotations

import asyncio
import json
import shutil
import statistics
import sys
import time
import tracemalloc
from datetime import timedelta
from pathlib import Path

from _portal_env import setup

setup()

from asgiref.sync import async_to_sync  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.test import Client  # noqa: E402
from django.urls import reverse  # noqa: E402
from django.utils import timezone  # noqa: E402

from jobs.models import Job, JobStatus, Template, UsageRecord  # noqa: E402
from jobs.usage.accounting import month_of  # noqa: E402
from portal.asgi import application  # noqa: E402

SIZES = (1_000, 100_000)
BATCH = 5_000
PATH = reverse("usage-csv")


def charge(user: User, template: Template, n: int) -> None:
    """`n` ended jobs of `user`, one a minute back from now, each with its usage record."""
    now, snapshot = timezone.now(), template.snapshot().to_json()
    for first in range(0, n, BATCH):
        jobs = Job.objects.bulk_create([
            Job(owner=user, template=template, template_snapshot=snapshot, name=f"bench job {i}",
                cluster=template.cluster, status=JobStatus.COMPLETED, finished_at=now - timedelta(minutes=i),
                total=1, done=1)
            for i in range(first, min(first + BATCH, n))])
        UsageRecord.objects.bulk_create([
            UsageRecord(job=job, user=user, period=month_of(job.finished_at), gpu_seconds=3600.0, cpu_seconds=7200.0)
            for job in jobs])


def session_cookie(user: User) -> str:
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


def download(cookie: str) -> tuple[int, int, int, float]:
    """GET /usage.csv over ASGI; (status, bytes, pieces, seconds). The body is counted, not kept."""
    got = {"status": 0, "bytes": 0, "pieces": 0}
    first = True

    async def receive():
        nonlocal first
        if first:
            first = False
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()  # connected until the response ends

    async def send(message):
        if message["type"] == "http.response.start":
            got["status"] = message["status"]
        elif message.get("body"):
            got["bytes"] += len(message["body"])
            got["pieces"] += 1

    host = settings.ALLOWED_HOSTS[0] if settings.ALLOWED_HOSTS and settings.ALLOWED_HOSTS[0] != "*" else "localhost"
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": PATH, "raw_path": PATH.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"host", host.encode()), (b"cookie", cookie.encode())],
             "client": ("127.0.0.1", 50000), "server": (host, 80)}
    started = time.perf_counter()
    async_to_sync(application)(scope, receive, send)
    return got["status"], got["bytes"], got["pieces"], time.perf_counter() - started


def measure(cookie: str) -> tuple[int, int, int]:
    """(peak bytes allocated during one download, bytes sent, pieces sent)."""
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    status, sent, pieces, _seconds = download(cookie)
    assert status == 200, status
    return tracemalloc.get_traced_memory()[1] - base, sent, pieces


def main(reps: int = 3) -> int:
    template = Template.objects.get(slug="gpu-batch")
    cookies = {}
    for n in SIZES:
        user = User.objects.create_user(f"bench-{n}", f"bench-{n}@example.org", "bench-pass-123")
        charge(user, template, n)
        cookies[n] = session_cookie(user)
    for n in SIZES:
        download(cookies[n])  # warm: imports, templates, the first query plans, out of the measurement
    tracemalloc.start()
    peaks: dict[int, list[int]] = {n: [] for n in SIZES}
    sent: dict[int, tuple[int, int]] = {}
    for rep in range(reps):
        for n in SIZES if rep % 2 == 0 else reversed(SIZES):
            peak, size, pieces = measure(cookies[n])
            peaks[n].append(peak)
            sent[n] = (size, pieces)
    tracemalloc.stop()
    report = {}
    for n in SIZES:
        report[f"{n}_records"] = {
            "peak_kib": {"min": round(min(peaks[n]) / 1024), "median": round(statistics.median(peaks[n]) / 1024),
                         "max": round(max(peaks[n]) / 1024)},
            "csv_bytes": sent[n][0], "pieces_sent": sent[n][1]}
    small, big = (statistics.median(peaks[n]) for n in SIZES)
    report["ratio_peak_100000_vs_1000"] = round(big / small, 2)
    report["repetitions"] = reps
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 3))
    finally:  # 100,000 jobs make a database of about 110 MB: not left in /tmp
        shutil.rmtree(Path(settings.DATABASES["default"]["NAME"]).parent, ignore_errors=True)
