"""Downloads handed to the web server in front (django-sendfile2, settings.SENDFILE_BACKEND): with
nginx's backend the portal answers an empty response whose X-Accel-Redirect names the file under
nginx's internal location; with none set (a checkout, the tests) it streams the file itself. The
ownership checks come first either way. The real nginx does the sending in
tests/e2e/test_production_shape.py."""
from pathlib import Path

import pytest
from django.urls import reverse
from django_sendfile.utils import _get_sendfile

from tests.jobs.test_pages_results import body_of, job  # noqa: F401  (the fixture)


@pytest.fixture
def backend(settings):
    """Set SENDFILE_BACKEND (and SENDFILE_ROOT to the test's MEDIA_ROOT) for one test. The library
    caches the backend module it imported; forget it before and after."""
    def use(name):
        settings.SENDFILE_BACKEND = name
        settings.SENDFILE_ROOT = str(Path(settings.MEDIA_ROOT).resolve())
        settings.SENDFILE_URL = "/_protected_media"
        _get_sendfile.cache_clear()
    yield use
    _get_sendfile.cache_clear()


def test_behind_nginx_the_portal_names_the_file_and_sends_no_bytes(client, owner, job, backend):
    backend("django_sendfile.backends.nginx")
    client.force_login(owner)
    r = client.get(reverse("job-output", args=[job.id, 1]) + "?download=1")
    assert r.status_code == 200
    assert r["X-Accel-Redirect"].startswith("/_protected_media/")
    assert r["X-Accel-Redirect"].endswith("/outputs/%E6%96%B0%E9%83%8E.png"), r["X-Accel-Redirect"]
    assert r.content == b""  # nginx sends the file, not Python
    # ... and the answer does not promise bytes it does not carry (uvicorn would refuse it)
    assert int(r.get("Content-Length", "0")) == 0
    assert r["Content-Disposition"].startswith("attachment") and "filename*=utf-8''%E6%96%B0%E9%83%8E-swapped.png" in r[
        "Content-Disposition"]
    assert "sandbox" in r["Content-Security-Policy"]


def test_behind_nginx_ownership_is_still_checked_first(client, colleague, job, backend):
    backend("django_sendfile.backends.nginx")
    client.force_login(colleague)
    r = client.get(reverse("job-output", args=[job.id, 0]))
    assert r.status_code == 404 and "X-Accel-Redirect" not in r


def test_behind_nginx_the_uploaded_input_is_handed_over_too(client, owner, job, backend):
    backend("django_sendfile.backends.nginx")
    client.force_login(owner)
    r = client.get(reverse("job-input", args=[job.id, 0]))
    assert r.status_code == 200 and r["X-Accel-Redirect"].startswith("/_protected_media/") and r.content == b""


def test_the_simple_backend_sends_the_bytes_itself(client, owner, job, jpeg_bytes, backend):
    backend("django_sendfile.backends.simple")
    client.force_login(owner)
    r = client.get(reverse("job-output", args=[job.id, 0]))
    assert r.status_code == 200 and r.content == jpeg_bytes and "X-Accel-Redirect" not in r
    assert r["Content-Type"] == "image/jpeg" and r["Content-Disposition"].startswith("inline")


def test_without_a_backend_the_portal_streams_the_file_with_ranges(client, owner, job, jpeg_bytes, settings):
    settings.SENDFILE_BACKEND = None
    client.force_login(owner)
    r = client.get(reverse("job-output", args=[job.id, 0]), HTTP_RANGE="bytes=0-9")
    assert r.status_code == 206 and body_of(r) == jpeg_bytes[:10] and "X-Accel-Redirect" not in r
