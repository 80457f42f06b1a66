"""usage.csv as the web server serves it (the portal's ASGI application, as uvicorn calls it) for a
user with many charged jobs: every row, newest first, the same text the test client gets, sent in
pieces as the rows are read: Django is never left to read the whole CSV into memory first."""
import asyncio
import csv
import io
import warnings
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from jobs.models import Job, JobStatus, UsageRecord
from jobs.usage.accounting import month_of

#: more rows than two database reads (and two pieces of the response) hold
MANY = 1_201


@pytest.fixture(autouse=True)
def _utc(settings):
    settings.TIME_ZONE = "UTC"


def charge_many(owner, template, n: int) -> list[UsageRecord]:
    """`n` ended jobs of `owner`, one a minute back from now, each with its usage record."""
    now, snapshot = timezone.now(), template.snapshot().to_json()
    jobs = Job.objects.bulk_create([
        Job(owner=owner, template=template, template_snapshot=snapshot, name=f"job {i}, \"quoted\"",
            cluster=template.cluster, status=JobStatus.COMPLETED, finished_at=now - timedelta(minutes=i), total=1, done=1)
        for i in range(n)])
    return UsageRecord.objects.bulk_create([
        UsageRecord(job=job, user=owner, period=month_of(job.finished_at), gpu_seconds=36.0 * i, cpu_seconds=float(i))
        for i, job in enumerate(jobs)])


def asgi_get(path: str, cookie: str) -> list[dict]:
    """The ASGI messages the portal's application sends for a GET of `path`."""
    # Tests run with DEBUG off and the dev key, which the entry point refuses to serve with
    # (jobs.checks); imported first here, it would stop at that.
    with override_settings(DEBUG=True):
        from portal.asgi import application

    sent, first = [], True

    async def receive():
        nonlocal first
        if first:
            first = False
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()  # the client stays connected until the response ends

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"host", b"testserver"), (b"cookie", cookie.encode())],
             "client": ("127.0.0.1", 50000), "server": ("testserver", 80)}
    async_to_sync(application)(scope, receive, send)
    return sent


@pytest.mark.django_db(transaction=True)  # the application reads on a thread of its own
def test_it_streams_every_row_newest_first(client, owner, stranger, template):
    records = charge_many(owner, template, MANY)
    charge_many(stranger, template, 3)
    client.force_login(owner)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sent = asgi_get(reverse("usage-csv"), f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}")
    assert not [w for w in caught if "consume synchronous iterators" in str(w.message)]

    start = sent[0]
    assert start["status"] == 200 and dict(start["headers"])[b"Content-Type"] == b"text/csv; charset=utf-8"
    pieces = [m["body"] for m in sent[1:] if m.get("body")]
    assert len(pieces) > 1  # sent as it is read, not as one body
    text = b"".join(pieces).decode()
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0][:3] == ["month", "job_id", "job_name"] and len(rows) == MANY + 1
    assert [r[1] for r in rows[1:]] == [str(r.job_id) for r in records]  # newest first, the stranger's absent
    n = MANY - 1
    assert rows[-1][2] == f'job {n}, "quoted"'
    assert rows[-1][6:] == [f"{n * 36 / 3600:.4f}", f"{n / 3600:.4f}", f"{n * 36:.0f}", f"{n:.0f}"]
    # The same text the test client (WSGI) gets.
    assert b"".join(client.get(reverse("usage-csv")).streaming_content).decode() == text
