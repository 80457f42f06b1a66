"""Booking pages: my bookings (/bookings/), book GPUs (/bookings/new, with the off-peak heat map and
suggestions), the calendar of the next 7 days per GPU type, a booking's page, and Cancel.

Times are shown in the user's time zone: the browser names it in a cookie (static/js/bookings/main.js,
`ZONE_COOKIE`), every booking view renders under it (`in_user_zone`), and until it is known the
site's zone is used and named. One format for a moment on every booking page: 2026-12-01 23:48.

Thin: the form only collects the user's choices in plain words and turns them into the seed's JSON;
every rule (matching, capacity, quota, states) is `jobs.bookings` (shared with the API), whose
`BookingError` names the fields to show each problem next to. Every booking is looked up through
`Booking.objects.visible_to`: someone else's booking answers 404, as for jobs.
"""
from __future__ import annotations

import functools
import re
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from uuid import UUID
from zoneinfo import ZoneInfo

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.dates import WEEKDAYS
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from jobs.bookings import offpeak
from jobs.bookings.use import jobs_inside
from jobs.models import Booking, BookingPolicy, BookingState, ClusterProfile, GpuType, StartChoice
from jobs.models.booking import HOLDING_STATES
from jobs.moments import WEEKDAYS_SHORT, zone_words

#: the form's fields, and where a problem `jobs.bookings.BookingError` names (the seed's JSON keys,
#: maybe under "gpu_requirement.") is shown
PROBLEM_FIELDS = {"count": "gpu_count", "gpu_count": "gpu_count", "start": "start_at", "requested_start": "start_at",
                  "gpu_requirement": "min_memory_gb", "memory": "min_memory_gb"}
#: what the suggestions and the heat map assume before the user says more
DEFAULT_HOURS = 2
CALENDAR_DAYS = 7
#: the browser's IANA time zone ("Asia/Shanghai"), set by static/js/bookings/main.js
ZONE_COOKIE = "ffp_tz"
_ZONE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_+/-]{0,63}")


def user_zone(request: HttpRequest):
    """The zone the user's browser is in (its cookie), or the site's while the browser has not said."""
    name = request.COOKIES.get(ZONE_COOKIE, "")
    if name and _ZONE_NAME.fullmatch(name) and ".." not in name:
        try:
            return ZoneInfo(name)
        except (ValueError, OSError):  # unknown to this machine's tz database
            pass
    return timezone.get_default_timezone()


def zone_context() -> dict:
    """The current zone for a booking page: its name for the script (`time_zone`), its offset for
    people (`time_zone_words`, "UTC+8": a zone's name is English)."""
    return {"time_zone": timezone.get_current_timezone_name(), "time_zone_words": zone_words()}


def in_user_zone(view):
    """Render the view (and read its form's times) in the user's time zone."""
    @functools.wraps(view)
    def wrapped(request, *args, **kwargs):
        with timezone.override(user_zone(request)):
            return view(request, *args, **kwargs)
    return wrapped


