"""GPU bookings: a user's request for GPU time, realised as a Slurm reservation (docs/bookings.md).

    GpuType        one kind of GPU on one cluster: Slurm's gres type -> memory, compute capability,
                   and how many the cluster has (read from the cluster, never typed in)
    BookingPolicy  the admin's booking rules (one row)
    Booking        one request: what GPUs, when, for how long, at what priority; its state and the
                   Slurm reservation that holds the time

Slurm 22.05 cannot put GPUs in a reservation ("TRES type 'gres/gpu' not supported with
reservations"), so a booking's reservation holds the CORES that go with its GPUs on a node that has
them (docs/bookings.md); that no GPU type is ever booked beyond its inventory is the portal's rule,
checked race-safe in `jobs.bookings`.
"""
from __future__ import annotations

import uuid
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from jobs.access import owned_by


def capability_tuple(text: str) -> tuple[int, ...]:
    """"8.0" -> (8, 0); "9" -> (9,). ValueError for anything else (compare capabilities as numbers)."""
    parts = str(text).strip().split(".")
    if not parts or len(parts) > 2 or not all(p.isdigit() for p in parts):
        raise ValueError(f"not a compute capability: {text!r}")
    return tuple(int(p) for p in parts)


def _check_capability(value: str) -> None:
    try:
        capability_tuple(value)
    except ValueError:
        raise ValidationError(_("Write the compute capability as a number like 8.0 or 9.0.")) from None


class GpuType(models.Model):
    """One GPU type of one cluster, e.g. h200 on the "main" profile: 141 GB, compute capability 9.0.

    The admin names the gres type and says what the card is; `inventory` (how many the cluster has)
    and `cores_per_gpu` are read from the cluster (jobs.bookings.inventory), so a booking can never be
    confirmed beyond what exists.
    """

    cluster = models.ForeignKey("jobs.ClusterProfile", on_delete=models.CASCADE, related_name="gpu_types",
                                verbose_name=_("cluster profile"))
    gres_type = models.CharField(_("Slurm GPU type"), max_length=64,
                                 help_text=_("The type in the cluster's gres, e.g. h200 for gpu:h200."))
    label = models.CharField(_("name shown to users"), max_length=100, blank=True,
                             help_text=_("E.g. NVIDIA H200 141 GB. Empty: the Slurm type."))
    memory_gb = models.PositiveIntegerField(_("memory (GB)"))
    compute_capability = models.CharField(_("compute capability"), max_length=8, validators=[_check_capability],
                                          help_text=_("E.g. 8.0 for A100, 9.0 for H100 and H200."))
    is_active = models.BooleanField(_("bookable"), default=True)

    # Read from the cluster (sinfo): the GPUs of this type and the nodes that have them.
    inventory = models.PositiveIntegerField(_("GPUs on the cluster"), default=0, editable=False)
    nodes = models.JSONField(_("nodes"), default=list, blank=True, editable=False,
                             help_text=_("[{\"name\", \"gpus\", \"cpus\"}] as the cluster last said."))
    inventory_checked_at = models.DateTimeField(_("last counted"), null=True, blank=True, editable=False)

    class Meta:
        verbose_name = _("GPU type")
        verbose_name_plural = _("GPU types")
        ordering = ["cluster__name", "gres_type"]
        constraints = [models.UniqueConstraint(fields=["cluster", "gres_type"], name="gpu_type_once_per_cluster")]

    def __str__(self) -> str:
        return self.display_name

    @property
    def display_name(self) -> str:
        return self.label or self.gres_type

    def satisfies(self, *, min_memory_gb: int | float | None, compute_capability: str | None) -> bool:
        if min_memory_gb is not None and self.memory_gb < Decimal(str(min_memory_gb)):
            return False
        if compute_capability:
            return capability_tuple(self.compute_capability) >= capability_tuple(compute_capability)
        return True


class Approval(models.TextChoices):
    AUTOMATIC = "automatic", _("automatic: confirmed when GPUs are free")
    MANUAL = "manual", _("manual: an admin approves each booking")


