"""manage.py create_api_token <username>."""
import io

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from jobs.models import ApiToken


def test_it_prints_only_a_key_that_authenticates(owner):
    out = io.StringIO()
    call_command("create_api_token", "alice", stdout=out)
    key = out.getvalue().strip()
    assert out.getvalue() == key + "\n" and " " not in key and len(key) >= 40
    assert ApiToken.objects.get(user=owner).key_hash == ApiToken.hash(key)  # only the hash is stored
    r = Client(HTTP_AUTHORIZATION=f"Token {key}").get("/api/v1/jobs")
    assert r.status_code == 200


def test_it_issues_a_new_key_each_time(owner):
    keys = set()
    for _ in range(2):
        out = io.StringIO()
        call_command("create_api_token", "alice", stdout=out)
        keys.add(out.getvalue().strip())
    assert len(keys) == 2


def test_it_refuses_an_unknown_user(db):
    with pytest.raises(CommandError, match="No user named 'nobody'"):
        call_command("create_api_token", "nobody", stdout=io.StringIO())


def test_it_refuses_an_inactive_user(owner):
    owner.is_active = False
    owner.save()
    with pytest.raises(CommandError, match="inactive"):
        call_command("create_api_token", "alice", stdout=io.StringIO())
    assert not ApiToken.objects.exists()
