"""JSON logs (LOG_FORMAT=json, production's default): one event per line, valid JSON, with the ids
of what was going on (request, user, job, Slurm job, RQ job), the request's id also in the response
and the audit log, and no secret in any field.

The logging configuration is the real one (`portal.logs.logging_config("json")`, what settings.LOGGING
is in production) with its console handler writing into a buffer; each test restores the tests' own."""
import io
import json
import logging
import logging.config
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils.module_loading import import_string
from rq import Queue
from rq.serializers import JSONSerializer

from jobs import audit
from jobs.background.rq_worker import JOB_ID_FIRST, PortalWorker, log_ids
from jobs.job.submit import submit_job
from jobs.log_context import bind, current, log_context
from jobs.models import AuditEntry
from jobs.watcher import poll as watcher
from portal.logs import logging_config

from .api_helpers import token_client
from .test_quotas_submit import cluster, folder_job  # noqa: F401 - fixtures
from .test_watcher import CannedSlurm, fake, make_job  # noqa: F401 - fixture

REPO = Path(__file__).resolve().parents[2]
FRESH_ID = re.compile(r"[0-9a-f]{32}\Z")
KEY = ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
       "-----END OPENSSH PRIVATE KEY-----")
SECRETS = ("b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ", "hunter2-pass", "s3cret-redis", "pg-pa55word",
           "Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTAxMjM0NTY3OA")


class Lines:
    """What the console handler wrote: every line must be one JSON object."""

    def __init__(self, buffer: io.StringIO):
        self.buffer = buffer

    @property
    def text(self) -> str:
        return self.buffer.getvalue()

    def all(self) -> list[dict]:
        out = []
        for line in self.text.split("\n")[:-1]:  # the last event ends with a newline too
            event = json.loads(line)  # a line that is not one JSON object fails here
            assert isinstance(event, dict) and {"time", "level", "logger", "message"} <= set(event), line
            out.append(event)
        return out

    def having(self, text: str) -> list[dict]:
        return [e for e in self.all() if text in e["message"]]


@pytest.fixture
def json_logs():
    config = logging_config("json")
    buffer = io.StringIO()
    config["handlers"]["console"]["stream"] = buffer
    logging.config.dictConfig(config)
    try:
        yield Lines(buffer)
    finally:
        logging.config.dictConfig(settings.LOGGING)


def access_line(lines: Lines, path: str) -> dict:
    (event,) = [e for e in lines.all() if e["logger"] == "portal.access" and e.get("path") == path]
    return event


# ---- requests ----

def test_a_page_request_logs_its_request_id_and_user_id(json_logs, client, owner):
    client.force_login(owner)
    r = client.get(reverse("job-list"))
    assert r.status_code == 200 and FRESH_ID.match(r["X-Request-ID"])
    event = access_line(json_logs, reverse("job-list"))
    assert event["request_id"] == r["X-Request-ID"] and event["user_id"] == owner.pk
    assert event["status"] == 200 and event["level"] == "INFO" and event["duration_ms"] >= 0


def test_an_api_request_logs_the_tokens_user_and_not_the_token(json_logs, owner):
    api, key = token_client(owner)
    r = api.get("/api/v1/jobs")
    assert r.status_code == 200
    event = access_line(json_logs, "/api/v1/jobs")
    assert event["request_id"] == r["X-Request-ID"] and event["user_id"] == owner.pk
    assert key not in json_logs.text


def test_nobody_logged_in_has_a_request_id_and_no_user_id(json_logs, client, db):
    r = client.get(reverse("login"))
    event = access_line(json_logs, reverse("login"))
    assert event["request_id"] == r["X-Request-ID"] and "user_id" not in event


def test_each_request_gets_its_own_id_and_none_leaks_after_it(json_logs, client, db):
    first, second = client.get(reverse("login")), client.get(reverse("login"))
    assert first["X-Request-ID"] != second["X-Request-ID"]
    logging.getLogger("test.after").warning("after the requests")
    (after,) = json_logs.having("after the requests")
    assert "request_id" not in after and current() == {}


