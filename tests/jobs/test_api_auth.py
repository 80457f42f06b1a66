"""Who may call the API: tokens, sessions, CSRF, and the ownership of every endpoint."""
import pytest
from django.test import Client
from django.utils import timezone

from jobs.models import ApiToken, JobStatus

from .api_helpers import make_job, session_client, token_client

CSRF_SECRET = "a" * 32  # a well-formed csrftoken cookie value


@pytest.fixture
def job(owner, template):
    return make_job(owner, template, targets=2, tasks=1)


# (method, path, what the owner gets): every endpoint that takes a job id.
JOB_ENDPOINTS = [
    ("get", "/api/v1/jobs/{id}", 200),
    ("post", "/api/v1/jobs/{id}/cancel", 200),
    ("post", "/api/v1/jobs/{id}/retry", 409),  # a queued job: nothing to retry yet
    ("get", "/api/v1/jobs/{id}/results.zip", 200),
]
ALL_ENDPOINTS = [("get", "/api/v1/jobs"), ("post", "/api/v1/jobs"), ("get", "/api/v1/templates"),
                 ("get", "/api/v1/folders")] + [(m, p) for m, p, _ in JOB_ENDPOINTS]


@pytest.mark.parametrize("method, path, owner_status", JOB_ENDPOINTS)
@pytest.mark.parametrize("who, by", [("owner", "session"), ("owner", "token"), ("staff", "session"),
                                     ("staff", "token"), ("colleague", "session"), ("colleague", "token"),
                                     ("stranger", "session"), ("stranger", "token"), ("anonymous", None)])
def test_it_shows_a_job_only_to_its_owner(request, job, method, path, owner_status, who, by):
    # "staff" is a superuser: the flags grant nothing outside the admin (jobs.access)
    if who == "anonymous":
        client = Client()
    else:
        user = request.getfixturevalue(who)
        client = session_client(user) if by == "session" else token_client(user)[0]
    r = getattr(client, method)(path.format(id=job.id))
    expected = {"owner": owner_status, "staff": 404, "colleague": 404, "stranger": 404, "anonymous": 401}[who]
    assert r.status_code == expected, r.content
    if expected != 200 or "results.zip" not in path:
        assert r.json()["error"] if expected >= 400 else r.json()["id"] == str(job.id)
    if expected == 404:  # the same answer as for a job that does not exist: ids leak nothing
        assert r.json() == {"error": "No such job."}


@pytest.mark.parametrize("method, path", ALL_ENDPOINTS)
def test_it_asks_anonymous_callers_to_authenticate(job, method, path):
    r = getattr(Client(), method)(path.format(id=job.id))
    assert r.status_code == 401
    assert set(r.json()) == {"error"}
    assert r["WWW-Authenticate"] == "Token"


@pytest.mark.parametrize("header", ["Token wrong-key", "Token", "token a b", "Token "])
def test_it_refuses_a_wrong_token(owner, header):
    r = Client(HTTP_AUTHORIZATION=header).get("/api/v1/jobs")
    assert r.status_code == 401 and r.json()["error"]


def test_it_lets_a_wrong_token_win_over_a_session(owner):
    client = session_client(owner)
    assert client.get("/api/v1/jobs").status_code == 200
    assert client.get("/api/v1/jobs", HTTP_AUTHORIZATION="Token wrong-key").status_code == 401


def test_it_leaves_other_authorization_schemes_to_the_session(owner):
    # e.g. HTTP Basic added by a proxy in front of the portal
    client = session_client(owner)
    assert client.get("/api/v1/jobs", HTTP_AUTHORIZATION="Basic YWxpY2U6eA==").status_code == 200
    assert Client().get("/api/v1/jobs", HTTP_AUTHORIZATION="Basic YWxpY2U6eA==").status_code == 401


def test_it_refuses_tokens_of_inactive_users(owner):
    client, _ = token_client(owner)
    owner.is_active = False
    owner.save()
    assert client.get("/api/v1/jobs").status_code == 401


def test_it_accepts_a_token_and_records_its_use_once_a_minute(owner, django_assert_max_num_queries):
    client, key = token_client(owner)
    token = ApiToken.objects.get(user=owner)
    assert token.last_used_at is None
    assert client.get("/api/v1/jobs").status_code == 200
    token.refresh_from_db()
    first = token.last_used_at
    assert first is not None
    # Within the minute: a read stays a read (token + count + page, no UPDATE).
    with django_assert_max_num_queries(3):
        assert client.get("/api/v1/jobs").status_code == 200
    token.refresh_from_db()
    assert token.last_used_at == first
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=first - timezone.timedelta(minutes=2))
    client.get("/api/v1/jobs")
    token.refresh_from_db()
    assert token.last_used_at > first - timezone.timedelta(minutes=1)


def test_it_refuses_a_session_post_without_csrf_token(job, owner):
    client = session_client(owner, enforce_csrf_checks=True)
    r = client.post(f"/api/v1/jobs/{job.id}/cancel")
    assert r.status_code == 403
    assert "CSRF" in r.json()["error"]
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED


def test_it_accepts_a_session_post_with_csrf_token(job, owner):
    client = session_client(owner, enforce_csrf_checks=True)
    client.cookies["csrftoken"] = CSRF_SECRET
    r = client.post(f"/api/v1/jobs/{job.id}/cancel", HTTP_X_CSRFTOKEN=CSRF_SECRET)
    assert r.status_code == 200 and r.json()["status"] == "cancelled"


def test_it_exempts_token_posts_from_csrf(job, owner):
    client, _ = token_client(owner, enforce_csrf_checks=True)
    client.force_login(owner)  # even with a session cookie present, the token decides
    r = client.post(f"/api/v1/jobs/{job.id}/cancel")
    assert r.status_code == 200 and r.json()["status"] == "cancelled"


@pytest.mark.parametrize("method, path, allow", [
    ("put", "/api/v1/jobs", "GET, POST"), ("post", "/api/v1/jobs/{id}", "GET, DELETE"),  # DELETE: the job's files (issue 14)
    ("get", "/api/v1/jobs/{id}/cancel", "POST"), ("post", "/api/v1/templates", "GET"),
    ("post", "/api/v1/folders", "GET"), ("post", "/api/v1/jobs/{id}/results.zip", "GET"),
])
def test_it_answers_wrong_methods_with_405(job, owner, method, path, allow):
    r = getattr(token_client(owner)[0], method)(path.format(id=job.id))
    assert r.status_code == 405
    assert r["Allow"] == allow
    assert r.json()["error"]
