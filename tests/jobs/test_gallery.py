"""Results worth looking at: a target's page (slider frame, previous/next, alt texts, the faces
used), download names that say what they are, byte ranges for seeking videos, and each job's first
result in the job list. The browser side: tests/jobs/test_browser_gallery.py."""
import io
import re
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import path, reverse

from jobs.models import Job, JobStatus, Source, Target, TargetStatus
from jobs.results.files import byte_range, download_name, stream_results_zip
from jobs.web.urls import urlpatterns as portal_urlpatterns
from jobs.web.views.results import neighbours


def body_of(response) -> bytes:
    return b"".join(response.streaming_content)


def make_job(owner, template, n=0, **fields):
    job = Job.objects.create(owner=owner, template=template, template_snapshot=template.snapshot().to_json(),
                             cluster=template.cluster, status=JobStatus.COMPLETED, total=n, done=n, **fields)
    (job.media_dir / "outputs").mkdir(parents=True)
    (job.media_dir / "thumbs").mkdir(parents=True)
    return job


def add_result(job, index, name, data=b"result bytes", thumb=True, upload=None, status=TargetStatus.DONE):
    """A target with a fetched output (named as the worker names it) and, if asked, a thumbnail."""
    out = name.rsplit("/", 1)[-1]
    (job.media_dir / "outputs" / out).write_bytes(data)
    fields = {"output_file": str(job.media_dir / "outputs" / out)}
    if thumb:
        (job.media_dir / "thumbs" / out).write_bytes(b"thumb")
        fields["thumbnail_file"] = str(job.media_dir / "thumbs" / out)
    if upload is not None:
        fields["upload"] = SimpleUploadedFile(out, upload)
    return Target.objects.create(job=job, index=index, name=name, output_name=out, status=status, **fields)


@pytest.fixture
def job(owner, template, jpeg_bytes):
    """Three photos: the middle one named in Chinese, the last one still waiting."""
    job = make_job(owner, template, 3, name="Beach day")
    add_result(job, 0, "shoot/beach.jpg", jpeg_bytes, upload=jpeg_bytes)
    add_result(job, 1, "shoot/新郎.png", b"png bytes")
    Target.objects.create(job=job, index=2, name="shoot/late.jpg", output_name="late.jpg")
    return job


# ---- the target page ----

@pytest.mark.parametrize("who,status", [("owner", 200), ("colleague", 404), ("stranger", 404), ("staff", 404)])
def test_it_shows_a_target_only_to_its_owner(client, request, job, who, status):
    client.force_login(request.getfixturevalue(who))
    assert client.get(reverse("job-target", args=[job.id, 0])).status_code == status


def test_it_offers_the_slider_over_before_and_after_with_describing_alt_texts(client, owner, job):
    client.force_login(owner)
    body = client.get(reverse("job-target", args=[job.id, 0])).content.decode()
    assert 'data-compare="true"' in body and 'role="slider"' in body
    assert 'alt="Photo 1 before the swap: shoot/beach.jpg"' in body
    assert 'alt="Photo 1 after the swap: shoot/beach.jpg"' in body
    for label in ("Slider", "Side by side", "Fit", "100&nbsp;%", "200&nbsp;%"):
        assert label in body
    assert 'src="/static/js/gallery/main.js"' in body and "gallery.css" in body


def test_it_offers_no_slider_without_both_pictures(client, owner, job):
    """The second photo came from a folder the portal cannot see: the result alone, no divider."""
    client.force_login(owner)
    body = client.get(reverse("job-target", args=[job.id, 1])).content.decode()
    assert 'data-compare="true"' not in body and 'role="slider"' not in body
    assert "The original stays on the cluster" in body and 'alt="Photo 2 after the swap: shoot/新郎.png"' in body


def test_it_goes_to_the_previous_and_next_target_and_says_where_it_is(client, owner, job):
    client.force_login(owner)
    body = client.get(reverse("job-target", args=[job.id, 1])).content.decode()
    assert "2 of 3" in body
    assert f'href="{reverse("job-target", args=[job.id, 0])}"' in body
    assert f'href="{reverse("job-target", args=[job.id, 2])}"' in body
    first = client.get(reverse("job-target", args=[job.id, 0])).content.decode()
    assert "1 of 3" in first and 'id="gallery-prev"' not in first and 'id="gallery-next"' in first
    last = client.get(reverse("job-target", args=[job.id, 2])).content.decode()
    assert "3 of 3" in last and 'id="gallery-next"' not in last and 'id="gallery-prev"' in last