def test_a_sane_incoming_request_id_from_nginx_is_kept(json_logs, client, db):
    r = client.get(reverse("login"), headers={"X-Request-ID": "0f8e2c1d9b7a65430f8e2c1d9b7a6543"})
    assert r["X-Request-ID"] == "0f8e2c1d9b7a65430f8e2c1d9b7a6543"
    assert access_line(json_logs, reverse("login"))["request_id"] == "0f8e2c1d9b7a65430f8e2c1d9b7a6543"


@pytest.mark.parametrize("hostile", ["x" * 65, "abc\ndef-12345678", "forged-id\r\nX-Admin: 1", "запрос-12345678",
                                     "short", "id with spaces 123", "<script>alert(1)</script>"])
def test_a_hostile_incoming_request_id_is_replaced(json_logs, client, db, hostile):
    r = client.get(reverse("login"), headers={"X-Request-ID": hostile})
    assert r["X-Request-ID"] != hostile and FRESH_ID.match(r["X-Request-ID"])
    assert access_line(json_logs, reverse("login"))["request_id"] == r["X-Request-ID"]
    assert hostile not in json_logs.text


def test_a_refused_request_is_logged_by_django_with_the_same_id(json_logs, client, owner):
    client.force_login(owner)
    r = client.get(f"/jobs/{uuid.uuid4()}/")
    assert r.status_code == 404
    refused = [e for e in json_logs.all() if e["logger"] == "django.request"]
    assert refused and {e["request_id"] for e in refused} == {r["X-Request-ID"]}
    assert {e["user_id"] for e in refused} == {owner.pk}


# ---- the audit log ----

def test_an_audit_entry_carries_the_request_id_of_its_log_lines(json_logs, client, owner):
    r = client.post(reverse("login"), {"username": "alice", "password": "alice-pass-123"})
    assert r.status_code == 302
    entry = AuditEntry.objects.get(action="auth.login")
    assert entry.details["request_id"] == r["X-Request-ID"] == access_line(json_logs, reverse("login"))["request_id"]


def test_an_audit_entry_written_by_an_rq_job_carries_its_id_and_keeps_the_callers_facts(owner):
    with log_context(rq_job_id="rq-123", job_id="j-1"):
        entry = audit.record(owner, "job.cancel", details={"status_before": "running", "rq_job_id": "mine"})
    # The caller's own facts win; ids that have columns of their own (the target) are not copied.
    assert entry.details == {"rq_job_id": "mine", "status_before": "running"}
    with log_context(rq_job_id="rq-456"):
        assert audit.record(owner, "job.retry").details == {"rq_job_id": "rq-456"}
    assert audit.record(owner, "job.retry").details == {}


# ---- jobs: the submission, the watcher, RQ ----

def test_a_submission_logs_its_job_id_and_slurm_job_id(json_logs, cluster, owner, folder_job):
    cluster(3)
    assert submit_job(str(folder_job.id)) == "4242"
    (submitted,) = json_logs.having("submitted as Slurm job 4242")
    assert submitted["job_id"] == str(folder_job.id) and submitted["slurm_job_id"] == "4242"
    logging.getLogger("test.after").warning("after the submission")
    (after,) = json_logs.having("after the submission")
    assert "job_id" not in after and "slurm_job_id" not in after


def test_the_watchers_lines_about_a_job_carry_its_ids(json_logs, fake, owner, template):
    job = make_job(owner, template, "777", tasks=1)
    fake(CannedSlurm(progress=f"{job.folder.progress_record(0)}\t{{not json\n"))
    watcher.poll_profile(template.cluster)
    (unreadable,) = json_logs.having("unreadable progress record")
    assert unreadable["job_id"] == str(job.id) and unreadable["slurm_job_id"] == "777"
    assert unreadable["level"] == "WARNING"


def say_hello(job_id: str) -> str:
    """An RQ job for the test below: logs one line from inside the worker."""
    logging.getLogger("test.rq").info("hello from the worker")
    return job_id


def test_every_rq_job_logs_its_rq_id(json_logs, db):
    from django_rq import get_connection

    queue = Queue(f"test-json-logs-{uuid.uuid4().hex}", connection=get_connection(), serializer=JSONSerializer)
    rq_job = queue.enqueue("tests.jobs.test_json_logs.say_hello", "j-42")
    try:
        PortalWorker([queue], connection=queue.connection, serializer=JSONSerializer).work(burst=True)
    finally:
        queue.delete(delete_jobs=True)
    (hello,) = json_logs.having("hello from the worker")
    assert hello["rq_job_id"] == rq_job.id and "job_id" not in hello  # not a function known to take a job id


