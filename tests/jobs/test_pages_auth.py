"""Logging in and out, and the language switcher."""
from django.conf import settings
from django.urls import reverse


def test_it_shows_the_login_page(client):
    r = client.get(reverse("login"))
    assert r.status_code == 200
    body = r.content.decode()
    assert 'name="username"' in body and 'name="password"' in body and "csrfmiddlewaretoken" in body


def test_it_logs_in_and_lands_on_the_job_list(client, owner):
    r = client.post(reverse("login"), {"username": "alice", "password": "alice-pass-123"})
    assert r.status_code == 302 and r["Location"] == reverse("job-list")
    assert client.get(reverse("job-list")).status_code == 200


def test_it_returns_to_the_page_asked_for_after_login(client, owner):
    r = client.get(reverse("job-new"))
    r = client.post(r["Location"], {"username": "alice", "password": "alice-pass-123", "next": reverse("job-new")})
    assert r["Location"] == reverse("job-new")


def test_it_refuses_a_wrong_password(client, owner):
    r = client.post(reverse("login"), {"username": "alice", "password": "nope"})
    assert r.status_code == 200 and "didn't match" in r.content.decode().replace("&#x27;", "'")


def test_it_logs_out_by_post(client, owner):
    client.force_login(owner)
    r = client.post(reverse("logout"))
    assert r.status_code == 302 and r["Location"] == reverse("login")
    assert client.get(reverse("job-list")).status_code == 302


def test_it_switches_the_language(client, owner):
    client.force_login(owner)
    body = client.get(reverse("job-list")).content.decode()
    assert 'name="language" value="zh-hans"' in body and "简体中文" in body
    r = client.post(reverse("set_language"), {"language": "zh-hans", "next": reverse("job-list")})
    assert r.status_code == 302 and r["Location"] == reverse("job-list")
    assert client.cookies[settings.LANGUAGE_COOKIE_NAME].value == "zh-hans"
    assert '<html lang="zh-hans">' in client.get(reverse("job-list")).content.decode()
