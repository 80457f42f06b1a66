"""Webhook calls over REAL HTTP: receivers are `http.server` threads on 127.0.0.1 (allowed here by
WEBHOOK_ALLOWED_NETWORKS, as an admin would allow a lab network). Each call is verified with the
code docs/api.md gives users. Nothing is patched between `deliver.send` and the socket, except the
name lookup where a test plays a DNS answer, and the RQ queue, which records what would run.
"""
import json
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.utils import timezone

from jobs.models import DeliveryState, JobStatus, WebhookDelivery, WebhookSecret
from jobs.webhooks import deliver, guard, job_finished

from .api_helpers import make_job
from .test_webhooks import docs_verifier, queue  # noqa: F401 - fixture


class Receiver:
    """A webhook receiver on 127.0.0.1: answers each call with the next of `answers` (status,
    headers, delay), repeating the last; keeps every call it got."""

    def __init__(self, *answers):
        self.answers = list(answers) or [(200, {}, 0)]
        self.calls = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.calls.append({"headers": dict(self.headers), "body": body, "path": self.path})
                status, headers, delay = receiver.answers[min(len(receiver.calls), len(receiver.answers)) - 1]
                time.sleep(delay)  # a slow receiver is the behaviour under test (the sender's timeout)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path="/hook", host="127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receivers(settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    settings.WEBHOOK_TIMEOUT = 1
    made = []

    def make(*answers):
        made.append(Receiver(*answers))
        return made[-1]

    yield make
    for r in made:
        r.close()


@pytest.fixture
def secret(owner):
    return WebhookSecret.rotate(owner)


def ended_job(owner, template, url: str):
    job = make_job(owner, template, status=JobStatus.COMPLETED, name="Shoot 1", targets=2)
    job.callback_url = url
    job.save(update_fields=["callback_url"])
    return job_finished(job)


def test_a_call_arrives_signed_and_verifies_as_the_docs_say(owner, template, receivers, secret, queue):
    hook = receivers()
    delivery = ended_job(owner, template, hook.url("/in/ffp?team=vfx"))
    assert deliver.send(str(delivery.id)) == DeliveryState.DELIVERED
    (call,) = hook.calls
    headers = call["headers"]
    assert call["path"] == "/in/ffp?team=vfx"
    assert headers["Content-Type"] == "application/json"
    assert headers["X-FFP-Event"] == "job.completed" and headers["X-FFP-Delivery"] == str(delivery.id)
    assert docs_verifier()(secret, headers["X-FFP-Signature"], call["body"])
    assert not docs_verifier()("whsec_someone-else", headers["X-FFP-Signature"], call["body"])
    assert json.loads(call["body"])["status"] == "completed"
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts, delivery.last_status) == (DeliveryState.DELIVERED, 1, 200)
    assert delivery.duration_ms is not None and delivery.delivered_at and delivery.next_attempt_at is None


def test_a_failing_receiver_is_retried_with_backoff_and_finally_delivered(owner, template, receivers, secret, queue):
    hook = receivers((500, {}, 0), (503, {}, 0), (204, {}, 0))
    delivery = ended_job(owner, template, hook.url())
    t0 = timezone.now()
    assert deliver.send(str(delivery.id), now=t0) == DeliveryState.FAILED
    delivery.refresh_from_db()
    assert delivery.last_status == 500 and "HTTP 500" in delivery.last_error
    assert delivery.next_attempt_at == t0 + timedelta(seconds=30)
    assert queue.later[-1] == (t0 + timedelta(seconds=30), "jobs.webhooks.deliver.send", (str(delivery.id),))
    assert deliver.send(str(delivery.id), now=t0 + timedelta(seconds=10)) == ""  # not due yet: nothing sent
    assert len(hook.calls) == 1
    t1 = t0 + timedelta(seconds=30)
    assert deliver.send(str(delivery.id), now=t1) == DeliveryState.FAILED
    delivery.refresh_from_db()
    assert delivery.next_attempt_at == t1 + timedelta(seconds=120)
    assert deliver.send(str(delivery.id), now=t1 + timedelta(seconds=120)) == DeliveryState.DELIVERED
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts, delivery.last_status, delivery.last_error) == ("delivered", 3, 204, "")
    ids = {c["headers"]["X-FFP-Delivery"] for c in hook.calls}
    assert ids == {str(delivery.id)} and len(hook.calls) == 3  # one id for every retry: receivers dedupe