def test_rq_jobs_about_a_portal_job_name_it():
    class RQJob:
        id, func_name, args = "rq-1", "jobs.job.submit.submit_job", ("0b5e-job",)

    assert log_ids(RQJob) == {"rq_job_id": "rq-1", "job_id": "0b5e-job"}
    for name in JOB_ID_FIRST:  # a renamed task would silently lose its job id: they must exist
        first = next(iter(import_string(name).__code__.co_varnames))
        assert "job" in first, name


# ---- the context ----

def test_a_misspelt_id_is_refused_and_bind_outside_a_context_keeps_nothing():
    with pytest.raises(TypeError, match="jobid"):
        with log_context(jobid="1"):
            pass
    assert bind(job_id="1") is False and current() == {}
    with log_context(job_id="outer"):
        with log_context(slurm_job_id="9", task_index=3):
            bind(job_id="inner")
            assert current() == {"job_id": "inner", "slurm_job_id": "9", "task_index": 3}
        assert current() == {"job_id": "outer"}


# ---- secrets ----

def test_json_lines_carry_no_secret_in_any_field(json_logs):
    log = logging.getLogger("test.secrets")
    log.info("profile key %s", KEY)
    log.info("sent Token Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTAxMjM0NTY3OA to the API")
    log.info("login with password=hunter2-pass failed")
    log.info("queue at redis://:s3cret-redis@10.0.0.5:6379/0, db at postgres://portal:pg-pa55word@db/portal",
             extra={"url": "redis://default:s3cret-redis@10.0.0.5:6379/0", "argv": ["psql", "password=pg-pa55word"]})
    try:
        raise RuntimeError(f"cannot connect with password=hunter2-pass and {KEY}")
    except RuntimeError:
        log.exception("connection failed")
    events = json_logs.all()
    assert len(events) == 5
    for secret in SECRETS:
        assert secret not in json_logs.text, secret
    assert "[private key redacted]" in events[0]["message"] and "Token ********" in events[1]["message"]
    assert "password=********" in events[2]["message"]
    assert "redis://:********@10.0.0.5:6379/0" in events[3]["message"] and events[3]["url"].endswith("@10.0.0.5:6379/0")
    assert "RuntimeError" in events[4]["exc_info"] and "[private key redacted]" in events[4]["exc_info"]


def test_every_handler_redacts_in_both_formats():
    for log_format in ("json", "plain"):
        config = logging_config(log_format)
        for name, handler in config["handlers"].items():
            assert "redact" in handler["filters"], (log_format, name)
    with pytest.raises(ValueError, match="LOG_FORMAT"):
        logging_config("xml")


def test_production_logs_json_and_a_checkout_plain(tmp_path):
    def log_format(**env) -> str:
        code = "import django; django.setup(); from django.conf import settings; print(settings.LOG_FORMAT)"
        base = {k: v for k, v in os.environ.items() if k not in ("LOG_FORMAT", "DEBUG")}
        r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60,
                           env={**base, "DJANGO_SETTINGS_MODULE": "portal.settings", "PORTAL_VAR": str(tmp_path),
                                "SECRET_KEY": "x" * 60, "FIELD_ENCRYPTION_KEY": "A" * 43 + "=", **env})
        assert r.returncode == 0, r.stderr[-2000:]
        return r.stdout.strip()

    assert log_format(DEBUG="false") == "json"
    assert log_format(DEBUG="true") == "plain"
    assert log_format(DEBUG="false", LOG_FORMAT="plain") == "plain"


def test_the_asgi_handler_logs_the_same_ids_as_wsgi(json_logs, async_client, owner):
    """Production serves through Django's ASGI handler: the sync middleware runs in a thread there,
    and the context must follow it."""
    from asgiref.sync import async_to_sync

    async_to_sync(async_client.aforce_login)(owner)
    r = async_to_sync(async_client.get)(reverse("job-list"), headers={"X-Request-ID": "asgi-request-0001"})
    assert r.status_code == 200 and r["X-Request-ID"] == "asgi-request-0001"
    event = access_line(json_logs, reverse("job-list"))
    assert event["request_id"] == "asgi-request-0001" and event["user_id"] == owner.pk
