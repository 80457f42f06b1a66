"""The Slurm reservation behind a confirmed booking: made and deleted over SSH by RQ enqueue.

Slurm 22.05 cannot hold GPUs in a reservation, so a booking's reservation holds the CORES that go
with its GPUs on nodes that have them (`node_plan`): CoreCnt = GPUs x (node CPUs // node GPUs), at
least 1. Users = the cluster profile's SSH user: the portal submits every job as that user.

An SSH outage raises, so RQ retries (enqueue.RESERVATION_RETRY) and the booking reads "confirmed; the
reservation is being made" meanwhile; the beat enqueues again if every try failed. Slurm refusing
the reservation (nodes busy or already reserved) refuses the booking with a plain reason.
"""
from __future__ import annotations

import logging
import math

from django.utils import timezone
from django.utils.translation import gettext as _

import cluster
import jobs.bookings.lifecycle as lifecycle
from jobs import audit
from jobs.background import enqueue
from jobs.models import Booking, BookingState, GpuType, Job, JobStatus
from jobs.models.booking import FINAL_BOOKING_STATES

log = logging.getLogger(__name__)

#: seconds scontrol may take to answer
SCONTROL_TIMEOUT = 60
#: a job in these has not started on the cluster: cancelling its booking moves it to the open queue
WAITING_STATUSES = (JobStatus.QUEUED, JobStatus.SUBMITTING, JobStatus.PENDING)


def _refusal_reason(code: str) -> str:
    """What the owner reads when Slurm would not make the reservation (a cluster.reservation_refusal code)."""
    if code in ("busy", "overlap"):
        return _("The cluster would not hold the GPUs for this time: its nodes are busy or already reserved. "
                 "Book another time.")
    if code == "not_allowed":
        return _("The portal may not reserve GPUs on this cluster; please tell an admin.")
    return _("The cluster would not hold the GPUs for this time. Book another time, or ask an admin.")


