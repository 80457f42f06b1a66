"""Live status: what the browser is told over WebSockets, and how the watcher tells it.

The database is the truth; a WebSocket message is a hint (channels_redis drops messages to full
channels). So every (re)connect starts with a `snapshot` built from the database, and every
event carries whole, current values (never deltas), so a missed event is repaired by the next.

Messages, server -> client (JSON):

  {"type": "snapshot", "job": {...live_job...}, "task_summary": {...}, "tasks": [live_task...],
   "targets": [live_target...], "view": {"targets": {...}, "tasks": {...}},
   "cluster": {...cluster_state...}}                                   on /ws/jobs/<id>/?<view>
  {"type": "snapshot", "jobs": [{...live_job...}, ...]}                on /ws/jobs/ (the user's list)
  {"type": "job", "job": {...live_job...}, "task_summary": {"total", "groups": {...}}}
  {"type": "task", "job_id": "<uuid>", "task": {...live_task...}}
  {"type": "output", "job_id": "<uuid>", "target": {...live_target...}} a target changed (done, failed, ...)
  {"type": "cluster", "cluster": {...cluster_state...}}                reachable again / unreachable since

The job, task and target shapes are the JSON API's (jobs/shapes.py) plus what a page shows.

A job's snapshot never holds the whole job: its `tasks` and `targets` are the page "in view" (a
filter and a page number, from the WebSocket's query string: jobs/live/view.py), `view` says
which and how many match, `job.progress` and `task_summary` give the counts. So a 100,000-target
job's snapshot is as small as a 10-target job's. Events stay incremental: a `task` or `output`
event for a row not in view only moves the counts (or asks for a resync, when it belongs there).

Groups: `job.<uuid>` (the owner's sockets watching that job: nobody else may open one, jobs.access),
`user.<owner id>` (that owner's job list; `job` events only) and `session.<hash of the session key>`
(every socket of one login: its logout sends `{"type": "session.ended"}` there, which closes them
with the "logged out" code; never forwarded to the browser).
"""
from __future__ import annotations

import hashlib
import json
import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.core.serializers.json import DjangoJSONEncoder
from django.utils.translation import gettext as _

from jobs.live.view import View, target_slice, task_slice, task_summary
from jobs.models import ClusterProfile, Job, Target, Task
from jobs.shapes import live_job, live_target, live_task

log = logging.getLogger(__name__)


def job_group(job_id) -> str:
    return f"job.{job_id}"


def user_group(user_id) -> str:
    return f"user.{user_id}"


#: the channel-layer message that closes a login's sockets (the consumers' `session_ended`)
SESSION_ENDED = "session.ended"


def session_group(session_key: str) -> str:
    """The group of one login's sockets; named by a hash, so the session key never sits in Redis."""
    return "session." + hashlib.sha256(session_key.encode()).hexdigest()[:40]


def end_session_sockets(session_key: str | None) -> None:
    """Close every socket opened with this login session (called on logout: jobs.signals). Best
    effort like `Publisher.flush`: a socket the message misses still closes at its next `resync`,
    which checks the session again."""
    layer = get_channel_layer()
    if not session_key or layer is None:
        return
    try:
        async_to_sync(layer.group_send)(session_group(session_key), {"type": SESSION_ENDED})
    except Exception as exc:  # noqa: BLE001 - a logout must never fail for a Redis hiccup
        log.warning("sockets of a logged-out session not told (%s); they close at their next resync", exc)


def cluster_state(profile: ClusterProfile) -> dict:
    since = profile.unreachable_since
    return {
        "name": profile.name, "unreachable_since": since.isoformat() if since else None,
        "message": (_("The cluster has been unreachable since %(since)s; the portal keeps trying.")
                    % {"since": since.strftime("%H:%M:%S UTC")}) if since else "",
    }


def job_snapshot(job: Job, view: View | None = None) -> dict:
    """What the job page shows for `view`, from the database: the job, the task counts and the
    rows in view (four small queries whatever the job's size)."""
    view = view or View()
    job = Job.objects.select_related("cluster", "owner").get(pk=job.pk)
    summary = task_summary(job)
    tasks, targets = task_slice(job, view, summary), target_slice(job, view)
    return {"type": "snapshot", "job": live_job(job), "task_summary": summary,
            "tasks": [live_task(t) for t in tasks.items], "targets": [live_target(t) for t in targets.items],
            "view": {"targets": targets.describe(view.show), "tasks": tasks.describe(view.tasks)},
            "cluster": cluster_state(job.cluster)}


