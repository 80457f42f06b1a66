"""A Content-Security-Policy on every HTML page, and no page that needs inline script.

Every page a user or an admin reaches is rendered and checked: the policy header is there, its
script-src allows this site only (no 'unsafe-inline', no 'unsafe-eval'), and the HTML holds no
inline script (a <script> without src that is not a JSON data block) and no on* handler. The
browser check of the same pages (no policy violation reported) is tests/e2e/test_csp.py."""
import re

import pytest
from django.urls import reverse

from jobs.models import JobStatus

from .api_helpers import make_job

INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")[^>]*>", re.IGNORECASE)
HANDLER = re.compile(r"<[^>]+\son[a-z]+\s*=", re.IGNORECASE)


def policy(response) -> dict[str, list[str]]:
    header = response.headers.get("Content-Security-Policy", "")
    return {d.split()[0]: d.split()[1:] for d in (x.strip() for x in header.split(";")) if d}


def assert_strict_page(response, url):
    assert response.status_code in (200, 404), (url, response.status_code)
    found = policy(response)
    assert found.get("script-src") == ["'self'"], (url, found)
    assert found.get("object-src") == ["'none'"] and found.get("frame-ancestors") == ["'none'"], (url, found)
    html = response.content.decode()
    assert not INLINE_SCRIPT.search(html), (url, INLINE_SCRIPT.search(html).group(0))
    assert not HANDLER.search(html), (url, HANDLER.search(html).group(0))


@pytest.mark.django_db
def test_every_page_of_a_user_carries_the_policy(client, owner, template):
    job = make_job(owner, template, status=JobStatus.RUNNING, targets=2, tasks=1)
    anonymous = [reverse("login"), "/no-such-page/"]
    for url in anonymous:
        assert_strict_page(client.get(url), url)
    client.force_login(owner)
    pages = [reverse("job-list"), reverse("job-new"), reverse("job-detail", args=[job.id]),
             reverse("job-target", args=[job.id, 0]), reverse("usage"), reverse("folder-browse") + "?path=",
             "/no-such-page/"]
    for url in pages:
        assert_strict_page(client.get(url), url)


@pytest.mark.django_db
def test_every_admin_page_carries_the_policy(client, staff, owner, template, profile):
    job = make_job(owner, template, status=JobStatus.RUNNING, targets=1, tasks=1)
    client.force_login(staff)
    pages = ["/admin/", "/admin/jobs/job/", f"/admin/jobs/job/{job.id}/change/", "/admin/jobs/template/",
             f"/admin/jobs/template/{template.pk}/change/", "/admin/jobs/template/add/",
             f"/admin/jobs/clusterprofile/{profile.pk}/change/", "/admin/jobs/auditentry/", "/admin/jobs/quota/add/",
             "/admin/auth/user/", "/admin/jobs/usagerecord/"]
    for url in pages:
        assert_strict_page(client.get(url), url)


@pytest.mark.django_db
def test_a_jobs_files_keep_their_own_sandbox(client, owner, template, settings, tmp_path):
    from pathlib import Path

    job = make_job(owner, template, status=JobStatus.COMPLETED, targets=1)
    out = Path(settings.MEDIA_ROOT) / "users" / str(owner.pk) / "out.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("<script>alert(1)</script>")
    job.targets.update(output_file=str(out), output_name="out.html")
    client.force_login(owner)
    r = client.get(reverse("job-output", args=[job.id, 0]))
    assert r.status_code == 200 and r.headers["Content-Security-Policy"] == "sandbox; default-src 'none'"
