"""Who may see a job in the admin: its metadata with `view_job`, its face files only with
`jobs.see_faces` too (superusers hold it), each opening audited (jobs/access.py, docs/security.md
"Who sees whose work"). The same five callers and the same owner's work as test_access_matrix.py,
which covers every other endpoint and the live sockets."""
from __future__ import annotations

import uuid

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from jobs.models import AuditEntry

from .test_access_matrix import (  # noqa: F401 - fixtures
    CALLERS,
    JOB_NAME,
    _no_outside_world,
    body_of,
    callers,
    client_of,
    world,
)

# ---- the admin: metadata with view_job; face files with jobs.see_faces, audited -----------------

ADMIN_FILES = [("source", 0), ("reference", 0), ("input", 0), ("output", 0), ("zip", 0)]


def face_url(job, kind, n) -> str:
    return reverse("admin:jobs_job_face_file", args=[job.id, kind, n])


@pytest.mark.parametrize("who", CALLERS)
def test_the_admin_shows_a_job_and_links_its_faces_only_with_the_permission(who, callers, world):
    r = client_of(callers[who]).get(reverse("admin:jobs_job_change", args=[world.job.id]))
    if not callers[who].is_staff:  # the owner, a stranger, team members and leads: the admin's login page
        assert r.status_code == 302 and "/admin/login/" in r["Location"]
        return
    body = body_of(r)
    assert r.status_code == 200 and JOB_NAME in body and "bride.jpg" in body  # the metadata, for all staff
    links = [face_url(world.job, kind, n) for kind, n in ADMIN_FILES]
    if who == "viewer":
        assert not any(link in body for link in links)
        assert "/faces/" not in body and "reference.jpg" not in body and "/media-not-served/" not in body
    else:
        assert all(link in body for link in links), [link for link in links if link not in body]


@pytest.mark.parametrize("who", CALLERS)
@pytest.mark.parametrize("kind, n", ADMIN_FILES)
def test_a_face_file_opens_in_the_admin_only_with_the_permission_and_is_audited(kind, n, who, callers, world,
                                                                                 jpeg_bytes):
    user = callers[who]
    r = client_of(user).get(face_url(world.job, kind, n))
    opened = AuditEntry.objects.filter(action="job.face_file")
    if not user.is_staff:  # a team lead too: leads work in the team page, never the admin
        assert r.status_code == 302 and "/admin/login/" in r["Location"]
    elif who == "viewer":
        assert r.status_code == 403
    else:
        body = b"".join(r.streaming_content) if r.streaming else r.content
        assert r.status_code == 200 and (body == jpeg_bytes or kind == "zip")
        (entry,) = opened
        assert (entry.actor, entry.target_id, entry.details["file"], entry.details["owner"]) == (
            user, str(world.job.id), kind, "alice")
        return
    assert not opened.exists()


def test_a_face_file_needs_the_view_permission_on_jobs_too(world):
    faces_only = User.objects.create_user("faces-only", "f@example.org", "faces-only-pass-123", is_staff=True)
    faces_only.user_permissions.set(Permission.objects.filter(content_type__app_label="jobs", codename="see_faces"))
    assert client_of(faces_only).get(face_url(world.job, "source", 0)).status_code == 403
    assert not AuditEntry.objects.filter(action="job.face_file").exists()


def test_a_missing_face_file_is_not_found_and_not_audited(callers, world):
    client = client_of(callers["superuser"])
    for url in (face_url(world.job, "source", 5), face_url(world.job, "output", 1), face_url(world.job, "nothing", 0),
                reverse("admin:jobs_job_face_file", args=[uuid.uuid4(), "source", 0])):
        assert client.get(url).status_code == 404, url
    assert not AuditEntry.objects.filter(action="job.face_file").exists()