def jobs_snapshot(user, limit: int = 100) -> dict:
    jobs = Job.objects.owned(user).select_related("owner")[:limit]
    return {"type": "snapshot", "jobs": [live_job(j) for j in jobs]}


class Publisher:
    """Collects events during one watcher cycle and sends them once the changes are committed.

    Sending is best effort: a Redis hiccup must never stop the watcher (the database already
    holds the truth, and the next snapshot repairs the page).
    """

    def __init__(self) -> None:
        self.messages: list[tuple[str, dict]] = []

    def job(self, job: Job, summary: dict | None = None) -> None:
        # The task counts ride along: a page shows "1,000 tasks: 998 done, 2 running" whatever
        # rows it has in view. `summary`: those counts when the caller has them (`view.summary_of`);
        # else one aggregate.
        msg = {"type": "job", "job": live_job(job), "task_summary": summary or task_summary(job)}
        self.messages.append((job_group(job.id), msg))
        self.messages.append((user_group(job.owner_id), msg))

    def task(self, job: Job, task: Task) -> None:
        self.messages.append((job_group(job.id), {"type": "task", "job_id": str(job.id), "task": live_task(task)}))

    def output(self, job: Job, target: Target) -> None:
        self.messages.append((job_group(job.id), {"type": "output", "job_id": str(job.id), "target": live_target(target)}))

    def cluster(self, profile: ClusterProfile, job_ids) -> None:
        msg = {"type": "cluster", "cluster": cluster_state(profile)}
        for jid in job_ids:
            self.messages.append((job_group(jid), msg))

    def flush(self) -> int:
        if not self.messages:
            return 0
        messages = _latest_job_events(self.messages)
        layer = get_channel_layer()
        sent = 0
        if layer is not None:
            try:
                async_to_sync(_send_all)(layer, messages)
                sent = len(messages)
            except Exception as exc:  # noqa: BLE001 - see the class docstring
                log.warning("live events not sent (%s); pages will resync from the database", exc)
        self.messages = []
        return sent


def _latest_job_events(messages: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """Only the last `job` event of each job per group: a job event carries the whole job, so an
    earlier one in the same batch (a move, then new counts) says nothing the last does not."""
    last = {(group, msg["job"]["id"]): i for i, (group, msg) in enumerate(messages) if msg.get("type") == "job"}
    return [(group, msg) for i, (group, msg) in enumerate(messages)
            if msg.get("type") != "job" or last[(group, msg["job"]["id"])] == i]


#: events one channel-layer message carries at most (a cycle that finished 500 photos of one job
#: sends them in a few messages, each well under the layer's limits)
EVENTS_PER_MESSAGE = 100


def group_messages(messages: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """The channel-layer messages that carry `messages`: ONE per group (up to EVENTS_PER_MESSAGE
    events), in the order of each group's events. A send costs Redis round trips per group,
    whatever it carries: one per event was ~300 sends a cycle under the load run (docs/scale.md).
    Each event is encoded once (`text`), however many groups and sockets get it: a job watched by
    500 sockets is encoded once, not 500 times. The consumers unpack `events` (jobs.live.consumers)."""
    by_group: dict[str, list[dict]] = {}
    encoded: dict[int, dict] = {}
    for group, msg in messages:
        if id(msg) not in encoded:
            encoded[id(msg)] = {"message": msg, "text": json.dumps(msg, cls=DjangoJSONEncoder)}
        by_group.setdefault(group, []).append(encoded[id(msg)])
    out = []
    for group, events in by_group.items():
        for start in range(0, len(events), EVENTS_PER_MESSAGE):
            out.append((group, {"type": "live.event", "events": events[start:start + EVENTS_PER_MESSAGE]}))
    return out


async def _send_all(layer, messages) -> None:
    # Channels' consumers dispatch on "type": every batch arrives as the `live.event` handler.
    for group, message in group_messages(messages):
        await layer.group_send(group, message)


def publish_job(job: Job) -> None:
    """One `job` event now (for changes made outside the watcher: submission, cancel)."""
    pub = Publisher()
    pub.job(job)
    pub.flush()
