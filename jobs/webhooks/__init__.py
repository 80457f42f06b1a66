"""Webhooks: signed HTTP calls to a job's or booking's `callback_url`.

    from jobs import webhooks
    webhooks.job_finished(job)                   # the job-finish path (jobs.background.enqueue.enqueue_after_finish)
    webhooks.booking_event(booking, "confirmed")  # + the owner's email, per their preferences
    webhooks.check_callback_url(url)             # a problem in plain words, or None (API, booking forms)

Modules, by word:
    signing    the X-FFP-Signature header: make it, verify it (the reference for docs/api.md)
    guard      where a call may go (no private, loopback, link-local ... addresses; resolve once)
    transport  one POST to a checked address: no redirects, short timeouts, 4 KiB of answer
    deliver    a delivery's attempts: claim, sign, call, record, retry with backoff, give up
    events     the payloads of job and booking events, and the booking emails
"""
from jobs.webhooks.deliver import send, send_again, send_due
from jobs.webhooks.events import BOOKING_EVENTS, booking_event, job_finished
from jobs.webhooks.guard import check_callback_url
from jobs.webhooks.signing import verify

__all__ = ["BOOKING_EVENTS", "booking_event", "check_callback_url", "job_finished", "send", "send_again",
           "send_due", "verify"]
