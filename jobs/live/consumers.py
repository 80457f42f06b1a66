"""WebSocket consumers for live status: the job page and the user's job list.

The messages and groups are defined once, in `jobs.live.protocol` (read its docstring for the protocol);
these consumers only check who may listen, join a group, send a snapshot from the database and
forward what the watcher publishes. ORM calls stay in `database_sync_to_async` helpers.

A socket only ever sees its own user's jobs (`Job.objects.visible_to`, jobs.access), and only
while its user is logged in: every socket also joins its login session's group, which the logout
closes (`protocol.end_session_sockets`), and a `resync` checks the session again first (it may
have expired, or its password changed), so a socket left open by a logged-out tab falls silent.

Refusals are sent AFTER accepting, with an application close code, because a close before
accept reaches the browser as a bare HTTP 403 / close code 1006 that looks like a network fault
(and the page would keep reconnecting). A bad Origin is refused earlier, by the origin validator
in `portal.asgi`, before any of this runs.
"""
from __future__ import annotations

import asyncio
import json
import time
from importlib import import_module
from urllib.parse import parse_qs

from channels.auth import get_user
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from jobs.live.protocol import job_group, job_snapshot, jobs_snapshot, session_group, user_group
from jobs.live.view import View
from jobs.models import Job
from jobs.ops import metrics as ops_metrics

#: not logged in: the page should send the user to the login page instead of reconnecting
CLOSE_UNAUTHENTICATED = 4401
#: the least time between two snapshots a socket asks for (`resync`); more are answered once, late
RESYNC_EVERY_S = 2.0
#: no such job, or not one this user may see (the same code for both: never say which)
CLOSE_NOT_FOUND = 4404


class _LiveConsumer(AsyncJsonWebsocketConsumer):
    """Shared behaviour: refuse with a code, join the feed and the login session's group, leave
    them on disconnect, `resync` on request while the user is still logged in."""

    #: the groups this socket joined ("groups" is Channels' own attribute: joined before connect)
    joined: tuple[str, ...] = ()
    #: when this socket's last resync was answered (time.monotonic()), and one deferred to its window's end
    _last_resync: float = float("-inf")
    _resync_later: asyncio.Task | None = None

    async def refuse(self, code: int) -> None:
        await self.accept()
        await self.close(code=code)

    async def join(self, feed: str) -> None:
        """Join `feed` and this login's session group (a logout closes the socket through it)."""
        key = _session_key(self.scope)
        self.joined = (feed, session_group(key)) if key else (feed,)
        for group in self.joined:
            await self.channel_layer.group_add(group, self.channel_name)
        ops_metrics.websocket_opened()  # a connection that joined: decremented when it leaves (below)

    async def disconnect(self, code) -> None:
        if self._resync_later is not None and self._resync_later is not asyncio.current_task():
            self._resync_later.cancel()
        if self.joined:
            for group in self.joined:
                await self.channel_layer.group_discard(group, self.channel_name)
            self.joined = ()
            ops_metrics.websocket_closed()

    async def end(self, code: int) -> None:
        """Leave every group and close with `code` (an application code the page acts on)."""
        await self.disconnect(code)
        await self.close(code=code)

    async def session_ended(self, event: dict) -> None:
        """`protocol.SESSION_ENDED`, from the logout of this socket's login: the page goes to the login page."""
        await self.end(CLOSE_UNAUTHENTICATED)

    async def dispatch(self, message) -> None:
        # Channels' dispatch hops to the database thread (close_old_connections) before EVERY
        # handler, one hop at a time for the whole process: an event to 500 sockets waited for 500
        # hops, most of its fan-out time (docs/scale.md). Forwarding a live event reads no database.
        if message.get("type") == "live.event":
            # The Publisher sends a group's events of one cycle as one message (`events`, in order).
            for event in message.get("events") or (message,):
                await self.live_event(event)
        else:
            await super().dispatch(message)

    async def live_event(self, event: dict) -> None:
        raise NotImplementedError

    async def _forward(self, event: dict) -> None:
        # Publisher pre-encodes once per event; `message` alone still works (tests, other senders).
        if event.get("text"):
            await self.send(text_data=event["text"])
        else:
            await self.send_json(event["message"])

    async def receive(self, text_data=None, bytes_data=None, **kwargs) -> None:
        # A client message is only ever a request for a fresh snapshot (after a tab wakes up, say);
        # anything else, malformed JSON and binary frames included, is ignored rather than fatal.
        try:
            content = json.loads(text_data) if text_data else None
        except ValueError:
            return
        if isinstance(content, dict) and content.get("type") == "resync":
            await self.resync()

    async def resync(self) -> None:
        """A fresh snapshot, at most one per RESYNC_EVERY_S per socket: a snapshot reads the database,
        and tabs asking every second raised another user's p95 threefold (bench/bigjob.py). A
        request within the window is answered once, at its end, so the page still ends current."""
        wait = RESYNC_EVERY_S - (time.monotonic() - self._last_resync)
        if wait > 0:
            if self._resync_later is None or self._resync_later.done():
                self._resync_later = asyncio.get_running_loop().create_task(self._resync_after(wait))
            return
        self._last_resync = time.monotonic()
        if not await _still_logged_in(self.scope):  # logged out, expired, or its password changed
            return await self.end(CLOSE_UNAUTHENTICATED)
        await self.send_snapshot()

    async def _resync_after(self, wait: float) -> None:
        await asyncio.sleep(wait)
        if self.joined:  # still open
            await self.resync()

    async def send_snapshot(self) -> None:
        raise NotImplementedError


