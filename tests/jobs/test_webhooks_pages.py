"""The owner's webhook pages: the signing secret on the Account page (shown once, rotated with a
confirmation, audited), the Webhook calls page (own calls only, "Send again"), the booking emails
switch, and the admin's read-only list."""
from django.urls import reverse

from jobs.models import AuditEntry, DeliveryState, NotificationPreference, WebhookDelivery, WebhookSecret

from .test_webhooks import queue  # noqa: F401 - fixture


def delivery_of(user, **fields) -> WebhookDelivery:
    fields.setdefault("state", DeliveryState.FAILED)
    fields.setdefault("url", "https://hooks.example.org/ffp")
    return WebhookDelivery.objects.create(user=user, event="job.failed",
                                          last_error="The receiver answered HTTP 500.", last_status=500,
                                          attempts=3, duration_ms=42, **fields)


def test_a_new_secret_is_shown_once(client, owner):
    client.force_login(owner)
    assert "Create a secret" in client.get(reverse("account")).content.decode()
    r = client.post(reverse("webhook-secret"))
    secret = WebhookSecret.objects.get(user=owner).secret
    assert r.status_code == 200 and secret in r.content.decode()
    assert "no-store" in r["Cache-Control"]
    again = client.get(reverse("account")).content.decode()
    assert secret not in again and "Rotate the secret" in again
    assert AuditEntry.objects.filter(action="webhook_secret.create", actor=owner).count() == 1


def test_rotating_asks_first_then_replaces_the_secret(client, owner):
    old = WebhookSecret.rotate(owner)
    client.force_login(owner)
    r = client.post(reverse("webhook-secret"))
    assert "The current one stops working" in r.content.decode()
    assert WebhookSecret.objects.get(user=owner).secret == old
    r = client.post(reverse("webhook-secret"), {"confirm": "yes"})
    new = WebhookSecret.objects.get(user=owner).secret
    assert new != old and new in r.content.decode() and old not in r.content.decode()
    assert AuditEntry.objects.filter(action="webhook_secret.rotate", actor=owner).count() == 1


def test_the_secret_is_encrypted_in_the_database(owner):
    from django.db import connection
    secret = WebhookSecret.rotate(owner)
    with connection.cursor() as cursor:
        cursor.execute("SELECT secret FROM jobs_webhooksecret")
        (stored,) = cursor.fetchone()
    assert secret not in stored and stored.startswith("gAAAAA")


def test_the_calls_page_lists_only_the_users_own(client, owner, stranger):
    mine, theirs = delivery_of(owner), delivery_of(stranger, url="https://theirs.example.org/x")
    client.force_login(owner)
    body = client.get(reverse("webhooks")).content.decode()
    assert str(mine.id) in body and "The receiver answered HTTP 500." in body and "42 ms" in body
    assert str(theirs.id) not in body and "theirs.example.org" not in body
    assert "You have no signing secret yet" in body


def test_send_again_is_owner_only_and_only_for_failed_calls(client, owner, stranger, queue,
                                                            django_capture_on_commit_callbacks):
    theirs = delivery_of(stranger)
    client.force_login(owner)
    assert client.post(reverse("webhook-send-again", args=[theirs.id])).status_code == 404
    mine = delivery_of(owner)
    with django_capture_on_commit_callbacks(execute=True):
        r = client.post(reverse("webhook-send-again", args=[mine.id]))
    assert r.status_code == 302
    mine.refresh_from_db()
    assert mine.state == DeliveryState.PENDING
    assert queue.now == [("jobs.webhooks.deliver.send", (str(mine.id),))]
    delivered = delivery_of(owner, state=DeliveryState.DELIVERED)
    client.post(reverse("webhook-send-again", args=[delivered.id]))
    delivered.refresh_from_db()
    assert delivered.state == DeliveryState.DELIVERED and len(queue.now) == 1


def test_the_pages_need_a_login(client, db):
    assert client.get(reverse("webhooks")).status_code == 302
    assert client.post(reverse("webhook-secret")).status_code == 302
    assert not WebhookSecret.objects.exists()


def test_booking_emails_can_be_turned_off(client, owner):
    client.force_login(owner)
    assert "Email me about my GPU bookings" in client.get(reverse("account")).content.decode()
    client.post(reverse("notification-settings"), {"job_emails": "on", "quota_emails": "on"})
    pref = NotificationPreference.objects.get(user=owner)
    assert pref.job_emails and pref.quota_emails and not pref.booking_emails


def test_admins_see_every_call_read_only(client, staff, owner):
    delivery = delivery_of(owner)
    client.force_login(staff)
    r = client.get(reverse("admin:jobs_webhookdelivery_changelist") + "?state=failed")
    assert r.status_code == 200 and "hooks.example.org" in r.content.decode()
    r = client.get(reverse("admin:jobs_webhookdelivery_change", args=[delivery.id]))
    assert r.status_code == 200 and 'name="_save"' not in r.content.decode()
    assert client.get(reverse("admin:jobs_webhookdelivery_add")).status_code == 403
