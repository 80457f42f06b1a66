"""Webhooks without the network: the signature (and the docs' verifier), where calls may go (the
SSRF guard, with a played DNS seam), the API's check of callback_url, what job and booking events
record, and the booking emails (Django's locmem outbox)."""
import ipaddress
import re
from pathlib import Path

import pytest
from django.core import mail

from jobs.models import Booking, BookingState, EmailNotice, JobStatus, NotificationPreference, WebhookDelivery
from jobs.webhooks import booking_event, check_callback_url, deliver, events, guard, job_finished, signing

from .api_helpers import image, make_job, token_client

DOCS = Path(__file__).resolve().parents[2] / "docs" / "api.md"
SECRET = "whsec_test-secret"


class Recorder:
    """Stands in for the RQ queue (`jobs.background.enqueue.queue`): remembers what would run, and when."""

    def __init__(self):
        self.now, self.later = [], []

    def enqueue(self, func, *args, **options):
        self.now.append((func, args))

    def enqueue_at(self, at, func, *args, **options):
        self.later.append((at, func, args))


@pytest.fixture
def queue(monkeypatch, settings):
    settings.SITE_URL = "https://portal.example.org"
    q = Recorder()
    monkeypatch.setattr("jobs.background.enqueue.queue", lambda: q)
    return q


def docs_verifier():
    """`verify_ffp_signature` exactly as docs/api.md gives it to users."""
    text = DOCS.read_text()
    code = re.search(r"```python\n(.*?def verify_ffp_signature.*?)```", text, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, "docs/api.md", "exec"), namespace)  # noqa: S102 - our own docs, checked here
    return namespace["verify_ffp_signature"]


def make_booking(user, **fields) -> Booking:
    fields.setdefault("task_name", "face-swap batch 12")
    fields.setdefault("duration_minutes", 120)
    return Booking.objects.create(user=user, **fields)


# ---- the signature --------------------------------------------------------------------------------

def test_a_signature_verifies_with_the_docs_code_and_the_reference():
    import time
    body = b'{"event":"job.completed","id":"x"}'
    header = signing.signature_header(SECRET, int(time.time()), body)
    assert re.fullmatch(r"t=\d+,v1=[0-9a-f]{64}", header)
    verify = docs_verifier()
    assert verify(SECRET, header, body) and signing.verify(SECRET, header, body)
    assert not verify(SECRET, header, body + b" ") and not signing.verify(SECRET, header, body + b" ")
    assert not verify("whsec_other", header, body) and not signing.verify("whsec_other", header, body)


def test_an_old_or_future_timestamp_is_refused_as_a_replay():
    import time
    body = b"{}"
    for skew in (-301, 301):
        header = signing.signature_header(SECRET, int(time.time()) + skew, body)
        assert not docs_verifier()(SECRET, header, body)
        assert not signing.verify(SECRET, header, body)
    header = signing.signature_header(SECRET, int(time.time()) - 200, body)
    assert docs_verifier()(SECRET, header, body) and signing.verify(SECRET, header, body)


@pytest.mark.parametrize("header", ["", "t=abc,v1=00", "v1=" + "0" * 64, "t=1700000000"])
def test_a_malformed_header_never_verifies(header):
    assert not signing.verify(SECRET, header, b"{}", now=1700000000)
    assert not docs_verifier()(SECRET, header, b"{}")


# ---- where calls may go -----------------------------------------------------------------------------

@pytest.mark.parametrize("address", [
    "127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "224.0.0.1", "0.0.0.0",
    "240.0.0.1", "100.64.0.1", "::1", "fe80::1", "fc00::1", "ff02::1", "::", "::ffff:127.0.0.1", "::ffff:10.0.0.1",
])
def test_non_public_addresses_are_refused(address):
    assert guard.address_refused(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["8.8.8.8", "93.184.216.34", "2606:4700::1111"])
def test_public_addresses_are_allowed(address):
    assert not guard.address_refused(ipaddress.ip_address(address))