class BookingForm(forms.Form):
    """The seed's booking JSON in plain words. Only types and ranges are checked here."""

    task_name = forms.CharField(label=gettext_lazy("What is it for"), max_length=200,
                                widget=forms.TextInput(
                                    attrs={"placeholder": gettext_lazy("E.g. Wedding album retouch")}))
    image_resolution = forms.CharField(label=gettext_lazy("Image size"), max_length=32, required=False,
                                       help_text=gettext_lazy("E.g. 1920x1080. Optional."))
    min_memory_gb = forms.IntegerField(label=gettext_lazy("GPU memory at least (GB)"), min_value=0, initial=0)
    compute_capability = forms.CharField(label=gettext_lazy("Compute capability at least"), max_length=8,
                                         required=False, help_text=gettext_lazy("E.g. 8.0. Empty: any GPU."))
    gpu_count = forms.IntegerField(label=gettext_lazy("How many GPUs"), min_value=1, initial=1)
    duration_hours = forms.DecimalField(label=gettext_lazy("How long (hours)"), min_value=0, max_digits=6,
                                        decimal_places=2, initial=DEFAULT_HOURS,
                                        widget=forms.NumberInput(attrs={"step": "0.5"}))
    priority = forms.IntegerField(label=gettext_lazy("Priority"), min_value=0, initial=0,
                                  help_text=gettext_lazy("0 is normal; higher is more urgent, e.g. 10 for a deadline."))
    start = forms.ChoiceField(label=gettext_lazy("Start"), choices=StartChoice.choices, initial=StartChoice.ASAP,
                              widget=forms.RadioSelect)
    start_at = forms.DateTimeField(label=gettext_lazy("Start at"), required=False,
                                   widget=forms.DateTimeInput(attrs={"type": "datetime-local"},
                                                              format="%Y-%m-%dT%H:%M"),
                                   input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"])
    callback_url = forms.URLField(label=gettext_lazy("Call this address when the booking changes"), required=False,
                                  max_length=2000, assume_scheme="https",
                                  help_text=gettext_lazy("Optional. A web address of yours, called (signed) when the "
                                                         "booking is confirmed, starts, ends soon and ends."))

    def clean(self):
        data = super().clean()
        if data.get("start") == StartChoice.AT and not data.get("start_at"):
            self.add_error("start_at", _("Say when it should start."))
        return data

    def request_data(self) -> dict:
        """The seed's JSON (jobs.bookings.parse_request reads it), from the cleaned fields."""
        d = self.cleaned_data
        start = d["start"]
        if start == StartChoice.AT:
            start = d["start_at"].isoformat()  # aware: DateTimeField reads it in the current (site) zone
        return {"task_name": d["task_name"], "image_resolution": d["image_resolution"],
                "gpu_requirement": {"min_memory_gb": d["min_memory_gb"], "compute_capability": d["compute_capability"],
                                    "count": d["gpu_count"]},
                "duration_hours": float(d["duration_hours"]), "priority": d["priority"],
                "callback_url": d["callback_url"], "start": start}

    def show_problems(self, problems: dict) -> None:
        for key, message in problems.items():
            name = str(key).rsplit(".", 1)[-1]
            name = PROBLEM_FIELDS.get(name, name)
            self.add_error(name if name in self.fields else None, message)


def get_booking_for_user(user, booking_id) -> Booking:
    """The booking if `user` may see it (`Booking.objects.visible_to`), else Http404."""
    return get_object_or_404(Booking.objects.visible_to(user).select_related("gpu_type", "cluster"), pk=booking_id)


@login_required
@require_safe
@in_user_zone
def booking_list(request: HttpRequest) -> HttpResponse:
    bookings = list(Booking.objects.visible_to(request.user).select_related("gpu_type", "cluster")
                    .order_by("-created_at")[:200])
    inside = jobs_inside([b for b in bookings if not b.is_final])
    for booking in bookings:  # what Cancel does to the jobs inside each (its dialog says so)
        booking.inside = inside.get(booking.pk)
    return render(request, "jobs/booking_list.html", {"bookings": bookings,
                                                      **zone_context()})


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
@in_user_zone
def booking_new(request: HttpRequest) -> HttpResponse:
    from jobs import bookings

    if request.method == "POST":
        form = BookingForm(request.POST)
        if form.is_valid():
            try:
                booking = bookings.book(request.user, bookings.parse_request(form.request_data()))
            except bookings.BookingError as exc:
                form.show_problems(exc.problems)
            else:
                messages.success(request, _("Booking received. This page shows its state."), extra_tags="booking-made")
                return redirect("booking-detail", booking_id=booking.id)
    else:
        form = BookingForm(initial=_initial_from(request))
    context = {"form": form, "policy": BookingPolicy.current(), **zone_context(),
               "site_time_zone": zone_words(zone=offpeak.site_zone()), **quiet_hours(request.user, form)}
    return render(request, "jobs/booking_new.html", context)


def _initial_from(request: HttpRequest) -> dict:
    """`?start=2026-12-02T03:00` (a heat-map cell or a suggestion, followed without JavaScript)."""
    initial = {}
    text = request.GET.get("start", "")
    try:
        start = datetime.strptime(text, "%Y-%m-%dT%H:%M")
    except ValueError:
        return initial
    initial.update(start=StartChoice.AT, start_at=timezone.make_aware(start))
    return initial


def _form_number(form: BookingForm, name: str, default):
    value = form.cleaned_data.get(name) if form.is_bound and hasattr(form, "cleaned_data") else None
    return value if value else default


def quiet_hours(user, form: BookingForm) -> dict:
    """The heat maps (one per cluster with bookable GPU types) and the off-peak suggestions for what
    the form asks (or one GPU for DEFAULT_HOURS): what the page shows beside the form."""
    now = timezone.now()
    types = list(GpuType.objects.filter(is_active=True, cluster__is_active=True).select_related("cluster"))
    count = _form_number(form, "gpu_count", 1)
    minutes = int(float(_form_number(form, "duration_hours", DEFAULT_HOURS)) * 60)
    memory = _form_number(form, "min_memory_gb", 0)
    capability = _form_number(form, "compute_capability", "")
    try:
        fitting = [t for t in types if t.satisfies(min_memory_gb=memory, compute_capability=capability or None)]
    except ValueError:
        fitting = types
    shares, maps = {}, []
    for profile in ClusterProfile.objects.filter(pk__in={t.cluster_id for t in types}).order_by("name"):
        shares[profile.pk] = offpeak.share_by_hour(profile, now=now)
        maps.append(heat_map(profile, shares[profile.pk], now))
    suggestions = offpeak.suggest(fitting, count, max(minutes, 1), now, shares=shares) if fitting else []
    return {"heat_maps": maps, "suggestions": suggestions, "suggest_count": count, "suggest_minutes": minutes}


#: the heat map's colour steps (share of the cluster's GPUs busy): the legend says what each means
LOAD_STEPS = (0.2, 0.4, 0.6, 0.8)


def load_step(share: float) -> int:
    return sum(share >= s for s in LOAD_STEPS)


def heat_map(profile, share, now: datetime) -> dict:
    """Rows Monday..Sunday, a cell per hour of the site's zone (the hours the load is counted in): its
    load step and the next time that hour of the week comes, in the user's zone (what clicking it
    picks as the start, read back in that zone)."""
    local_now = now.astimezone(offpeak.site_zone())
    today = local_now.replace(hour=0, minute=0, second=0, microsecond=0)
    rows = []
    for day in range(7):
        ahead = (day - today.weekday()) % 7
        cells = []
        for hour in range(24):
            when = today + timedelta(days=ahead, hours=hour)
            if when <= local_now:
                when += timedelta(days=7)
            value = share[day][hour] if share else 0.0
            cells.append({"hour": hour, "step": load_step(value), "percent": round(value * 100),
                          "start": timezone.localtime(when).strftime("%Y-%m-%dT%H:%M")})
        rows.append({"day": day, "name": WEEKDAYS[day], "short": WEEKDAYS_SHORT[day], "cells": cells})
    return {"profile": profile, "rows": rows, "known": share is not None, "hours": range(0, 24, 3)}


@login_required
@require_safe
@in_user_zone
def booking_calendar(request: HttpRequest) -> HttpResponse:
    from jobs import bookings

    first = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    days = [first + timedelta(days=i) for i in range(CALENDAR_DAYS)]
    end = days[-1] + timedelta(days=1)
    held = list(Booking.objects.filter(state__in=HOLDING_STATES).overlapping(first, end)
                .select_related("gpu_type").order_by("starts_at"))
    calendars = []
    for gpu_type in GpuType.objects.filter(is_active=True, cluster__is_active=True).select_related("cluster"):
        mine = [b for b in held if b.gpu_type_id == gpu_type.pk]
        rows = [{"day": day, "free": bookings.free_gpus(gpu_type, day, day + timedelta(days=1)),
                 "bars": day_bars(mine, day, request.user)} for day in days]
        calendars.append({"gpu_type": gpu_type, "rows": rows})
    return render(request, "jobs/booking_calendar.html", {"calendars": calendars, "days": days,
                                                           **zone_context()})


def day_bars(held: list[Booking], day: datetime, user) -> list[dict]:
    """The bookings of one day as bars: left and width in % of the day, a lane each so that
    overlapping ones sit one under the other. Another user's booking is only "booked".

    `day` is a local midnight. Arithmetic between two datetimes of one zone ignores a daylight-saving
    change between them, so the day's ends are taken in UTC: it has 23 or 25 hours then."""
    day, end = day.astimezone(dt_timezone.utc), (day + timedelta(days=1)).astimezone(dt_timezone.utc)
    bars, lanes = [], []  # lanes: the end of the last bar in each
    for b in held:
        s, e = max(b.starts_at, day), min(b.ends_at, end)
        if e <= s:
            continue
        lane = next((i for i, last in enumerate(lanes) if last <= s), len(lanes))
        if lane == len(lanes):
            lanes.append(e)
        lanes[lane] = e
        bars.append({"booking": b, "mine": b.user_id == user.pk, "lane": lane,
                     "left": round((s - day) / (end - day) * 100, 2),
                     "width": max(round((e - s) / (end - day) * 100, 2), 1),
                     "starts_at": b.starts_at, "ends_at": b.ends_at})
    return bars


@login_required
@require_safe
@in_user_zone
def booking_detail(request: HttpRequest, booking_id: UUID) -> HttpResponse:
    booking = get_booking_for_user(request.user, booking_id)
    booking.inside = jobs_inside([booking])[booking.pk]
    return render(request, "jobs/booking_detail.html", {"booking": booking, "BookingState": BookingState,
                                                         **zone_context()})


@require_POST
@login_required
def booking_cancel(request: HttpRequest, booking_id: UUID) -> HttpResponse:
    from jobs import bookings

    booking = get_booking_for_user(request.user, booking_id)
    inside = jobs_inside([booking])[booking.pk]
    if bookings.cancel(booking, request.user):
        messages.success(request, cancelled_words(booking, inside))
    else:
        messages.info(request, _("This booking has already ended; there is nothing to cancel."))
    return redirect("booking-detail", booking_id=booking.id)


def cancelled_words(booking: Booking, inside) -> str:
    """What Cancel did, truthfully: the reservation is deleted after the commit (an RQ task that first
    moves the waiting jobs out), so its GPUs are not free yet when the page says this."""
    said = [_("Booking cancelled.")]
    said += inside.words()
    if not booking.reservation_made:
        said.append(_("Its GPUs were not held on the cluster yet."))
    elif not inside.running:
        said.append(_("The cluster releases its GPUs in a moment; this page shows when it has."))
    return " ".join(str(w) for w in said)