#: the farthest the admin's booking rules reach: a year ahead, bookings of up to a year
POLICY_MAX_DAYS_AHEAD = 366
POLICY_MAX_HOURS = 366 * 24


class BookingPolicy(models.Model):
    """The admin's booking rules. One row (`BookingPolicy.current()`)."""

    unit_minutes = models.PositiveIntegerField(
        _("booking unit (minutes)"), default=30, validators=[MinValueValidator(5), MaxValueValidator(24 * 60)],
        help_text=_("Starts and lengths are rounded up to this. 30 minutes to 2 hours suits most sites."))
    min_minutes = models.PositiveIntegerField(_("shortest booking (minutes)"), default=30,
                                              validators=[MinValueValidator(1)])
    max_hours = models.PositiveIntegerField(_("longest booking (hours)"), default=24, validators=[MinValueValidator(1)])
    max_days_ahead = models.PositiveIntegerField(_("how far ahead (days)"), default=30,
                                                 validators=[MinValueValidator(1)])
    free_percent = models.PositiveIntegerField(
        _("GPUs kept for unbooked work (%)"), default=0, validators=[MaxValueValidator(100)],
        help_text=_("This share of each GPU type is never booked, so jobs without a booking always find GPUs."))
    approval = models.CharField(_("approval"), max_length=16, choices=Approval.choices, default=Approval.AUTOMATIC)
    updated_at = models.DateTimeField(_("changed"), auto_now=True)

    class Meta:
        verbose_name = _("booking rules")
        verbose_name_plural = _("booking rules")

    def __str__(self) -> str:
        return str(_("Booking rules"))

    @classmethod
    def current(cls) -> "BookingPolicy":
        return cls.objects.order_by("pk").first() or cls.objects.create()

    def clean(self) -> None:
        # Bounded here, not by field validators (no migration): a horizon or a length of millions
        # of days takes every booking's dates past year 9999, and each placement walks the horizon
        # unit by unit.
        problems = {}
        if self.max_days_ahead and self.max_days_ahead > POLICY_MAX_DAYS_AHEAD:
            problems["max_days_ahead"] = _("At most %(days)d days ahead.") % {"days": POLICY_MAX_DAYS_AHEAD}
        if self.max_hours and self.max_hours > POLICY_MAX_HOURS:
            problems["max_hours"] = _("At most %(hours)d hours.") % {"hours": POLICY_MAX_HOURS}
        elif self.min_minutes > self.max_hours * 60:
            problems["min_minutes"] = _("The shortest booking is longer than the longest one.")
        if problems:
            raise ValidationError(problems)


class BookingState(models.TextChoices):
    # With a context: "active" alone is already the on/off switch of profiles and templates (启用).
    REQUESTED = "requested", pgettext_lazy("booking state", "requested")
    WAITING = "waiting", pgettext_lazy("booking state", "waiting for free GPUs")
    CONFIRMED = "confirmed", pgettext_lazy("booking state", "confirmed")
    ACTIVE = "active", pgettext_lazy("booking state", "active")
    ENDED = "ended", pgettext_lazy("booking state", "ended")
    REFUSED = "refused", pgettext_lazy("booking state", "refused")
    CANCELLED = "cancelled", pgettext_lazy("booking state", "cancelled")


#: states that hold GPUs in the inventory (a waiting booking does not yet)
HOLDING_STATES = (BookingState.REQUESTED, BookingState.CONFIRMED, BookingState.ACTIVE)
#: states a booking never leaves
FINAL_BOOKING_STATES = (BookingState.ENDED, BookingState.REFUSED, BookingState.CANCELLED)


class StartChoice(models.TextChoices):
    ASAP = "asap", _("as soon as possible")
    AT = "at", _("at a time I choose")
    OFF_PEAK = "off-peak", _("in the next quiet hours")


class BookingQuerySet(models.QuerySet):
    def visible_to(self, user):
        """Every lookup of a booking outside the admin goes through here: the user's own (jobs.access)."""
        return self.filter(owned_by(user, "user"))

    def holding(self):
        return self.filter(state__in=HOLDING_STATES)

    def overlapping(self, starts_at, ends_at):
        return self.filter(starts_at__lt=ends_at, ends_at__gt=starts_at)