def cores_for(node: dict, gpus: int) -> int:
    """The cores that go with `gpus` GPUs of the node: its CPUs over ALL its GPUs, each (at least 1)."""
    per_gpu = node.get("cores_per_gpu") or (node["cpus"] // node["gpus"] if node.get("gpus") else 1)
    return max(1, gpus * per_gpu)


def node_plan(gpu_type: GpuType, count: int) -> tuple[list[str], list[int]]:
    """(nodes, cores per node) to reserve for `count` GPUs of the type: the smallest single node that
    has them all, else the biggest nodes until they add up. ([], []) when the cluster has too few."""
    nodes = [n for n in gpu_type.nodes if n.get("gpus", 0) > 0]
    whole = [n for n in nodes if n["gpus"] >= count]
    if whole:
        node = min(whole, key=lambda n: (n["gpus"], n["name"]))
        return [node["name"]], [cores_for(node, count)]
    chosen, cores, left = [], [], count
    for node in sorted(nodes, key=lambda n: (-n["gpus"], n["name"])):
        take = min(left, node["gpus"])
        chosen.append(node["name"])
        cores.append(cores_for(node, take))
        left -= take
        if left == 0:
            return chosen, cores
    return [], []


def create_argv(booking: Booking, now=None) -> list[str]:
    """The scontrol command that makes the booking's reservation (from now when its start has passed)."""
    now = now or timezone.now()
    begins = max(booking.starts_at, now)
    minutes = max(1, math.ceil((booking.ends_at - begins).total_seconds() / 60))
    nodes, cores = node_plan(booking.gpu_type, booking.gpu_count)
    start = "now" if booking.starts_at <= now else booking.starts_at
    # Slurm 23.02 and later hold the GPUs themselves; 22.05 only the cores (docs/slurm-bookings.md).
    gpus = booking.gpu_count if cluster.reserves_gpus(booking.cluster.slurm_release) else 0
    return cluster.reservation_create_argv(booking.reservation_name, start, minutes, [booking.cluster.username],
                                           nodes, cores[0] if len(cores) == 1 else cores, gpus=gpus)


def _slurm_words(result) -> str:
    """scontrol's last line (its error, or what it did)."""
    lines = (result.stderr.strip() or result.stdout.strip()).splitlines()
    return lines[-1] if lines else ""


def make_reservation(booking_id: str) -> None:
    """RQ task: make the reservation of a confirmed (or active) booking, once."""
    booking = Booking.objects.select_related("cluster", "gpu_type").filter(pk=booking_id).first()
    if booking is None or booking.reservation_made or booking.state not in (BookingState.CONFIRMED,
                                                                            BookingState.ACTIVE):
        return
    now = timezone.now()
    if booking.ends_at <= now:
        return  # its time is over: the beat ends it
    nodes, _cores = node_plan(booking.gpu_type, booking.gpu_count)
    if not nodes:
        lifecycle.refuse(booking, _("The cluster %(cluster)s no longer has %(count)d %(type)s GPUs to hold; the "
                                    "booking could not be kept.") % {
            "cluster": booking.cluster.name, "count": booking.gpu_count, "type": booking.gpu_type.display_name})
        return
    result = cluster.runner_for(booking.cluster).run(create_argv(booking, now), timeout=SCONTROL_TIMEOUT)
    said = _slurm_words(result)
    code = cluster.reservation_refusal(result.stderr + result.stdout) if result.rc != 0 else ""
    if code == "unavailable":  # slurmctld did not answer: RQ tries again
        raise cluster.SlurmError(f"scontrol did not make reservation {booking.reservation_name}: {said}")
    if code and code != "exists":  # "exists": an earlier try made it and its answer was lost
        log.warning("booking %s: scontrol refused the reservation (%s): %s", booking.pk, code, said)
        lifecycle.refuse(booking, _refusal_reason(code))
        return
    Booking.objects.filter(pk=booking.pk).update(reservation_made=True)
    audit.record(None, "booking.reservation", target=booking, details={"reservation": booking.reservation_name})
    booking.refresh_from_db()
    if booking.state in FINAL_BOOKING_STATES:  # cancelled while scontrol ran: do not leave it behind
        delete_reservation(booking_id)


def move_waiting_jobs_out(booking: Booking) -> int:
    """The booking's jobs not started yet leave its reservation and join the open queue (a
    reservation with jobs waiting in it cannot be deleted: "Requested reservation is in use").
    One round trip for all of them; a job Slurm moved (or has not got yet) no longer belongs to the
    booking. Returns how many moved. Jobs already running keep the reservation until they end."""
    waiting = list(Job.objects.filter(booking=booking, status__in=WAITING_STATUSES).values_list("pk", "slurm_job_id"))
    in_slurm = [(pk, slurm_id) for pk, slurm_id in waiting if slurm_id]
    moved = [pk for pk, slurm_id in waiting if not slurm_id]  # submitted later, into the open queue
    if in_slurm:
        results = cluster.runner_for(booking.cluster).run_batch(
            [cluster.job_leave_reservation_argv(slurm_id) for _pk, slurm_id in in_slurm], timeout=SCONTROL_TIMEOUT)
        for (pk, slurm_id), result in zip(in_slurm, results):
            if result.rc == 0:
                moved.append(pk)
            else:
                log.warning("booking %s: job %s stays in the reservation: %s", booking.pk, slurm_id,
                            _slurm_words(result))
    if moved:
        Job.objects.filter(pk__in=moved, booking=booking).update(booking=None)
        audit.record(None, "booking.jobs_moved_out", target=booking, details={"jobs": [str(pk) for pk in moved]})
    return len(moved)


def delete_reservation(booking_id: str) -> None:
    """RQ task: delete the reservation of a cancelled or refused booking (gone already counts as done),
    after moving the jobs still waiting in it to the open queue.

    Slurm refuses while jobs RUN in it ("in_use"): then the booking stays "cancelling" (final, its
    reservation still made; the pages say so) and the beat asks again every RESERVATION_RETRY_AFTER,
    until the jobs end or the reservation's own end removes it."""
    booking = Booking.objects.select_related("cluster").filter(pk=booking_id).first()
    if booking is None or not booking.reservation_made or booking.state not in FINAL_BOOKING_STATES:
        return
    move_waiting_jobs_out(booking)
    result = cluster.runner_for(booking.cluster).run(cluster.reservation_delete_argv(booking.reservation_name),
                                                     timeout=SCONTROL_TIMEOUT)
    said = _slurm_words(result)
    code = cluster.reservation_refusal(result.stderr + result.stdout) if result.rc != 0 else ""
    if code == "in_use":
        log.info("booking %s: reservation %s still in use; the beat asks again", booking.pk, booking.reservation_name)
        return
    if code and code != "not_found":
        raise cluster.SlurmError(f"scontrol did not delete reservation {booking.reservation_name}: {said}")
    Booking.objects.filter(pk=booking.pk).update(reservation_made=False)
    audit.record(None, "booking.reservation_deleted", target=booking,
                 details={"reservation": booking.reservation_name})


def task_pending(rq_id: str) -> bool:
    """An RQ task of that id is waiting, scheduled for a retry, or running (False when RQ cannot say)."""
    try:
        from rq.exceptions import NoSuchJobError
        from rq.job import Job as RqJob

        try:
            job = RqJob.fetch(rq_id, connection=enqueue.queue().connection)
        except NoSuchJobError:
            return False
        return job.get_status(refresh=False) in ("queued", "started", "scheduled", "deferred")
    except Exception:  # noqa: BLE001 - enqueueing once more is harmless: the task does nothing twice
        return False
