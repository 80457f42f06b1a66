"""Every RQ enqueue of the portal, with its timeouts named once.

Functions are named by their dotted path (RQ imports them in the worker), so this module imports
no domain module: anything may enqueue through it without an import cycle. Arguments are ids and
plain values only, never model instances: the worker reads the database's current state.

`queue()` is the one seam to RQ: tests replace it to see what would be enqueued.

    from jobs.background import enqueue
    transaction.on_commit(lambda: enqueue.enqueue_submission(job))
"""
from __future__ import annotations

import logging

from rq import Queue, Retry

log = logging.getLogger(__name__)

QUEUE_NAME = "default"

#: a submission stages files over SFTP and runs sbatch: large uploads take minutes
SUBMIT_TIMEOUT = 900
#: scancel is one SSH command
CANCEL_TIMEOUT = 120
#: one email (SMTP may be slow to answer)
NOTIFY_TIMEOUT = 120
#: one webhook call: its connect and read timeouts are short (settings.WEBHOOK_TIMEOUT); this bounds the rest
WEBHOOK_TIMEOUT = 60
#: fetching a batch of outputs over SFTP and making their thumbnails
FETCH_OUTPUTS_TIMEOUT = 900
#: how long RQ keeps a finished task's record, and a failed one's (for the dashboard)
RESULT_TTL = 3600
FAILURE_TTL = 7 * 86400

#: retry policy of a submission that met a cluster outage (seconds between tries)
SUBMIT_RETRY = Retry(max=8, interval=[10, 30, 60, 120, 300, 600, 900, 1800])
#: a fetch of outputs that met an outage: the watcher enqueues again later anyway
FETCH_RETRY = Retry(max=3, interval=[10, 30, 60])


def queue():
    """The portal's RQ queue."""
    import django_rq

    return django_rq.get_queue(QUEUE_NAME)


def submission_rq_id(job) -> str:
    """The RQ job id of the job's submission: `submit-<uuid>`, and `submit-<uuid>-a<N>` for attempt N > 1.

    Fixed per attempt, so a double enqueue of the same Start (or retry) collapses into one RQ job.
    """
    return f"submit-{job.id}" if job.attempt <= 1 else f"submit-{job.id}-a{job.attempt}"


def enqueue_submission(job) -> None:
    queue().enqueue("jobs.job.submit.submit_job", str(job.id), job_id=submission_rq_id(job), retry=SUBMIT_RETRY,
                    job_timeout=SUBMIT_TIMEOUT, result_ttl=RESULT_TTL, failure_ttl=FAILURE_TTL)


def drop_submission(job) -> None:
    """Forget the job's submission waiting for its next try (a cancelled job is never submitted).

    Never raises: a submission that still runs finds the job cancelled and does nothing.
    """
    try:
        q = queue()
        rq_id = submission_rq_id(job)
        for registry in (q.scheduled_job_registry, q.deferred_job_registry):
            if rq_id in registry:
                registry.remove(rq_id, delete_job=True)
        q.remove(rq_id)
    except Exception as exc:  # noqa: BLE001 - see the docstring
        log.warning("job %s: waiting submission not dropped: %s", job.id, exc)


def enqueue_cancel(job) -> None:
    queue().enqueue("jobs.job.submit.cancel_on_cluster", str(job.id), job_timeout=CANCEL_TIMEOUT,
                    result_ttl=RESULT_TTL, failure_ttl=FAILURE_TTL)


#: outputs fetched by one RQ job at most (about a second of a worker's time)
FETCH_BATCH = 25
#: what the watcher asks the RQ worker to fetch: the RQ id's prefix and the function that fetches it
_FETCHES = {
    "outputs": ("fetch", "jobs.watcher.outputs.fetch_outputs"),  # finished outputs, and their thumbnails
    "posters": ("poster", "jobs.watcher.outputs.fetch_posters"),  # running videos' posters
}


def enqueue_output_fetch(job, indexes: list[int], what: str = "outputs") -> None:
    """Fetch these targets' outputs (and make thumbnails), or with `what="posters"` their running
    videos' posters, on the RQ workers: never in the watcher's poll.

    One RQ job per FETCH_BATCH targets: several workers share one big job's outputs (bench/output_fetch.py:
    the rate grows with the workers), and a submission queued behind them waits for one batch, not
    for a whole job's. Each RQ id names its batch's first and last index and size, so the same batch
    seen again in the next cycle, while still queued, collapses into the queued one.
    """
    enqueue_output_fetches([(job, indexes, what)])