def test_an_allowed_network_lets_its_addresses_through(settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = ["10.20.0.0/16", "127.0.0.1/32"]
    assert not guard.address_refused(ipaddress.ip_address("10.20.3.4"))
    assert not guard.address_refused(ipaddress.ip_address("127.0.0.1"))
    assert guard.address_refused(ipaddress.ip_address("10.21.0.1"))
    assert guard.address_refused(ipaddress.ip_address("127.0.0.2"))


def play_dns(monkeypatch, answers: dict[str, list[str]]):
    monkeypatch.setattr(guard, "resolve", lambda host, port: answers[host])


def test_a_public_name_that_resolves_to_a_private_address_is_refused(monkeypatch):
    play_dns(monkeypatch, {"hooks.example.com": ["93.184.216.34", "10.0.0.5"]})  # ANY private address refuses
    problem = check_callback_url("https://hooks.example.com/ffp")
    assert problem and "10.0.0.5" in problem
    with pytest.raises(guard.Refused) as refused:
        guard.checked_callback("https://hooks.example.com/ffp")
    assert not refused.value.retry


def test_a_checked_callback_connects_to_the_address_it_checked(monkeypatch):
    play_dns(monkeypatch, {"hooks.example.com": ["93.184.216.34"]})
    callback = guard.checked_callback("https://hooks.example.com:8443/in/ffp?x=1")
    assert callback == guard.CheckedCallback("https", "hooks.example.com", 8443, "/in/ffp?x=1", "93.184.216.34")


@pytest.mark.parametrize("url", ["ftp://example.org/x", "file:///etc/passwd", "gopher://x/", "http://u:p@example.org/"])
def test_only_plain_http_and_https_urls_are_taken(url):
    assert check_callback_url(url)


def test_a_name_that_does_not_resolve_now_is_accepted_at_creation_but_retried_at_call(monkeypatch):
    def fail(host, port):
        raise OSError("no DNS")
    monkeypatch.setattr(guard, "resolve", fail)
    assert check_callback_url("https://later.example.net/hook") is None
    with pytest.raises(guard.Refused) as refused:
        guard.checked_callback("https://later.example.net/hook")
    assert refused.value.retry


def test_the_api_refuses_a_private_callback_for_a_job(owner, template, jpeg_bytes, settings):
    api = token_client(owner)[0]
    form = {"template": template.slug, "source": [image("face.jpg", jpeg_bytes)],
            "targets": [image("a.jpg", jpeg_bytes)], "consent": "true"}
    r = api.post("/api/v1/jobs", {**form, "callback_url": "http://169.254.169.254/latest/meta-data"})
    assert r.status_code == 400 and r.json()["field"] == "callback_url"
    assert "169.254.169.254" in r.json()["error"]
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    form["source"], form["targets"] = [image("face.jpg", jpeg_bytes)], [image("a.jpg", jpeg_bytes)]
    r = api.post("/api/v1/jobs", {**form, "callback_url": "http://127.0.0.1:9/hook"})
    assert r.status_code == 201, r.content


# ---- what events record -------------------------------------------------------------------------------

def test_a_job_end_records_one_call_sent_on_commit(owner, template, queue, django_capture_on_commit_callbacks):
    job = make_job(owner, template, status=JobStatus.COMPLETED, name="Shoot 1", targets=4)
    job.callback_url = "https://hooks.example.org/ffp"
    with django_capture_on_commit_callbacks(execute=True):
        first = job_finished(job)
        assert queue.now == []  # nothing leaves before the commit
    assert job_finished(job) is None  # the same end again: not a second call
    assert WebhookDelivery.objects.count() == 1
    assert queue.now == [("jobs.webhooks.deliver.send", (str(first.id),))]
    assert first.event == "job.completed" and first.user == owner and first.job == job
    assert first.payload == {
        "event": "job.completed", "id": str(job.id), "name": "Shoot 1", "status": "completed",
        "progress": {"total": 4, "done": 0, "failed": 0}, "url": f"https://portal.example.org/jobs/{job.id}",
        "api_url": f"https://portal.example.org/api/v1/jobs/{job.id}", "finished_at": None}


def test_a_job_without_a_callback_or_not_ended_records_nothing(owner, template, queue):
    assert job_finished(make_job(owner, template, status=JobStatus.COMPLETED)) is None
    running = make_job(owner, template, status=JobStatus.RUNNING)
    running.callback_url = "https://hooks.example.org/ffp"
    assert job_finished(running) is None
    assert not WebhookDelivery.objects.exists()


def test_the_finish_path_queues_the_call_only_for_a_job_with_a_callback(owner, template, queue,
                                                                      django_capture_on_commit_callbacks):
    from jobs.background import enqueue
    job = make_job(owner, template, status=JobStatus.FAILED)
    enqueue.enqueue_after_finish(job)
    assert "jobs.webhooks.events.job_finished_by_id" not in [f for f, _ in queue.now]
    job.callback_url = "https://hooks.example.org/ffp"
    job.save(update_fields=["callback_url"])
    enqueue.enqueue_after_finish(job)
    assert ("jobs.webhooks.events.job_finished_by_id", (str(job.id),)) in queue.now
    with django_capture_on_commit_callbacks(execute=True):  # the worker runs it in autocommit
        delivery_id = events.job_finished_by_id(str(job.id))
    assert WebhookDelivery.objects.get().event == "job.failed" and delivery_id
    assert ("jobs.webhooks.deliver.send", (delivery_id,)) in queue.now


def test_a_booking_event_records_its_call_and_its_email_once(owner, queue, django_capture_on_commit_callbacks):
    booking = make_booking(owner, callback_url="https://hooks.example.org/b", state=BookingState.CONFIRMED,
                           reservation_name="ffp-abc")
    with django_capture_on_commit_callbacks(execute=True):
        delivery = booking_event(booking, "confirmed")
        assert booking_event(booking, "confirmed") is None
    assert delivery.event == "booking.confirmed" and delivery.payload["reservation"] == "ffp-abc"
    assert delivery.payload["url"].endswith(f"/bookings/{booking.id}")
    emails = [args for func, args in queue.now if func == "jobs.webhooks.events.email_booking_event"]
    assert emails == [(str(booking.id), "confirmed")] * 2  # decided twice ...
    for args in emails:
        events.email_booking_event(*args)
    assert len(mail.outbox) == 1  # ... emailed once
    message = mail.outbox[0]
    assert message.subject == "[FaceFusion Portal] Your booking “face-swap batch 12” is confirmed"
    assert f"https://portal.example.org/bookings/{booking.id}" in message.body


def test_an_unknown_booking_event_is_a_programming_error(owner, queue):
    with pytest.raises(ValueError):
        booking_event(make_booking(owner), "exploded")


def test_booking_emails_follow_the_preference_and_the_bookings_language(owner, queue):
    booking = make_booking(owner, state=BookingState.REFUSED, reason="Not enough H200 GPUs then.", language="zh-hans")
    assert events.email_booking_event(str(booking.id), "refused") == "sent"
    assert "预约" in mail.outbox[0].subject and "Not enough H200 GPUs then." in mail.outbox[0].body
    NotificationPreference.objects.create(user=owner, booking_emails=False)
    assert events.email_booking_event(str(booking.id), "cancelled") == "skipped"
    assert len(mail.outbox) == 1
    assert EmailNotice.objects.get(key=f"booking:{booking.id}:cancelled").error == "opted out of booking emails"


def test_waiting_calls_back_but_sends_no_email(owner, queue, django_capture_on_commit_callbacks):
    booking = make_booking(owner, callback_url="https://hooks.example.org/b", state=BookingState.WAITING)
    with django_capture_on_commit_callbacks(execute=True):
        assert booking_event(booking, "waiting") is not None
    assert [f for f, _ in queue.now] == ["jobs.webhooks.deliver.send"]


# ---- the retry schedule --------------------------------------------------------------------------------

def test_the_backoff_grows_then_repeats_every_two_hours():
    assert [deliver.retry_delay(n) for n in range(1, 9)] == [30, 120, 600, 1800, 3600, 7200, 7200, 7200]


def test_a_job_cancelled_before_slurm_saw_it_calls_back_too(owner, template, queue,
                                                            django_capture_on_commit_callbacks):
    from jobs.job.lifecycle import request_cancel
    job = make_job(owner, template, status=JobStatus.QUEUED)
    job.callback_url = "https://hooks.example.org/ffp"
    job.save(update_fields=["callback_url"])
    with django_capture_on_commit_callbacks(execute=True):
        assert request_cancel(job, actor=owner)
    delivery = WebhookDelivery.objects.get()
    assert delivery.event == "job.cancelled" and delivery.job == job
    assert ("jobs.webhooks.deliver.send", (str(delivery.id),)) in queue.now