class Booking(models.Model):
    """A user's request for GPU time: the seed's JSON, the GPU type and cluster it landed on, its
    Slurm reservation. State changes are conditional updates (`jobs.bookings.lifecycle`)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="bookings",
                             verbose_name=_("user"))
    task_name = models.CharField(_("what it is for"), max_length=200)
    image_resolution = models.CharField(_("image resolution"), max_length=32, blank=True)
    # gpu_requirement
    min_memory_gb = models.PositiveIntegerField(_("least GPU memory (GB)"), default=0)
    compute_capability = models.CharField(_("least compute capability"), max_length=8, blank=True,
                                          validators=[_check_capability])
    gpu_count = models.PositiveIntegerField(_("GPUs"), default=1, validators=[MinValueValidator(1)])
    duration_minutes = models.PositiveIntegerField(_("length (minutes)"))
    priority = models.PositiveIntegerField(_("priority"), default=0,
                                           help_text=_("Higher is more urgent (the seed's 0–10 and above)."))
    callback_url = models.URLField(_("callback URL"), max_length=2000, blank=True)
    start_choice = models.CharField(_("start"), max_length=16, choices=StartChoice.choices, default=StartChoice.ASAP)
    requested_start = models.DateTimeField(_("asked-for start"), null=True, blank=True)

    # Where and when it landed
    cluster = models.ForeignKey("jobs.ClusterProfile", on_delete=models.PROTECT, null=True, blank=True,
                                related_name="bookings", verbose_name=_("cluster profile"))
    gpu_type = models.ForeignKey(GpuType, on_delete=models.PROTECT, null=True, blank=True, related_name="bookings",
                                 verbose_name=_("GPU type"))
    starts_at = models.DateTimeField(_("starts"), null=True, blank=True, db_index=True)
    ends_at = models.DateTimeField(_("ends"), null=True, blank=True, db_index=True)
    state = models.CharField(_("state"), max_length=16, choices=BookingState.choices, default=BookingState.REQUESTED,
                             db_index=True)
    reason = models.TextField(_("reason"), blank=True, help_text=_("Why it was refused or is waiting, in plain words."))
    reservation_name = models.CharField(_("Slurm reservation"), max_length=100, blank=True)
    #: the reservation exists on the cluster (set when scontrol said so; cleared when deleted)
    reservation_made = models.BooleanField(default=False, editable=False)
    language = models.CharField(_("language"), max_length=16, blank=True)

    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+", verbose_name=_("decided by"))
    created_at = models.DateTimeField(_("created"), auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(_("changed"), auto_now=True)
    #: when the "ends in 15 minutes" notice went (it goes once)
    ending_notice_at = models.DateTimeField(null=True, blank=True, editable=False)
    #: when the beat asked for its asleep nodes to be woken before its start (jobs.bookings.wake)
    wake_asked_at = models.DateTimeField(null=True, blank=True, editable=False)

    objects = BookingQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        verbose_name = _("booking")
        verbose_name_plural = _("bookings")
        constraints = [
            models.CheckConstraint(condition=models.Q(ends_at__isnull=True) | models.Q(ends_at__gt=models.F("starts_at")),
                                   name="booking_ends_after_start"),
        ]

    def __str__(self) -> str:
        return self.task_name

    @property
    def gpu_hours(self) -> Decimal:
        return (Decimal(self.gpu_count) * Decimal(self.duration_minutes) / Decimal(60)).quantize(Decimal("0.01"))

    @property
    def is_final(self) -> bool:
        return self.state in FINAL_BOOKING_STATES

    @property
    def is_cancelling(self) -> bool:
        """Cancelled, but the cluster still holds its reservation (jobs running in it, or the delete
        not done yet): the pages say "cancelling", and the beat asks the cluster again."""
        return self.state == BookingState.CANCELLED and self.reservation_made

    @property
    def is_usable(self) -> bool:
        """Jobs can be submitted into it: confirmed or active, with its reservation on the cluster."""
        return self.state in (BookingState.CONFIRMED, BookingState.ACTIVE) and self.reservation_made
