"""Live status: what the browser is told over WebSockets, and how the watcher tells it.

The database is the truth; a WebSocket message is a hint (channels_redis drops messages to full
channels). So every (re)connect starts with a `snapshot` built from the database, and every
event carries whole, current values (never deltas), so a missed event is repaired by the next.

Messages, server -> client (JSON):

  {"type": "snapshot", "job": {...job_state...}, "tasks": [task...], "targets": [target...],
   "cluster": {...cluster_state...}}                                   on /ws/jobs/<id>/
  {"type": "snapshot", "jobs": [{...job_state...}, ...]}               on /ws/jobs/ (the user's list)
  {"type": "job", "job": {...job_state...}}
  {"type": "task", "job_id": "<uuid>", "task": {...task...}}
  {"type": "output", "job_id": "<uuid>", "target": {...target...}}      a target changed (done, failed, ...)
  {"type": "cluster", "cluster": {...cluster_state...}}                reachable again / unreachable since

Groups: `job.<uuid>` (everyone watching that job) and `user.<owner id>` (that owner's job list;
`job` events only). Staff watching others' jobs join `job.<uuid>` like the owner.
"""
from __future__ import annotations

import json
import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.core.serializers.json import DjangoJSONEncoder
from django.urls import reverse
from django.utils.translation import gettext as _

from jobs.models import ClusterProfile, Job, Target, Task

log = logging.getLogger(__name__)


def job_group(job_id) -> str:
    return f"job.{job_id}"


def user_group(user_id) -> str:
    return f"user.{user_id}"


def _iso(dt) -> str | None:
    return dt.isoformat() if dt else None


def job_state(job: Job) -> dict:
    return {
        "id": str(job.id), "name": job.name, "status": job.status, "status_label": job.get_status_display(),
        "owner": job.owner.get_username(), "cancel_requested": job.cancel_requested,
        "template": job.snapshot.name, "slurm_job_id": job.slurm_job_id,
        "progress": {"total": job.total, "done": job.done, "failed": job.failed},
        "error": job.error, "created_at": _iso(job.created_at), "started_at": _iso(job.started_at),
        "finished_at": _iso(job.finished_at), "url": reverse("job-detail", args=[job.id]),
    }


def task_state(task: Task) -> dict:
    return {"index": task.index, "status": task.state, "node": task.node, "exit_code": task.exit_code,
            "reason": task.reason, "elapsed_seconds": task.elapsed_seconds}


def target_state(target: Target) -> dict:
    job_id = target.job_id
    return {
        "index": target.index, "name": target.name, "status": target.status,
        "status_label": target.get_status_display(), "message": target.message,
        "faces_found": target.faces_found, "faces_swapped": target.faces_swapped, "seconds": target.seconds,
        "task_index": target.task_index,
        "output_url": reverse("job-output", args=[job_id, target.index]) if target.output_file else None,
        "thumb_url": reverse("job-thumb", args=[job_id, target.index]) if target.thumbnail_file else None,
        "page_url": reverse("job-target", args=[job_id, target.index]),
    }


def cluster_state(profile: ClusterProfile) -> dict:
    since = profile.unreachable_since
    return {
        "name": profile.name, "unreachable_since": _iso(since),
        "message": (_("The cluster has been unreachable since %(since)s; the portal keeps trying.")
                    % {"since": since.strftime("%H:%M:%S UTC")}) if since else "",
    }


def job_snapshot(job: Job) -> dict:
    """Everything the job page shows, from the database (two queries for tasks and targets)."""
    job = Job.objects.select_related("cluster", "owner").get(pk=job.pk)
    return {"type": "snapshot", "job": job_state(job), "tasks": [task_state(t) for t in job.tasks.all()],
            "targets": [target_state(t) for t in job.targets.all()], "cluster": cluster_state(job.cluster)}


def jobs_snapshot(user, limit: int = 100) -> dict:
    jobs = Job.objects.visible_to(user).select_related("owner")[:limit]
    return {"type": "snapshot", "jobs": [job_state(j) for j in jobs]}


class Publisher:
    """Collects events during one watcher cycle and sends them once the changes are committed.

    Sending is best effort: a Redis hiccup must never stop the watcher (the database already
    holds the truth, and the next snapshot repairs the page).
    """

    def __init__(self) -> None:
        self.messages: list[tuple[str, dict]] = []

    def job(self, job: Job) -> None:
        msg = {"type": "job", "job": job_state(job)}
        self.messages.append((job_group(job.id), msg))
        self.messages.append((user_group(job.owner_id), msg))

    def task(self, job: Job, task: Task) -> None:
        self.messages.append((job_group(job.id), {"type": "task", "job_id": str(job.id), "task": task_state(task)}))

    def output(self, job: Job, target: Target) -> None:
        self.messages.append((job_group(job.id), {"type": "output", "job_id": str(job.id), "target": target_state(target)}))

    def cluster(self, profile: ClusterProfile, job_ids) -> None:
        msg = {"type": "cluster", "cluster": cluster_state(profile)}
        for jid in job_ids:
            self.messages.append((job_group(jid), msg))

    def flush(self) -> int:
        if not self.messages:
            return 0
        layer = get_channel_layer()
        sent = 0
        if layer is not None:
            try:
                async_to_sync(_send_all)(layer, self.messages)
                sent = len(self.messages)
            except Exception as exc:  # noqa: BLE001 - see the class docstring
                log.warning("live events not sent (%s); pages will resync from the database", exc)
        self.messages = []
        return sent


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
