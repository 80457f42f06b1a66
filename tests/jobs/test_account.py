"""The account page (/account): a new email address through a link, the language, the emails, the password.

The RQ seam (`jobs.background.enqueue.queue`) is replaced by a queue that runs each task at once, so the emails
of an address change land in Django's test outbox (locmem) exactly as the worker would send them.
"""
import re
from importlib import import_module

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.test import Client
from django.urls import reverse

from jobs.models import AuditEntry
from jobs.models.preferences import LanguagePreference
from jobs.usage import notifications


class RunAtOnce:
    """Stands in for the RQ queue: runs each enqueued task by its dotted path, right away."""

    def __init__(self):
        self.calls = []

    def enqueue(self, func: str, *args, **options):
        self.calls.append((func, args))
        module, _, name = func.rpartition(".")
        getattr(import_module(module), name)(*args)


@pytest.fixture
def queue(monkeypatch, settings):
    settings.SITE_URL = "https://portal.example.org"
    q = RunAtOnce()
    monkeypatch.setattr("jobs.background.enqueue.queue", lambda: q)
    return q


def link_in(message) -> str:
    """The confirmation link of an email, as a path."""
    url = re.search(r"https://portal\.example\.org(/account/email/\S+)", message.body).group(1)
    return url


def ask_for(client, email: str, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        return client.post(reverse("account-email"), {"email": email})


# ---- the page -------------------------------------------------------------------------------------

def test_it_needs_a_login(client):
    r = client.get(reverse("account"))
    assert r.status_code == 302 and "/login/" in r["Location"]


def test_the_users_name_in_the_nav_leads_to_it(client, owner):
    client.force_login(owner)
    body = client.get(reverse("job-list")).content.decode()
    assert re.search(rf'<a class="who" href="{reverse("account")}"[^>]*>alice</a>', body)
    page = client.get(reverse("account")).content.decode()
    assert "alice@example.org" in page and 'name="email"' in page and 'name="language"' in page
    assert 'name="job_emails"' in page and f'href="{reverse("password-change")}"' in page


# ---- a new email address ----------------------------------------------------------------------

def test_a_new_address_is_used_only_once_its_link_is_confirmed(client, owner, queue, django_capture_on_commit_callbacks):
    client.force_login(owner)
    r = ask_for(client, "alice@new.example.org", django_capture_on_commit_callbacks)
    assert r.status_code == 302
    owner.refresh_from_db()
    assert owner.email == "alice@example.org"  # not yet
    [sent] = mail.outbox
    assert sent.to == ["alice@new.example.org"] and "Confirm your new email address" in sent.subject
    link = link_in(sent)
    assert "within" in client.get(reverse("account")).content.decode()  # "We sent a link to …"

    page = client.get(link)  # opening the link asks; a mail scanner's GET changes nothing
    assert page.status_code == 200 and "alice@new.example.org" in page.content.decode()
    owner.refresh_from_db()
    assert owner.email == "alice@example.org"

    with django_capture_on_commit_callbacks(execute=True):
        r = client.post(link)
    assert r.status_code == 302
    owner.refresh_from_db()
    assert owner.email == "alice@new.example.org"
    notice = mail.outbox[-1]
    assert notice.to == ["alice@example.org"] and "alice@new.example.org" in notice.body  # the old address is told
    assert AuditEntry.objects.filter(action="account.email_change", actor=owner).exists()
    assert "alice@new.example.org" in client.get(reverse("account")).content.decode()


def test_a_link_works_once(client, owner, queue, django_capture_on_commit_callbacks):
    client.force_login(owner)
    ask_for(client, "alice@new.example.org", django_capture_on_commit_callbacks)
    link = link_in(mail.outbox[0])
    client.post(link)
    owner.refresh_from_db()
    owner.email = "alice@third.example.org"
    owner.save()
    r = client.post(link, follow=True)
    owner.refresh_from_db()
    assert owner.email == "alice@third.example.org"
    assert "already used" in r.content.decode()


def test_a_link_is_only_for_the_logged_in_owner(client, owner, colleague, queue, django_capture_on_commit_callbacks):
    client.force_login(owner)
    ask_for(client, "alice@new.example.org", django_capture_on_commit_callbacks)
    link = link_in(mail.outbox[0])

    anonymous = Client()
    r = anonymous.post(link)
    assert r.status_code == 302 and "/login/" in r["Location"]

    other = Client()
    other.force_login(colleague)
    r = other.post(link, follow=True)
    assert "another account" in r.content.decode()
    owner.refresh_from_db()
    colleague.refresh_from_db()
    assert (owner.email, colleague.email) == ("alice@example.org", "bob@example.org")


def test_a_changed_or_expired_link_is_refused(client, owner, queue, monkeypatch, django_capture_on_commit_callbacks):
    client.force_login(owner)
    ask_for(client, "alice@new.example.org", django_capture_on_commit_callbacks)
    link = link_in(mail.outbox[0])
    r = client.post(link[:-3] + "abc", follow=True)
    assert "not valid" in r.content.decode()
    monkeypatch.setattr(notifications, "EMAIL_CHANGE_MAX_AGE", -1)
    r = client.post(link, follow=True)
    assert "expired" in r.content.decode()
    owner.refresh_from_db()
    assert owner.email == "alice@example.org"


@pytest.mark.parametrize("email, error", [
    ("bob@example.org", "Another account uses that address"),
    ("BOB@example.org", "Another account uses that address"),
    ("alice@example.org", "already your email address"),
    ("not an address", "valid email address"),
])
def test_it_refuses_an_address_it_cannot_use(client, owner, colleague, queue, email, error):
    client.force_login(owner)
    r = client.post(reverse("account-email"), {"email": email})
    assert r.status_code == 400 and error in r.content.decode()
    assert mail.outbox == [] and queue.calls == []


# ---- language -------------------------------------------------------------------------------------

def lang_of(response) -> str:
    return re.search(r'<html lang="([^"]+)"', response.content.decode()).group(1)


def test_someone_who_never_chose_gets_their_browsers_language(client, owner):
    assert lang_of(client.get(reverse("login"), HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9,en;q=0.5")) == "zh-hans"
    assert lang_of(client.get(reverse("login"), HTTP_ACCEPT_LANGUAGE="en-US,en;q=0.9")) == "en"
    client.force_login(owner)
    assert lang_of(client.get(reverse("job-list"), HTTP_ACCEPT_LANGUAGE="zh-CN")) == "zh-hans"
    assert lang_of(client.get(reverse("job-list"), HTTP_ACCEPT_LANGUAGE="en-GB")) == "en"


def test_a_chosen_language_wins_over_the_browser_and_is_applied_at_login(client, owner):
    client.force_login(owner)
    r = client.post(reverse("account-language"), {"language": "en"}, HTTP_ACCEPT_LANGUAGE="zh-CN")
    assert r.status_code == 302
    assert LanguagePreference.language_of(owner) == "en"
    assert lang_of(client.get(reverse("job-list"), HTTP_ACCEPT_LANGUAGE="zh-CN")) == "en"

    elsewhere = Client(HTTP_ACCEPT_LANGUAGE="zh-CN")  # another browser, no cookie: the login brings the choice
    assert lang_of(elsewhere.get(reverse("login"))) == "zh-hans"
    elsewhere.post(reverse("login"), {"username": "alice", "password": "alice-pass-123"})
    assert lang_of(elsewhere.get(reverse("job-list"))) == "en"


def test_following_the_browser_again_lets_it_decide(client, owner):
    LanguagePreference.choose(owner, "en")
    client.force_login(owner)
    assert lang_of(client.get(reverse("account"), HTTP_ACCEPT_LANGUAGE="zh-CN")) == "en"
    r = client.post(reverse("account-language"), {"language": ""}, HTTP_ACCEPT_LANGUAGE="zh-CN")
    assert r.cookies["django_language"].value == ""  # the cookie is removed, not set
    assert LanguagePreference.language_of(owner) == ""
    assert lang_of(client.get(reverse("account"), HTTP_ACCEPT_LANGUAGE="zh-CN")) == "zh-hans"
    assert lang_of(client.get(reverse("account"), HTTP_ACCEPT_LANGUAGE="en")) == "en"


def test_the_switch_in_the_nav_is_remembered_for_the_user(client, owner):
    client.force_login(owner)
    r = client.post(reverse("set_language"), {"language": "zh-hans", "next": reverse("usage")})
    assert r.status_code == 302 and r["Location"] == reverse("usage")
    assert LanguagePreference.language_of(owner) == "zh-hans"
    elsewhere = Client(HTTP_ACCEPT_LANGUAGE="en-US")
    elsewhere.force_login(owner)
    assert lang_of(elsewhere.get(reverse("job-list"))) == "zh-hans"


def test_the_switch_still_works_for_someone_not_logged_in(client, db):
    client.post(reverse("set_language"), {"language": "zh-hans", "next": "/login/"})
    assert lang_of(client.get(reverse("login"), HTTP_ACCEPT_LANGUAGE="en")) == "zh-hans"
    assert not LanguagePreference.objects.exists()


def test_an_unknown_language_is_refused(client, owner):
    client.force_login(owner)
    r = client.post(reverse("account-language"), {"language": "xx"})
    assert r.status_code == 400
    assert not LanguagePreference.objects.exists()


# ---- password and login help ------------------------------------------------------------------

def test_the_password_can_be_changed_with_the_current_one(client, owner):
    client.force_login(owner)
    assert client.get(reverse("password-change")).status_code == 200
    r = client.post(reverse("password-change"), {"old_password": "wrong", "new_password1": "n3w-Secret-pass",
                                                 "new_password2": "n3w-Secret-pass"})
    assert r.status_code == 200 and "incorrectly" in r.content.decode()
    r = client.post(reverse("password-change"), {"old_password": "alice-pass-123", "new_password1": "n3w-Secret-pass",
                                                 "new_password2": "n3w-Secret-pass"}, follow=True)
    assert r.redirect_chain[-1][0] == reverse("account") and "Your password is changed." in r.content.decode()
    assert User.objects.get(pk=owner.pk).check_password("n3w-Secret-pass")


def test_the_login_page_says_where_an_account_comes_from(client):
    body = client.get(reverse("login"), HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "Use the account your team lead gave you." in body and "Forgot your password? Ask your admin." in body


def test_links_are_limited_per_hour(client, owner, queue, django_capture_on_commit_callbacks):
    client.force_login(owner)
    from jobs.web.views.account import LINKS_PER_HOUR

    for i in range(LINKS_PER_HOUR):
        assert ask_for(client, f"alice{i}@new.example.org", django_capture_on_commit_callbacks).status_code == 302
    r = ask_for(client, "alice-again@new.example.org", django_capture_on_commit_callbacks)
    assert r.status_code == 429 and "Too many links" in r.content.decode()
    assert len(mail.outbox) == LINKS_PER_HOUR
