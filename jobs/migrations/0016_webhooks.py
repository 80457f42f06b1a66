"""Webhooks (issue 13): each user's signing secret, each delivery with its attempts, and the
booking emails' switch on the notification preferences."""
import uuid

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

import jobs.secrets


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0015_bookings"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="notificationpreference",
            name="booking_emails",
            field=models.BooleanField(default=True, verbose_name="email me about my GPU bookings (confirmed, starting, ending, refused)"),
        ),
        migrations.AlterField(
            model_name="emailnotice",
            name="kind",
            field=models.CharField(choices=[("job_finished", "job ended"), ("quota_80", "80 % of the monthly GPU-hours"), ("quota_100", "monthly GPU-hours used up"), ("booking", "booking")], max_length=16, verbose_name="kind"),
        ),
        migrations.CreateModel(
            name="WebhookDelivery",
            fields=[
                ("id", models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ("key", models.CharField(blank=True, editable=False, max_length=120, null=True, unique=True)),
                ("url", models.URLField(max_length=2000, verbose_name="URL")),
                ("event", models.CharField(db_index=True, max_length=40, verbose_name="event")),
                ("payload", models.JSONField(default=dict, verbose_name="payload")),
                ("state", models.CharField(choices=[("pending", "waiting to be sent"), ("delivered", "delivered"), ("failed", "failed, will try again"), ("given_up", "given up")], db_index=True, default="pending", max_length=16, verbose_name="state")),
                ("attempts", models.PositiveIntegerField(default=0, verbose_name="attempts")),
                ("last_status", models.PositiveSmallIntegerField(blank=True, null=True, verbose_name="HTTP status")),
                ("last_error", models.TextField(blank=True, verbose_name="last error")),
                ("duration_ms", models.PositiveIntegerField(blank=True, null=True, verbose_name="duration (ms)")),
                ("next_attempt_at", models.DateTimeField(blank=True, db_index=True, null=True, verbose_name="next attempt")),
                ("created_at", models.DateTimeField(auto_now_add=True, db_index=True, verbose_name="created")),
                ("delivered_at", models.DateTimeField(blank=True, null=True, verbose_name="delivered")),
                ("booking", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="webhook_deliveries", to="jobs.booking", verbose_name="booking")),
                ("job", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="webhook_deliveries", to="jobs.job", verbose_name="job")),
                ("user", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="webhook_deliveries", to=settings.AUTH_USER_MODEL, verbose_name="user")),
            ],
            options={
                "verbose_name": "webhook delivery",
                "verbose_name_plural": "webhook deliveries",
                "ordering": ["-created_at"],
            },
        ),
        migrations.CreateModel(
            name="WebhookSecret",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("secret", jobs.secrets.EncryptedTextField(verbose_name="signing secret")),
                ("created_at", models.DateTimeField(auto_now_add=True, verbose_name="created")),
                ("rotated_at", models.DateTimeField(default=django.utils.timezone.now, verbose_name="last changed")),
                ("user", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name="webhook_secret", to=settings.AUTH_USER_MODEL, verbose_name="user")),
            ],
            options={
                "verbose_name": "webhook signing secret",
                "verbose_name_plural": "webhook signing secrets",
            },
        ),
    ]
