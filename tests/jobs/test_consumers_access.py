"""Who may open a live-status socket (jobs/live/consumers.py), from where, and for how long,
through the real ASGI `application` as in test_consumers.py: only the owner reaches a job's
socket (others, and a missing job, get "not found"); no one anonymous; only the site's own
origin; a superuser's list holds only their own jobs; a logout, an ended session or a password
change closes the sockets of that login."""
from __future__ import annotations

import uuid

import pytest
from django.test import Client

from jobs.live.consumers import CLOSE_NOT_FOUND, CLOSE_UNAUTHENTICATED
from portal.asgi import application

from .test_consumers import (  # noqa: F401 - fixtures (_own_layer_prefix: autouse) and helpers
    Communicator,
    _own_layer_prefix,
    connect,
    db,
    headers,
    job,
    open_socket,
    publish,
    refusal_code,
    run_async,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(params=["colleague", "stranger", "staff"])
def not_owner(request):
    """Users who may not see the owner's job: a team mate (teams share nothing), a stranger, and a
    superuser (the flags grant nothing outside the admin: jobs.access)."""
    return request.getfixturevalue(request.param)


@run_async
async def test_it_refuses_other_users_with_not_found(not_owner, job):
    assert await refusal_code(f"/ws/jobs/{job.id}/", not_owner) == CLOSE_NOT_FOUND


@run_async
async def test_it_answers_a_missing_job_like_a_hidden_one(owner):
    assert await refusal_code(f"/ws/jobs/{uuid.uuid4()}/", owner) == CLOSE_NOT_FOUND


@run_async
async def test_it_refuses_anonymous_users(job):
    assert await refusal_code(f"/ws/jobs/{job.id}/") == CLOSE_UNAUTHENTICATED
    assert await refusal_code("/ws/jobs/") == CLOSE_UNAUTHENTICATED


@pytest.mark.parametrize("origin", ["http://evil.example", None, "http://127.0.0.1:9999", "https://127.0.0.1:8000",
                                    "http://127.0.0.1", "http://127.0.0.1:8000/path", "null"],
                         ids=["foreign", "missing", "other-port", "other-scheme", "default-port", "with-path", "null"])
@run_async
async def test_it_refuses_a_foreign_or_missing_origin_even_with_a_session(origin, owner, job):
    # Cross-site WebSocket hijacking: another site's page opening a socket with the owner's cookie.
    comm = await open_socket(f"/ws/jobs/{job.id}/", owner, origin=origin)
    connected, _ = await comm.connect()
    assert not connected
    await comm.disconnect()


@run_async
async def test_it_gives_a_superuser_only_their_own_list_and_feed(staff, job):
    comm = await connect("/ws/jobs/", staff)
    snap = await comm.receive_json_from()
    assert snap["jobs"] == []  # the owner's job is not theirs (jobs.access)
    assert await db(publish)(lambda pub: pub.job(job)) == 2
    assert await comm.receive_nothing()
    await comm.send_json_to({"type": "resync"})
    assert (await comm.receive_json_from())["jobs"] == []
    await comm.disconnect()


def logged_in_browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("path", ["/ws/jobs/{id}/", "/ws/jobs/"])
@run_async
async def test_a_logout_closes_the_sockets_of_that_login(owner, job, path):
    browser = await db(logged_in_browser)(owner)
    other_login = await connect(path.format(id=job.id), owner)  # another browser of the same user
    await other_login.receive_json_from()
    comm = Communicator(application, path.format(id=job.id),
                        headers=await db(headers)(owner, client=browser))
    assert (await comm.connect())[0]
    await comm.receive_json_from()

    assert (await db(browser.post)("/logout/")).status_code == 302
    closed = await comm.receive_output()
    assert closed == {"type": "websocket.close", "code": CLOSE_UNAUTHENTICATED}
    await comm.disconnect()

    # The user's other login is not this one: it keeps its socket, and answers a resync.
    await other_login.send_json_to({"type": "resync"})
    assert (await other_login.receive_json_from())["type"] == "snapshot"
    await other_login.disconnect()


@pytest.mark.parametrize("path", ["/ws/jobs/{id}/", "/ws/jobs/"])
@run_async
async def test_a_resync_after_the_session_ended_closes_instead_of_answering(owner, job, path):
    # The logout's message can be lost (the layer is best effort), and a session also ends by
    # expiring or by a password change: the resync reads the session again before answering.
    from django.contrib.sessions.models import Session

    comm = await connect(path.format(id=job.id), owner)
    await comm.receive_json_from()
    await db(lambda: Session.objects.all().delete())()
    await comm.send_json_to({"type": "resync"})
    closed = await comm.receive_output()
    assert closed == {"type": "websocket.close", "code": CLOSE_UNAUTHENTICATED}
    await comm.disconnect()


@run_async
async def test_a_resync_after_a_password_change_closes(owner, job):
    comm = await connect(f"/ws/jobs/{job.id}/", owner)
    await comm.receive_json_from()

    def change_password():
        owner.set_password("a-new-pass-456")
        owner.save()

    await db(change_password)()
    await comm.send_json_to({"type": "resync"})
    assert (await comm.receive_output()) == {"type": "websocket.close", "code": CLOSE_UNAUTHENTICATED}
    await comm.disconnect()


@pytest.mark.parametrize("origin, host", [("http://127.0.0.1:8000", "127.0.0.1:8000"), ("HTTP://LOCALHOST:8000", "localhost:8000"),
                                          ("http://localhost", "localhost:80")])
@run_async
async def test_it_accepts_the_sites_own_origin(origin, host, owner, job):
    comm = await open_socket(f"/ws/jobs/{job.id}/", owner, origin=origin, host=host)
    connected, _ = await comm.connect()
    assert connected and (await comm.receive_json_from())["type"] == "snapshot"
    await comm.disconnect()


def test_a_trusted_proxy_origin_is_accepted(settings):
    # Behind a TLS-terminating proxy the socket arrives as plain ws:// on the inner host.
    from jobs.live.origin import is_same_origin

    scope = {"type": "websocket", "scheme": "ws",
             "headers": [(b"host", b"127.0.0.1:8000"), (b"origin", b"https://portal.example.org")]}
    assert not is_same_origin(scope)
    settings.CSRF_TRUSTED_ORIGINS = ["https://portal.example.org"]
    assert is_same_origin(scope)