def enqueue_output_fetches(fetches) -> None:
    """`enqueue_output_fetch` for many jobs at once (`(job, indexes, what)` each), in ONE Redis round
    trip: a watcher cycle under load asks for the outputs of ~90 jobs (bench/load_run.py)."""
    datas = []
    for job, indexes, what in fetches:
        prefix, func = _FETCHES[what]
        ordered = sorted(indexes)
        for start in range(0, len(ordered), FETCH_BATCH):
            batch = ordered[start:start + FETCH_BATCH]
            rq_id = f"{prefix}-{job.id}-{batch[0]}-{batch[-1]}-{len(batch)}"
            datas.append(Queue.prepare_data(func, (str(job.id), batch), job_id=rq_id, retry=FETCH_RETRY,
                                            timeout=FETCH_OUTPUTS_TIMEOUT, result_ttl=60, failure_ttl=FAILURE_TTL))
    if datas:
        queue().enqueue_many(datas)


#: scontrol create/delete reservation: one SSH command
RESERVATION_TIMEOUT = 120
#: a booking's reservation that met an outage (seconds between tries); the beat enqueues again after
RESERVATION_RETRY = Retry(max=6, interval=[10, 30, 60, 120, 300, 600])


def reservation_rq_id(booking, verb: str = "make") -> str:
    """`reservation-make-<uuid>` / `reservation-delete-<uuid>`: one RQ job per booking and verb."""
    return f"reservation-{verb}-{booking.id}"


def enqueue_reservation(booking) -> None:
    """Make the Slurm reservation of a confirmed booking (jobs.bookings.reservations)."""
    queue().enqueue("jobs.bookings.reservations.make_reservation", str(booking.id),
                    job_id=reservation_rq_id(booking), retry=RESERVATION_RETRY, job_timeout=RESERVATION_TIMEOUT,
                    result_ttl=RESULT_TTL, failure_ttl=FAILURE_TTL)


def enqueue_booking_wake(booking) -> None:
    """Wake the asleep nodes of a booking that starts soon (jobs.bookings.wake). Never raises
    (logged): the beat must go on, and Slurm still wakes them when the booking's work comes."""
    try:
        queue().enqueue("jobs.bookings.wake.wake_nodes", str(booking.id), job_id=reservation_rq_id(booking, "wake"),
                        job_timeout=RESERVATION_TIMEOUT, result_ttl=RESULT_TTL, failure_ttl=FAILURE_TTL)
    except Exception as exc:  # noqa: BLE001 - see the docstring
        log.warning("booking %s: waking its nodes not queued: %s", booking.id, exc)


def enqueue_reservation_delete(booking) -> None:
    """Delete the Slurm reservation of a cancelled or refused booking."""
    queue().enqueue("jobs.bookings.reservations.delete_reservation", str(booking.id),
                    job_id=reservation_rq_id(booking, "delete"), retry=RESERVATION_RETRY,
                    job_timeout=RESERVATION_TIMEOUT, result_ttl=RESULT_TTL, failure_ttl=FAILURE_TTL)


def enqueue_after_finish(job) -> None:
    """Queue the job's email and the owner's quota check. Called on commit of the job's end.

    Never raises: with Redis down the email is lost (logged), the job is not.
    """
    try:
        q = queue()
        q.enqueue("jobs.usage.notifications.notify_job_finished", str(job.id), job_timeout=NOTIFY_TIMEOUT,
                  result_ttl=RESULT_TTL, failure_ttl=FAILURE_TTL)
        q.enqueue("jobs.usage.notifications.notify_quota", job.owner_id, job_timeout=NOTIFY_TIMEOUT,
                  result_ttl=RESULT_TTL, failure_ttl=FAILURE_TTL)
        if job.callback_url:  # the signed call of the job's end (jobs.webhooks), retried on its own
            q.enqueue("jobs.webhooks.events.job_finished_by_id", str(job.id), job_timeout=WEBHOOK_TIMEOUT,
                      result_ttl=RESULT_TTL, failure_ttl=FAILURE_TTL)
    except Exception as exc:  # noqa: BLE001 - see the docstring
        log.warning("job %s: notification not queued: %s", job.id, exc)