def test_one_attempt_is_sent_once_by_two_workers(owner, template, receivers, secret, queue):
    hook = receivers()
    delivery = ended_job(owner, template, hook.url())
    now = timezone.now()
    # Two workers read the row before either claims it: the conditional UPDATE lets one through.
    seen_by_a, seen_by_b = (WebhookDelivery.objects.get(pk=delivery.pk) for _ in range(2))
    assert deliver._claim(seen_by_a, now) is True
    assert deliver._claim(seen_by_b, now) is False
    # The attempt in flight is not due for anyone else, even with the row read afresh.
    assert deliver.send(str(delivery.id), now=now) == ""
    assert hook.calls == []


def test_a_redirect_is_not_followed_and_says_where_it_pointed(owner, template, receivers, secret, queue):
    inside = receivers()
    hook = receivers((302, {"Location": inside.url("/admin")}, 0))
    delivery = ended_job(owner, template, hook.url())
    assert deliver.send(str(delivery.id)) == DeliveryState.FAILED
    delivery.refresh_from_db()
    assert delivery.last_status == 302 and inside.url("/admin") in delivery.last_error
    assert inside.calls == []


def test_a_private_target_is_refused_when_not_allowed(owner, template, receivers, secret, queue, settings):
    hook = receivers()
    delivery = ended_job(owner, template, hook.url())
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    assert deliver.send(str(delivery.id)) == DeliveryState.GIVEN_UP
    delivery.refresh_from_db()
    assert "127.0.0.1" in delivery.last_error and "private" in delivery.last_error
    assert hook.calls == [] and queue.later == []


def test_a_name_resolving_to_a_private_address_is_refused(owner, template, receivers, secret, queue, settings,
                                                          monkeypatch):
    hook = receivers()
    monkeypatch.setattr(guard, "resolve", lambda host, port: ["127.0.0.1"])  # the DNS answer of a rebinding attack
    delivery = ended_job(owner, template, hook.url(host="hooks.example.com"))
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    assert deliver.send(str(delivery.id)) == DeliveryState.GIVEN_UP
    assert hook.calls == []


def test_a_name_is_resolved_once_and_sent_as_the_host_header(owner, template, receivers, secret, queue, monkeypatch):
    hook = receivers()
    looked_up = []

    def resolve(host, port):
        looked_up.append(host)
        return ["127.0.0.1"]  # allowed by this test's setting; the real name has no address here
    monkeypatch.setattr(guard, "resolve", resolve)
    delivery = ended_job(owner, template, hook.url(host="hooks.example.com"))
    looked_up.clear()
    assert deliver.send(str(delivery.id)) == DeliveryState.DELIVERED
    assert looked_up == ["hooks.example.com"]
    assert hook.calls[0]["headers"]["Host"] == f"hooks.example.com:{hook.port}"


def test_without_a_secret_nothing_is_sent_and_the_owner_is_told(owner, template, receivers, queue):
    hook = receivers()
    delivery = ended_job(owner, template, hook.url())
    assert deliver.send(str(delivery.id)) == DeliveryState.FAILED
    delivery.refresh_from_db()
    assert delivery.last_error == "no signing secret: create one on your Account page"
    assert hook.calls == []
    WebhookSecret.rotate(owner)  # made in time: the next try delivers it
    assert deliver.send(str(delivery.id), now=delivery.next_attempt_at) == DeliveryState.DELIVERED
    assert len(hook.calls) == 1


def test_410_gone_gives_up_at_once(owner, template, receivers, secret, queue):
    hook = receivers((410, {}, 0))
    delivery = ended_job(owner, template, hook.url())
    assert deliver.send(str(delivery.id)) == DeliveryState.GIVEN_UP
    assert queue.later == [] and len(hook.calls) == 1


def test_a_slow_receiver_times_out(owner, template, receivers, secret, queue):
    hook = receivers((200, {}, 2.5))  # WEBHOOK_TIMEOUT is 1 s here
    delivery = ended_job(owner, template, hook.url())
    assert deliver.send(str(delivery.id)) == DeliveryState.FAILED
    delivery.refresh_from_db()
    assert "did not answer within 1 seconds" in delivery.last_error


def test_a_closed_port_is_a_failed_attempt(owner, template, receivers, secret, queue):
    hook = receivers()
    url = hook.url()
    hook.close()
    delivery = ended_job(owner, template, url)
    assert deliver.send(str(delivery.id)) == DeliveryState.FAILED
    delivery.refresh_from_db()
    assert "refused the connection" in delivery.last_error


