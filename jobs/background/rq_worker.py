"""The RQ worker process: what `make up` runs (scripts/up.sh) for submissions, cancels, output
fetches and emails.

    python manage.py portal_rqworker           # as scripts/up.sh runs it (jobs.background.rq_worker.command())
    python manage.py portal_rqworker --burst   # work off what is queued, then exit (tests)

Jobs run IN the worker process (`PortalWorker`, an rq SimpleWorker), not in a child forked per job
as rq's default Worker does. A forked child starts with an empty SSH pool (`cluster.ssh` forgets the
parent's connections at fork) and takes its connection with it when it exits, so every Start paid
a new TCP connection, key exchange and authentication (about 108 ms on loopback) before its first
command. Here the pool lives as long as the worker: a Start's commands go over the connection the
previous job left open (bench/start_under_rq.py measures both).

What the fork gave, and what stands in for it:
- a job's time limit: rq arms SIGALRM in this process (UnixSignalDeathPenalty) and raises
  JobTimeoutException inside the job; the job fails (a submission is retried by RQ) and the worker
  takes the next one. The stopped job may have been half-way through a command or an SFTP transfer,
  so its connections are closed: the next job starts on fresh ones, never on one out of step.
- a clean database connection per job: Django's own check around a request
  (`close_old_connections`) runs before and after each job.
- a crash that kills the process (a segfault in a C library) now stops the worker, not one job:
  make up reports a portal process that exited.
A connection that died while idle (sshd restarted, a firewall dropped it) is noticed by the pool
when the next command opens its channel, and replaced once (`cluster.ssh.SSHRunner._open_channel`).
"""
from __future__ import annotations

import logging
import sys

from django.db import close_old_connections
from rq import SimpleWorker
from rq.timeouts import JobTimeoutException

import cluster
from jobs.background.enqueue import QUEUE_NAME
from jobs.log_context import log_context

log = logging.getLogger(__name__)

#: the queues this worker serves (jobs.background.enqueue enqueues every job on its one queue)
QUEUES = (QUEUE_NAME,)
#: RQ functions whose first argument is a portal job's id (jobs.background.enqueue): their lines name that job too
JOB_ID_FIRST = frozenset({"jobs.job.submit.submit_job", "jobs.job.submit.cancel_on_cluster",
                          "jobs.watcher.outputs.fetch_outputs", "jobs.usage.notifications.notify_job_finished",
                          "jobs.webhooks.events.job_finished_by_id"})


def command(*extra: str) -> list[str]:
    """The command line that starts the portal's RQ worker, from the repository's root: scripts/up.sh
    runs the same management command (jobs/management/commands/portal_rqworker.py)."""
    return [sys.executable, "manage.py", "portal_rqworker", *extra]


def log_ids(job) -> dict:
    """The log ids of an RQ job: its own id, and the portal job's it works on when that is known."""
    ids = {"rq_job_id": job.id}
    try:
        if job.func_name in JOB_ID_FIRST and job.args:
            ids["job_id"] = str(job.args[0])
    except Exception:  # noqa: BLE001 - unreadable arguments are RQ's to report when it runs the job
        pass
    return ids


class PortalWorker(SimpleWorker):
    """rq's SimpleWorker (no fork per job: the SSH pool survives between jobs), with a fresh
    database connection check around each job and fresh SSH connections after a job's timeout."""

    def execute_job(self, job, queue):
        close_old_connections()
        try:
            with log_context(**log_ids(job)):  # every line the job logs names it (jobs.log_context)
                super().execute_job(job, queue)
        finally:
            close_old_connections()

    def handle_exception(self, job, *exc_info):
        if isinstance(exc_info[1], JobTimeoutException):
            log.warning("job %s stopped by its time limit: closing its SSH connections", job.id)
            cluster.close_all_runners()
        return super().handle_exception(job, *exc_info)