def enqueue_webhook(delivery_id: str, at=None) -> None:
    """Make the delivery's next attempt now, or at `at` (an aware datetime: RQ's scheduler, which
    the portal's worker runs). Never raises: a lost enqueue leaves the delivery due in the database,
    where `jobs.webhooks.send_due` finds it; two enqueues of one attempt send it once (it is claimed)."""
    try:
        options = {"job_timeout": WEBHOOK_TIMEOUT, "result_ttl": RESULT_TTL, "failure_ttl": FAILURE_TTL}
        if at is None:
            queue().enqueue("jobs.webhooks.deliver.send", delivery_id, **options)
        else:
            queue().enqueue_at(at, "jobs.webhooks.deliver.send", delivery_id, **options)
    except Exception as exc:  # noqa: BLE001 - see the docstring
        log.warning("webhook %s: attempt not queued: %s", delivery_id, exc)


def enqueue_account_email(task: str, user_id: int, address: str, language: str) -> None:
    """Queue `jobs.usage.notifications.<task>(user_id, address, language)`: an account's email
    (a link to confirm a new address, the notice to the old one), sent from the RQ worker in `language`."""
    queue().enqueue(f"jobs.usage.notifications.{task}", user_id, address, language, job_timeout=NOTIFY_TIMEOUT,
                    result_ttl=RESULT_TTL, failure_ttl=FAILURE_TTL)


def enqueue_booking_email(booking_id: str, event: str) -> None:
    """Email the booking's owner about `event` (jobs.webhooks.events). Never raises (logged)."""
    try:
        queue().enqueue("jobs.webhooks.events.email_booking_event", booking_id, event, job_timeout=NOTIFY_TIMEOUT,
                        result_ttl=RESULT_TTL, failure_ttl=FAILURE_TTL)
    except Exception as exc:  # noqa: BLE001 - see the docstring
        log.warning("booking %s: %s email not queued: %s", booking_id, event, exc)


#: retention (jobs.results.retention): one email; a job's files on the portal; one `rm -rf` over SSH
RETENTION_TIMEOUT = 900


def _enqueue_retention(func: str, job_id, rq_id: str, timeout: int) -> bool:
    """Queue one retention step of a job; its fixed id collapses a second enqueue while queued.
    Never raises (False, logged): the watcher's slow beat asks again."""
    try:
        queue().enqueue(f"jobs.results.retention.{func}", str(job_id), job_id=rq_id, job_timeout=timeout,
                        result_ttl=RESULT_TTL, failure_ttl=FAILURE_TTL)
        return True
    except Exception as exc:  # noqa: BLE001 - see the docstring
        log.warning("job %s: %s not queued: %s", job_id, func, exc)
        return False


def enqueue_retention_notice(job_id) -> bool:
    return _enqueue_retention("send_notice", job_id, f"retention-notice-{job_id}", NOTIFY_TIMEOUT)


def enqueue_expiry(job_id) -> bool:
    return _enqueue_retention("expire_job", job_id, f"retention-expire-{job_id}", RETENTION_TIMEOUT)


def enqueue_cluster_cleanup(job_id) -> bool:
    return _enqueue_retention("delete_on_cluster", job_id, f"retention-cluster-{job_id}", RETENTION_TIMEOUT)


#: usage by team: two sacct calls per cluster, every cluster one after another
TEAM_USAGE_TIMEOUT = 600


def enqueue_team_usage_read() -> None:
    """Read every cluster's usage by team again (jobs.usage.team_usage.read_again). Its fixed id
    collapses a second click while the first read is still queued."""
    queue().enqueue("jobs.usage.team_usage.read_again", job_id="team-usage-read", job_timeout=TEAM_USAGE_TIMEOUT,
                    result_ttl=60, failure_ttl=FAILURE_TTL)


def enqueue_node_email(profile_id: int, node: dict, seen_at: str) -> None:
    """Email the admins that a cluster node stopped taking work (jobs.clusters.node_mail). Never
    raises (logged): the watcher's sweep must go on."""
    try:
        queue().enqueue("jobs.clusters.node_mail.notify_node_stopped", profile_id, node, seen_at,
                        job_timeout=NOTIFY_TIMEOUT, result_ttl=RESULT_TTL, failure_ttl=FAILURE_TTL)
    except Exception as exc:  # noqa: BLE001 - see the docstring
        log.warning("cluster %s: email about node %s not queued: %s", profile_id, node.get("name"), exc)