def test_retries_stop_after_the_max_age(owner, template, receivers, secret, queue, settings):
    settings.WEBHOOK_MAX_AGE = 1  # hour
    hook = receivers((500, {}, 0))
    delivery = ended_job(owner, template, hook.url())
    later = delivery.created_at + timedelta(minutes=45)
    WebhookDelivery.objects.filter(pk=delivery.pk).update(attempts=4, state=DeliveryState.FAILED,
                                                          next_attempt_at=later)
    assert deliver.send(str(delivery.id), now=later) == DeliveryState.GIVEN_UP  # the next try (1 h) is too late
    delivery.refresh_from_db()
    assert delivery.next_attempt_at is None and "Given up after 5 attempts" in delivery.last_error


def test_send_again_makes_one_more_attempt(owner, template, receivers, secret, queue,
                                           django_capture_on_commit_callbacks):
    hook = receivers((410, {}, 0), (200, {}, 0))
    delivery = ended_job(owner, template, hook.url())
    assert deliver.send(str(delivery.id)) == DeliveryState.GIVEN_UP
    delivery.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):
        assert deliver.send_again(delivery)
    assert queue.now[-1] == ("jobs.webhooks.deliver.send", (str(delivery.id),))
    assert deliver.send(str(delivery.id)) == DeliveryState.DELIVERED
    delivery.refresh_from_db()
    assert not deliver.send_again(delivery)  # delivered: nothing to send again


def test_lost_queue_entries_are_found_again(owner, template, receivers, secret, queue):
    delivery = ended_job(owner, template, "https://hooks.example.org/x")  # its queue entry lost (Redis down)
    assert deliver.send_due(now=timezone.now()) == 0  # not due for long enough yet
    assert deliver.send_due(now=timezone.now() + timedelta(minutes=5)) == 1
    assert queue.now[-1] == ("jobs.webhooks.deliver.send", (str(delivery.id),))


@pytest.fixture
def real_rq(settings, monkeypatch):
    """The portal's queue on a REAL Redis queue of this test's own, worked off by a burst SimpleWorker."""
    import uuid

    import redis
    from rq import Queue, SimpleWorker

    connection = redis.Redis.from_url(settings.REDIS_URL)
    q = Queue(f"test-webhooks-{uuid.uuid4().hex}", connection=connection, serializer=settings.RQ_SERIALIZER)
    monkeypatch.setattr("jobs.background.enqueue.queue", lambda: q)
    q.run = lambda: SimpleWorker([q], connection=connection, serializer=q.serializer).work(burst=True)
    yield q
    for rq_id in q.scheduled_job_registry.get_job_ids():
        q.scheduled_job_registry.remove(rq_id, delete_job=True)
    q.delete(delete_jobs=True)


def test_a_job_end_is_called_back_through_real_rq_and_retried(owner, template, receivers, secret, real_rq,
                                                               django_capture_on_commit_callbacks):
    from jobs.background import enqueue
    hook = receivers((500, {}, 0), (200, {}, 0))
    job = make_job(owner, template, status=JobStatus.COMPLETED, name="Shoot 1", targets=2)
    job.callback_url = hook.url()
    job.save(update_fields=["callback_url"])
    enqueue.enqueue_after_finish(job)  # what the watcher does on commit of the job's end
    with django_capture_on_commit_callbacks(execute=True):  # the worker runs in autocommit: on commit = at once
        real_rq.run()  # the email, the quota check, the call's record (its first attempt queued on commit)
    real_rq.run()  # the first attempt
    delivery = WebhookDelivery.objects.get()
    assert (delivery.state, delivery.attempts, len(hook.calls)) == (DeliveryState.FAILED, 1, 1)
    (scheduled,) = real_rq.scheduled_job_registry.get_job_ids()
    assert real_rq.scheduled_job_registry.get_scheduled_time(scheduled) == delivery.next_attempt_at.replace(microsecond=0)
    # 30 s later the scheduler puts it back on the queue: played here without waiting
    WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
    real_rq.enqueue_job(real_rq.fetch_job(scheduled))
    real_rq.run()
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts, len(hook.calls)) == (DeliveryState.DELIVERED, 2, 2)
    assert all(docs_verifier()(secret, c["headers"]["X-FFP-Signature"], c["body"]) for c in hook.calls)