def test_it_finds_neighbours_in_a_big_job_with_one_query_each_way(owner, template):
    job = make_job(owner, template, 20_000)
    Target.objects.bulk_create([Target(job=job, index=i, name=f"{i}.jpg", output_name=f"{i}.jpg") for i in range(20_000)],
                               batch_size=2000)
    target = Target.objects.select_related("job").get(job=job, index=12_345)
    with CaptureQueriesContext(connection) as queries:
        found = neighbours(target)
    assert found == {"previous_index": 12_344, "next_index": 12_346, "position": 12_346, "count": 20_000}
    assert len(queries) == 2
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("ANALYZE jobs_target")  # the planner's statistics, as autovacuum would make them
        for q in queries:
            if connection.vendor == "postgresql":
                cursor.execute("EXPLAIN " + q["sql"])
                plan = " ".join(row[0] for row in cursor.fetchall())
                assert "Index" in plan and "Seq Scan on jobs_target" not in plan, plan
            else:
                cursor.execute("EXPLAIN QUERY PLAN " + q["sql"])
                plan = " ".join(str(row) for row in cursor.fetchall())
                assert "USING" in plan and "INDEX" in plan and "SCAN jobs_target" not in plan, plan


def test_it_skips_no_target_and_steps_over_a_gap(owner, template):
    job = make_job(owner, template, 3)
    for i in (0, 1, 5):
        Target.objects.create(job=job, index=i, name=f"{i}.jpg", output_name=f"{i}.jpg")
    middle = Target.objects.select_related("job").get(job=job, index=1)
    assert (neighbours(middle)["previous_index"], neighbours(middle)["next_index"]) == (0, 5)


def test_it_shows_the_faces_used_when_the_portal_serves_them(client, owner, job, settings):
    Source.objects.create(job=job, file="users/x/face.jpg", original_name="anna.jpg")
    client.force_login(owner)
    settings.ROOT_URLCONF = __name__  # this module's urls: the portal's plus a job-source page
    body = client.get(reverse("job-target", args=[job.id, 0])).content.decode()
    assert 'alt="Face photo used: anna.jpg"' in body and f'src="/jobs/{job.id}/sources/0"' in body


def _source_page(request, job_id, n):  # pragma: no cover - only reversed, never requested
    raise AssertionError


urlpatterns = [*[p for p in portal_urlpatterns if getattr(p, "name", "") != "job-source"],
               path("jobs/<uuid:job_id>/sources/<int:n>", _source_page, name="job-source")]


# ---- download names ----

@pytest.mark.parametrize("name,output,expected", [
    ("shoot/beach.jpg", "beach.jpg", "beach-swapped.jpg"),
    ("clips/party.webm", "party.mp4", "party-swapped.mp4"),  # the output's own extension
    ("婚礼/新娘.png", "新娘.png", "新娘-swapped.png"),
    ("a.b.c.jpeg", "a.b.c.jpeg", "a.b.c-swapped.jpeg"),
])
def test_it_names_a_result_after_the_original(name, output, expected):
    assert download_name(Target(name=name, output_name=output)) == expected


def test_it_cuts_a_long_name_but_keeps_the_swapped_suffix():
    name = download_name(Target(name="长" * 200 + ".jpg", output_name="x.jpg"))
    assert name.endswith("长-swapped.jpg") and len(name.encode()) <= 180


def test_it_downloads_a_result_under_its_swapped_name_in_rfc_6266(client, owner, job):
    client.force_login(owner)
    r = client.get(reverse("job-output", args=[job.id, 0]) + "?download=1")
    body_of(r)
    assert r["Content-Disposition"] == 'attachment; filename="beach-swapped.jpg"'
    r = client.get(reverse("job-output", args=[job.id, 1]) + "?download=1")
    body_of(r)
    assert r["Content-Disposition"] == "attachment; filename*=utf-8''%E6%96%B0%E9%83%8E-swapped.png"
    page = client.get(reverse("job-target", args=[job.id, 0])).content.decode()
    assert 'download="beach-swapped.jpg"' in page