class JobConsumer(_LiveConsumer):
    """`/ws/jobs/<uuid>/?<view>`: one job's page. A `snapshot` of the rows in view (the query
    string: jobs/live/view.py), then `job`, `task`, `output`, `cluster` events."""

    async def connect(self) -> None:
        user = self.scope["user"]
        if not user.is_authenticated:
            return await self.refuse(CLOSE_UNAUTHENTICATED)
        self.job_id = self.scope["url_route"]["kwargs"]["job_id"]
        query = self.scope.get("query_string", b"").decode("latin-1")
        self.view = View.from_query(parse_qs(query[:1000]))
        snapshot = await _visible_job_snapshot(user, self.job_id, self.view)
        if snapshot is None:
            return await self.refuse(CLOSE_NOT_FOUND)
        # Join before the snapshot is read: an event published in between is delivered after the
        # snapshot, and events carry whole values, so the page never ends older than the database.
        await self.join(job_group(self.job_id))
        await self.accept()
        await self.send_snapshot()

    async def send_snapshot(self) -> None:
        snapshot = await _visible_job_snapshot(self.scope["user"], self.job_id, self.view)
        if snapshot is None:  # deleted, or no longer visible, since the connection opened
            return await self.end(CLOSE_NOT_FOUND)
        await self.send_json(snapshot)

    async def live_event(self, event: dict) -> None:
        await self._forward(event)


class JobListConsumer(_LiveConsumer):
    """`/ws/jobs/`: the user's job list. A `snapshot` of the user's jobs, then `job` events.

    The feed is the group `user.<id>`, which carries the user's OWN jobs only, as the snapshot
    does, whatever the user's staff flags (jobs.access).
    """

    async def connect(self) -> None:
        user = self.scope["user"]
        if not user.is_authenticated:
            return await self.refuse(CLOSE_UNAUTHENTICATED)
        await self.join(user_group(user.id))
        await self.accept()
        await self.send_snapshot()

    async def send_snapshot(self) -> None:
        await self.send_json(await _jobs_snapshot(self.scope["user"]))

    async def live_event(self, event: dict) -> None:
        if event["message"].get("type") == "job":
            await self._forward(event)


@database_sync_to_async
def _visible_job_snapshot(user, job_id, view: View) -> dict | None:
    """The job page's snapshot, or None when the job does not exist or the user may not see it."""
    job = Job.objects.visible_to(user).filter(pk=job_id).first()
    return job_snapshot(job, view) if job is not None else None


@database_sync_to_async
def _jobs_snapshot(user) -> dict:
    return jobs_snapshot(user)


def _session_key(scope) -> str | None:
    session = scope.get("session")
    return getattr(session, "session_key", None) if session is not None else None


async def _still_logged_in(scope) -> bool:
    """Whether the login this socket opened with is still valid, read afresh from the session store
    (the scope's session and user were read once, at connect): the same user, its session not
    flushed by a logout, not expired, its password unchanged since (Django's session hash)."""
    key = _session_key(scope)
    if not key:
        return False
    store = import_module(settings.SESSION_ENGINE).SessionStore(key)
    user = await get_user({"session": store})
    return user.is_authenticated and user.pk == scope["user"].pk
