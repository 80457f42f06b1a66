"""A file sent ahead of Start (the tus protocol: jobs/web/views/uploads.py), kept on disk until a
Start uses it, the user removes it, or it expires.

A file arrives in pieces, each written where the last stopped (`offset`); a closed tab or a lost
connection loses at most the piece in flight. Once complete it is checked at once (jobs.uploads.on_complete):
`ready` with what was found (faces, a video's frames), or `refused` with a plain reason. Start moves
a ready file into its job and deletes the row.
"""
from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from jobs.access import owned_by
from jobs.models.single_row import SingleRow


class UploadKind(models.TextChoices):
    SOURCE = "source", _("face photo")
    TARGET = "target", _("photo or video to change")
    REFERENCE = "reference", _("reference face")


class UploadStatus(models.TextChoices):
    RECEIVING = "receiving", _("uploading")
    READY = "ready", _("ready")
    REFUSED = "refused", _("refused")


class UploadQuerySet(models.QuerySet):
    def of(self, user):
        """Every lookup of an upload goes through here: the user's own (jobs.access)."""
        return self.filter(owned_by(user, "owner"))

    def expired(self, now=None):
        return self.filter(expires_at__lte=now or timezone.now())


class Upload(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="uploads")
    kind = models.CharField(max_length=16, choices=UploadKind.choices)
    name = models.CharField(max_length=500)  # as the browser named it (shown; stored under safe_name)
    size = models.BigIntegerField()  # Upload-Length: the whole file's bytes
    offset = models.BigIntegerField(default=0)  # bytes received so far
    received = models.BigIntegerField(default=0)  # bytes written in all, re-sent ones included
    status = models.CharField(max_length=16, choices=UploadStatus.choices, default=UploadStatus.RECEIVING)
    problem = models.TextField(blank=True)  # why it was refused, in plain words
    #: what the check found: {"media": "image"|"video", "width", "height", "faces", "face_box",
    #: "duration", "fps", "frames"}; shown on the form, and used by the estimate
    info = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    expires_at = models.DateTimeField()

    objects = UploadQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["owner", "kind", "created_at"]), models.Index(fields=["expires_at"])]
        verbose_name = _("file sent ahead")
        verbose_name_plural = _("files sent ahead")

    def __str__(self) -> str:
        return f"{self.name} ({self.get_status_display()})"

    @property
    def path(self) -> Path:
        """The bytes received, in the owner's private upload folder (never served as static)."""
        return upload_dir(self.owner_id) / str(self.id)

    @property
    def preview_path(self) -> Path:
        """A small JPEG: the face found (face photos), the first frame (videos), the picture (targets)."""
        return upload_dir(self.owner_id) / f"{self.id}.preview.jpg"

    @property
    def is_complete(self) -> bool:
        return self.offset >= self.size

    @property
    def is_video(self) -> bool:
        return self.info.get("media") == "video"

    def touch(self) -> None:
        """Push the expiry back: an upload in use (being sent, or shown on a form) is kept."""
        self.expires_at = timezone.now() + UploadPolicy.current().expiry

    def remove_files(self) -> None:
        for p in (self.path, self.preview_path):
            p.unlink(missing_ok=True)


def upload_dir(owner_id) -> Path:
    return Path(settings.MEDIA_ROOT) / "users" / str(owner_id) / "uploads"


class UploadPolicy(SingleRow):
    """How long files sent ahead of Start are kept unused (one row, edited in the admin)."""

    expiry_hours = models.PositiveIntegerField(
        _("keep unused uploads for (hours)"), default=24, validators=[MinValueValidator(1), MaxValueValidator(24 * 90)],
        help_text=_("Files sent on the New job page but not used by a Start are deleted after this long "
                    "(counted from the last time they were sent to or shown)."))

    class Meta:
        verbose_name = _("upload settings")
        verbose_name_plural = _("upload settings")

    def __str__(self) -> str:
        return str(_("Upload settings"))

    @property
    def expiry(self) -> timedelta:
        return timedelta(hours=self.expiry_hours)
