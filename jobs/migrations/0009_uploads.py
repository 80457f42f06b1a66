# Files sent ahead of Start (tus), and how long unused ones are kept.
import uuid

import django.core.validators
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0008_indexes_for_big_jobs"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Upload",
            fields=[
                ("id", models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ("kind", models.CharField(choices=[("source", "face photo"), ("target", "photo or video to change"),
                                                   ("reference", "reference face")], max_length=16)),
                ("name", models.CharField(max_length=500)),
                ("size", models.BigIntegerField()),
                ("offset", models.BigIntegerField(default=0)),
                ("received", models.BigIntegerField(default=0)),
                ("status", models.CharField(choices=[("receiving", "uploading"), ("ready", "ready"), ("refused", "refused")],
                                            default="receiving", max_length=16)),
                ("problem", models.TextField(blank=True)),
                ("info", models.JSONField(blank=True, default=dict)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                ("expires_at", models.DateTimeField()),
                ("owner", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="uploads",
                                            to=settings.AUTH_USER_MODEL)),
            ],
            options={
                "indexes": [models.Index(fields=["owner", "kind", "created_at"], name="jobs_upload_owner_i_b87647_idx"),
                            models.Index(fields=["expires_at"], name="jobs_upload_expires_42af43_idx")],
            },
        ),
        migrations.CreateModel(
            name="UploadPolicy",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("expiry_hours", models.PositiveIntegerField(
                    default=24, help_text="Files sent on the New job page but not used by a Start are deleted after "
                                          "this long (counted from the last time they were sent to or shown).",
                    validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(2160)],
                    verbose_name="keep unused uploads for (hours)")),
            ],
            options={"verbose_name": "upload settings", "verbose_name_plural": "upload settings"},
        ),
    ]
