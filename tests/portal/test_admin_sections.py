"""The admin's front page: tables in sections an admin can find, in both languages, none lost."""
from __future__ import annotations

import re

import pytest
from django.contrib import admin
from django.contrib.auth.models import Permission, User

from portal.admin_site import SECTIONS


def headings(html: str) -> list[str]:
    return re.findall(r'<caption>\s*<a href="#[a-z]+" class="section"[^>]*>([^<]+)</a>', html)


@pytest.fixture
def superuser(db):
    return User.objects.create_superuser("boss", "boss@example.org", "boss-pass-123456")


@pytest.mark.parametrize("language, first, last", [
    ("en", "People and limits", "For site engineers"),
    ("zh-hans", "用户与限额", "运维工程师专用"),
])
def test_the_front_page_shows_sections_in_the_admins_language(client, superuser, language, first, last):
    client.force_login(superuser)
    html = client.get("/admin/", HTTP_ACCEPT_LANGUAGE=language).content.decode()
    found = headings(html)
    assert found[0] == first and found[-1] == last, found
    assert len(found) == len(SECTIONS)
    # Django's own app names ("Axes", "Django-RQ", "Jobs") are no longer headings
    assert not {"Axes", "Django-RQ", "Jobs", "Django RQ"} & set(found)


def test_every_registered_table_is_on_the_front_page_once(client, superuser):
    client.force_login(superuser)
    html = client.get("/admin/").content.decode()
    rows = re.findall(r'<th scope="row" id="[a-z]+-([a-z]+)">\s*<a href="/admin/([a-z_]+)/\1/"', html)
    shown = [f"{app}.{model}" for model, app in rows]
    registered = {f"{m._meta.app_label}.{m._meta.model_name}" for m in admin.site._registry}  # Django keeps what it shows here
    assert sorted(shown) == sorted(registered)


def test_the_libraries_tables_come_last_under_site_engineers(client, superuser):
    client.force_login(superuser)
    html = client.get("/admin/").content.decode()
    engineers = html.split('href="#engineers"')[1]
    for table in ("/admin/axes/accessattempt/", "/admin/jobs/apitoken/"):
        assert table in engineers
    assert "/admin/jobs/template/" not in engineers


def test_a_view_only_admin_sees_only_the_sections_of_their_tables(client, db):
    clerk = User.objects.create_user("clerk", "clerk@example.org", "clerk-pass-123456", is_staff=True)
    clerk.user_permissions.add(Permission.objects.get(codename="view_auditentry"))
    client.force_login(clerk)
    found = headings(client.get("/admin/").content.decode())
    assert found == ["Records"]


def test_an_apps_own_page_keeps_its_list(client, superuser):
    client.force_login(superuser)
    r = client.get("/admin/jobs/")
    assert r.status_code == 200 and "/admin/jobs/template/" in r.content.decode()


def test_every_table_is_named_in_chinese_for_a_chinese_admin(client, superuser):
    """The portal's tables and the libraries' (login lockouts) alike; the queue dashboard keeps its
    product name."""
    client.force_login(superuser)
    html = client.get("/admin/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    names = re.findall(r'<th scope="row" id="[a-z]+-[a-z]+">\s*<a href="[^"]+">([^<]+)</a>', html)
    english = [n for n in names if n.isascii() and n != "Django-RQ"]
    assert names and not english, english
