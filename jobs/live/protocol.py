"""Live status: what the browser is told over WebSockets, and how the watcher tells it.

The database is the truth; a WebSocket message is a hint (channels_redis drops messages to full
channels). So every (re)connect starts with a `snapshot` built from the database, and every
event carries whole, current values (never deltas), so a missed event is repaired by the next.

Messages, server -> client (JSON):

  {"type": "snapshot", "job": {...live_job...}, "tasks": [live_task...], "targets": [live_target...],
   "cluster": {...cluster_state...}}                                   on /ws/jobs/<id>/
  {"type": "snapshot", "jobs": [{...live_job...}, ...]}                on /ws/jobs/ (the user's list)
  {"type": "job", "job": {...live_job...}}
  {"type": "task", "job_id": "<uuid>", "task": {...live_task...}}
  {"type": "output", "job_id": "<uuid>", "target": {...live_target...}} a target changed (done, failed, ...)
  {"type": "cluster", "cluster": {...cluster_state...}}                reachable again / unreachable since

The job, task and target shapes are the JSON API's (jobs/api/shapes.py) plus what a page shows.

Groups: `job.<uuid>` (everyone watching that job) and `user.<owner id>` (that owner's job list;
`job` events only). Staff watching others' jobs join `job.<uuid>` like the owner.
"""
from __future__ import annotations

import json
import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.core.serializers.json import DjangoJSONEncoder
from django.utils.translation import gettext as _

from jobs.api.shapes import live_job, live_target, live_task
from jobs.models import ClusterProfile, Job, Target, Task

log = logging.getLogger(__name__)


def job_group(job_id) -> str:
    return f"job.{job_id}"


def user_group(user_id) -> str:
    return f"user.{user_id}"


def cluster_state(profile: ClusterProfile) -> dict:
    since = profile.unreachable_since
    return {
        "name": profile.name, "unreachable_since": since.isoformat() if since else None,
        "message": (_("The cluster has been unreachable since %(since)s; the portal keeps trying.")
                    % {"since": since.strftime("%H:%M:%S UTC")}) if since else "",
    }


def job_snapshot(job: Job) -> dict:
    """Everything the job page shows, from the database (two queries for tasks and targets)."""
    job = Job.objects.select_related("cluster", "owner").get(pk=job.pk)
    return {"type": "snapshot", "job": live_job(job), "tasks": [live_task(t) for t in job.tasks.all()],
            "targets": [live_target(t) for t in job.targets.all()], "cluster": cluster_state(job.cluster)}


def jobs_snapshot(user, limit: int = 100) -> dict:
    jobs = Job.objects.visible_to(user).select_related("owner")[:limit]
    return {"type": "snapshot", "jobs": [live_job(j) for j in jobs]}


class Publisher:
    """Collects events during one watcher cycle and sends them once the changes are committed.

    Sending is best effort: a Redis hiccup must never stop the watcher (the database already
    holds the truth, and the next snapshot repairs the page).
    """

    def __init__(self) -> None:
        self.messages: list[tuple[str, dict]] = []

    def job(self, job: Job) -> None:
        msg = {"type": "job", "job": live_job(job)}
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


async def _send_all(layer, messages) -> None:
    # Channels' consumers dispatch on "type": every event arrives as the `live.event` handler.
    # `text` is the message already encoded: a job watched by 500 sockets is encoded once, not 500 times.
    for group, msg in messages:
        await layer.group_send(group, {"type": "live.event", "message": msg,
                                       "text": json.dumps(msg, cls=DjangoJSONEncoder)})


def publish_job(job: Job) -> None:
    """One `job` event now (for changes made outside the watcher: submission, cancel)."""
    pub = Publisher()
    pub.job(job)
    pub.flush()