def test_it_never_puts_two_results_under_one_name_in_the_zip(owner, template):
    """Two folders with a beach.jpg, and a BEACH.JPG that is the same file once unzipped on Windows."""
    job = make_job(owner, template, 4)
    add_result(job, 0, "day1/beach.jpg", b"one")
    (job.media_dir / "outputs" / "beach-2.jpg").write_bytes(b"two")
    Target.objects.create(job=job, index=1, name="day2/beach.jpg", output_name="beach-2.jpg", status=TargetStatus.DONE,
                          output_file=str(job.media_dir / "outputs" / "beach-2.jpg"))
    add_result(job, 2, "day3/BEACH.JPG", b"three")
    add_result(job, 3, "beach-swapped-2.jpg", b"four")
    with zipfile.ZipFile(io.BytesIO(body_of(stream_results_zip(job)))) as zf:
        names = zf.namelist()
        assert [zf.read(n) for n in names] == [b"one", b"two", b"three", b"four"]
    assert len({n.casefold() for n in names}) == 4
    assert names[:2] == ["beach-swapped.jpg", "beach-swapped-2.jpg"]


# ---- byte ranges: seeking a video ----

@pytest.mark.parametrize("header,expected", [
    ("", None), ("bytes=0-99", (0, 100)), ("bytes=100-", (100, 900)), ("bytes=-100", (900, 100)),
    ("bytes=990-5000", (990, 10)), ("bytes=1000-", "unsatisfiable"), ("bytes=0-1,5-9", None), ("items=0-1", None),
    ("bytes=50-10", None),
])
def test_it_reads_a_range_header(header, expected):
    assert byte_range(header, 1000) == expected


def test_it_serves_the_part_of_a_video_a_browser_asks_for(client, owner, template):
    job = make_job(owner, template, 1)
    data = bytes(range(256)) * 40
    add_result(job, 0, "clip.mp4", data, thumb=False)
    client.force_login(owner)
    url = reverse("job-output", args=[job.id, 0])
    r = client.get(url, HTTP_RANGE="bytes=1000-1999")
    assert r.status_code == 206 and body_of(r) == data[1000:2000]
    assert r["Content-Range"] == f"bytes 1000-1999/{len(data)}" and r["Content-Length"] == "1000"
    assert r["Content-Type"] == "video/mp4"
    r = client.get(url)
    assert r.status_code == 200 and r["Accept-Ranges"] == "bytes" and body_of(r) == data
    r = client.get(url, HTTP_RANGE=f"bytes={len(data)}-")
    assert r.status_code == 416 and r["Content-Range"] == f"bytes */{len(data)}"


# ---- the job list ----

def test_it_shows_each_jobs_first_result_or_a_placeholder(client, owner, template, job):
    waiting = make_job(owner, template, 1, name="Not yet")
    Target.objects.create(job=waiting, index=0, name="a.jpg", output_name="a.jpg")
    failed_first = make_job(owner, template, 2, name="Second is first")
    Target.objects.create(job=failed_first, index=0, name="a.jpg", output_name="a.jpg", status=TargetStatus.FAILED)
    add_result(failed_first, 1, "b.jpg")
    client.force_login(owner)
    body = client.get(reverse("job-list")).content.decode()
    assert f'src="{reverse("job-thumb", args=[job.id, 0])}"' in body and 'alt="First result of Beach day"' in body
    assert f'src="{reverse("job-thumb", args=[failed_first.id, 1])}"' in body
    row = re.search(rf'<tr data-job-id="{waiting.id}".*?</tr>', body, re.S).group(0)
    assert "job-thumb-none" in row and "<img" not in row


def test_it_finds_the_first_results_of_a_page_in_one_query(client, owner, template):
    def queries_for_list():
        with CaptureQueriesContext(connection) as queries:
            assert client.get(reverse("job-list")).status_code == 200
        return len(queries)

    client.force_login(owner)
    for i in range(2):
        add_result(make_job(owner, template, 1), 0, f"{i}.jpg")
    queries_for_list()  # the first request of a session asks a few things once
    few = queries_for_list()
    for i in range(6):
        add_result(make_job(owner, template, 1), 0, f"{i}.jpg")
    assert queries_for_list() == few


def test_it_names_the_column_of_every_cell_for_the_phone_layout(client, owner, job):
    for user, columns in ((owner, 6),):
        client.force_login(user)
        body = client.get(reverse("job-list")).content.decode()
        assert re.search(r'<table class="[^"]*\bstack\b', body)
        cells = re.findall(r"<td\b[^>]*>", body)
        assert len(cells) == columns and all("data-label=" in td for td in cells), cells
        assert 'data-label="Progress"' in body and 'data-label="Preview"' in body
