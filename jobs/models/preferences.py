"""A user's choices (which emails, which language), and what the portal emailed whom.

`NotificationPreference` is a user's opt-out (no row means "yes, email me": the defaults).
`LanguagePreference` is the language a user chose for the portal (no row, or "", means "follow my
browser": its Accept-Language decides).
`EmailNotice` is one email the portal decided to send, with its outcome. Its unique `key` is
what makes a notice go out once: "job:<uuid>" for a job's end, "quota:80:2026-07:<user id>" for
a quota threshold in a month. The row is claimed (inserted) BEFORE the send, so two workers
racing on the same notice cannot both send it; a failed send stays visible here, with the error.
"""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class NotificationPreference(models.Model):
    """Which emails one user gets. Missing row = the defaults (every email on)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_preference")
    job_emails = models.BooleanField(_("email me when a job ends"), default=True)
    quota_emails = models.BooleanField(_("email me at 80 % and 100 % of my monthly GPU-hours"), default=True)
    booking_emails = models.BooleanField(_("email me about my GPU bookings (confirmed, starting, ending, refused)"),
                                         default=True)

    class Meta:
        verbose_name = _("notification preference")
        verbose_name_plural = _("notification preferences")

    def __str__(self) -> str:
        return str(self.user)

    @classmethod
    def for_user(cls, user) -> "NotificationPreference":
        """The user's preferences; an unsaved default row when they never changed them."""
        return cls.objects.filter(user=user).first() or cls(user=user)


class LanguagePreference(models.Model):
    """The portal's language for one user. Missing row or "" = follow the browser's preference.

    Applied on every request of a logged-in user by `jobs.web.language.AccountLanguageMiddleware`;
    the language switch in the top bar and the account page both write it.
    """

    #: what `language` holds when the user follows their browser
    FOLLOW_BROWSER = ""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="language_preference")
    # One of settings.LANGUAGES' codes, or "" (checked by the form and the switch, not by choices:
    # the list of languages is a setting, and a setting must not change the schema).
    language = models.CharField(_("language"), max_length=16, blank=True, default=FOLLOW_BROWSER)

    class Meta:
        verbose_name = _("language preference")
        verbose_name_plural = _("language preferences")

    def __str__(self) -> str:
        return f"{self.user}: {self.language or 'browser'}"

    @classmethod
    def language_of(cls, user) -> str:
        """The language code `user` chose, or "" when they follow their browser."""
        return cls.objects.filter(user=user).values_list("language", flat=True).first() or cls.FOLLOW_BROWSER

    @classmethod
    def choose(cls, user, language: str) -> None:
        """Remember `language` ("" = follow the browser) for `user`."""
        cls.objects.update_or_create(user=user, defaults={"language": language})


class NoticeKind(models.TextChoices):
    JOB_FINISHED = "job_finished", _("job ended")
    # A label, never %-formatted: the "% o" in it is not a placeholder.
    # xgettext:no-python-format
    QUOTA_80 = "quota_80", _("80 % of the monthly GPU-hours")
    QUOTA_100 = "quota_100", _("monthly GPU-hours used up")
    BOOKING = "booking", _("booking")
    RETENTION = "retention", _("files to be deleted soon")
    NODE_DOWN = "node_down", _("a cluster node stopped taking work")


class NoticeStatus(models.TextChoices):
    SENDING = "sending", _("sending")
    SENT = "sent", _("sent")
    FAILED = "failed", _("failed")
    SKIPPED = "skipped", _("not sent")  # opted out, or no email address


class EmailNotice(models.Model):
    """One notification email: claimed by its key before sending, then marked sent or failed."""

    key = models.CharField(max_length=120, unique=True)
    kind = models.CharField(_("kind"), max_length=16, choices=NoticeKind.choices)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="email_notices")
    job = models.ForeignKey("jobs.Job", on_delete=models.SET_NULL, null=True, blank=True, related_name="email_notices")
    period = models.DateField(_("month"), null=True, blank=True)  # quota notices: the month they are about
    status = models.CharField(_("status"), max_length=10, choices=NoticeStatus.choices, default=NoticeStatus.SENDING)
    to = models.CharField(_("to"), max_length=254, blank=True)
    subject = models.CharField(_("subject"), max_length=300, blank=True)
    error = models.TextField(_("error"), blank=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    sent_at = models.DateTimeField(_("sent"), null=True, blank=True)

    class Meta:
        verbose_name = _("email notice")
        verbose_name_plural = _("email notices")
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.subject or self.key
