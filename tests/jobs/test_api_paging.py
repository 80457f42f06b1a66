"""Keyset pages of GET /api/v1/jobs (jobs.api.paging): every job once, newest first, whatever is added
meanwhile; `previous` goes back exactly one page; a far page asks the database what the first does."""
from urllib.parse import parse_qs, urlsplit

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs.models import Job

from .api_helpers import make_job, token_client


@pytest.fixture
def api(owner):
    return token_client(owner)[0]


def _query(url: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(url).query)


def _walk(api, url: str) -> tuple[list[str], list[dict]]:
    """Follow `next` from url to the end: the ids seen in order, and every page's body."""
    ids, pages = [], []
    while url:
        body = api.get(url).json()
        pages.append(body)
        ids += [j["id"] for j in body["results"]]
        url = body["next"]
    return ids, pages


def test_next_links_are_cursors_and_reach_every_job_once_newest_first(api, owner, template):
    jobs = [make_job(owner, template, name=f"job {i}") for i in range(7)]
    ids, pages = _walk(api, "/api/v1/jobs?limit=3&status=queued")
    assert ids == [str(j.id) for j in reversed(jobs)]
    assert [len(p["results"]) for p in pages] == [3, 3, 1] and {p["count"] for p in pages} == {7}
    for body in pages[:-1]:  # a cursor and the filters, no offset
        query = _query(body["next"])
        assert "after" in query and "offset" not in query and query["status"] == ["queued"]


def test_a_job_started_while_paging_neither_shifts_nor_repeats_a_page(api, owner, template):
    jobs = [make_job(owner, template, name=f"job {i}") for i in range(6)]
    first = api.get("/api/v1/jobs?limit=2").json()
    make_job(owner, template, name="new")  # newest: before the first page, which is already read
    ids, _pages = _walk(api, first["next"])
    assert [j["id"] for j in first["results"]] + ids == [str(j.id) for j in reversed(jobs)]


def test_jobs_created_in_the_same_microsecond_are_paged_by_id(api, owner, template):
    jobs = [make_job(owner, template) for _ in range(5)]
    Job.objects.filter(pk__in=[j.pk for j in jobs]).update(created_at=timezone.now())
    ids, _pages = _walk(api, "/api/v1/jobs?limit=2")
    assert sorted(ids) == sorted(str(j.id) for j in jobs) and len(set(ids)) == 5


def test_previous_goes_back_exactly_one_page(api, owner, template):
    for i in range(7):
        make_job(owner, template, name=f"job {i}")
    first = api.get("/api/v1/jobs?limit=3").json()
    second = api.get(first["next"]).json()
    third = api.get(second["next"]).json()
    assert first["previous"] is None and third["next"] is None
    back = api.get(third["previous"]).json()
    assert [j["id"] for j in back["results"]] == [j["id"] for j in second["results"]]
    assert "before" in _query(third["previous"])
    front = api.get(back["previous"]).json()
    assert [j["id"] for j in front["results"]] == [j["id"] for j in first["results"]]
    assert front["previous"] is None and api.get(front["next"]).json()["results"] == second["results"]


def test_a_far_page_asks_the_database_no_more_than_the_first(api, owner, template):
    for _ in range(30):
        make_job(owner, template)
    with CaptureQueriesContext(connection) as first:
        body = api.get("/api/v1/jobs?limit=2").json()
    for _ in range(12):
        body = api.get(body["next"]).json()
    with CaptureQueriesContext(connection) as far:
        assert len(api.get(body["next"]).json()["results"]) == 2
    assert len(far) == len(first)
    # The page's query starts from the cursor: no OFFSET walks the rows before it.
    page_sql = [q["sql"] for q in far.captured_queries if "LIMIT" in q["sql"]]
    assert page_sql and not any("OFFSET" in sql for sql in page_sql)


def test_offset_still_pages_for_older_clients(api, owner, template):
    jobs = [make_job(owner, template) for _ in range(5)]
    body = api.get("/api/v1/jobs?limit=2&offset=2").json()
    assert [j["id"] for j in body["results"]] == [str(j.id) for j in reversed(jobs)][2:4]
    assert _query(body["next"])["offset"] == ["4"] and _query(body["previous"])["offset"] == ["0"]


@pytest.mark.parametrize("query, field", [("after=nonsense", "after"), ("before=12.not-an-id", "before"),
                                          ("after=99999999999999999999999999.x", "after"),
                                          ("after=1.x&before=1.x", "after"), ("offset=2&before=1.x", "before")])
def test_a_bad_or_mixed_cursor_is_a_clear_400(api, owner, template, query, field):
    make_job(owner, template)
    r = api.get(f"/api/v1/jobs?{query}")
    assert r.status_code == 400 and r.json()["field"] == field and r.json()["error"]


def test_the_cursor_message_reads_in_chinese_too(api, owner, template):
    make_job(owner, template)
    r = api.get("/api/v1/jobs?after=nonsense", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert r.status_code == 400 and "游标" in r.json()["error"] and "第一页" in r.json()["error"]
