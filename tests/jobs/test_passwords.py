"""Passwords are checked wherever one is set (AUTH_PASSWORD_VALIDATORS: like the user's details,
too short, too common, only digits): the account page, the admin, createsuperuser and seed_local.
What is refused is said in the page's language (Django's own words, in Chinese too)."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

COMMON = "12345678"
#: the validators' words, as Django ships them
EN = ("This password is too common.", "This password is entirely numeric.")
ZH = ("这个密码太常见了。", "密码只包含数字。")


def logged_in(user, language: str = "en") -> Client:
    client = Client(HTTP_ACCEPT_LANGUAGE=language)
    client.force_login(user)
    return client


@pytest.mark.parametrize("language, words", [("en", EN), ("zh-hans", ZH)])
def test_the_account_page_refuses_a_common_numeric_password(owner, language, words):
    r = logged_in(owner, language).post(reverse("password-change"), {
        "old_password": "alice-pass-123", "new_password1": COMMON, "new_password2": COMMON})
    body = r.content.decode()
    assert r.status_code == 200 and all(w in body for w in words), body
    assert User.objects.get(pk=owner.pk).check_password("alice-pass-123")


def test_the_account_page_refuses_a_password_like_the_users_email(owner):
    r = logged_in(owner).post(reverse("password-change"), {
        "old_password": "alice-pass-123", "new_password1": "alice@example", "new_password2": "alice@example"})
    assert "The password is too similar to the email address." in r.content.decode()
    assert User.objects.get(pk=owner.pk).check_password("alice-pass-123")


@pytest.mark.parametrize("language, words", [("en", EN), ("zh-hans", ZH)])
def test_the_admin_refuses_it_for_a_new_user_and_a_new_password(staff, owner, language, words):
    admin = logged_in(staff, language)
    r = admin.post("/admin/auth/user/add/", {"username": "carol", "usable_password": "true",
                                             "password1": COMMON, "password2": COMMON})
    assert r.status_code == 200 and all(w in r.content.decode() for w in words)
    assert not User.objects.filter(username="carol").exists()
    r = admin.post(f"/admin/auth/user/{owner.pk}/password/", {"usable_password": "true",
                                                             "password1": COMMON, "password2": COMMON})
    assert r.status_code == 200 and all(w in r.content.decode() for w in words)
    assert User.objects.get(pk=owner.pk).check_password("alice-pass-123")


def test_seed_local_refuses_it_as_the_demo_password_before_writing_anything(db):
    with pytest.raises(CommandError) as refused:
        call_command("seed_local", "--demo-password", COMMON)
    assert all(w in str(refused.value) for w in EN)
    assert not User.objects.exists()


def test_createsuperuser_without_a_terminal_refuses_it(db, monkeypatch):
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", COMMON)
    with pytest.raises(CommandError) as refused:
        call_command("createsuperuser", interactive=False, username="admin", email="admin@example.org")
    assert all(w in str(refused.value) for w in EN)
    assert not User.objects.exists()
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "Quiet-harbour-42")
    call_command("createsuperuser", interactive=False, username="admin", email="admin@example.org", verbosity=0)
    assert User.objects.get(username="admin").check_password("Quiet-harbour-42")
