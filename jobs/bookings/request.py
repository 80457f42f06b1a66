"""A booking request as the API and pages receive it: the seed's JSON, checked field by field.

    {"task_name": "film_scene_swap_episode5", "image_resolution": "1920x1080",
     "gpu_requirement": {"min_memory_gb": 24, "compute_capability": "8.0", "count": 1},
     "duration_hours": 2, "priority": 10, "callback_url": "https://myserver.com/hook/done",
     "start": "asap" | "off-peak" | "2026-12-24T18:00:00+01:00"}

Every problem is reported at once, by field (`BookingError.problems`), in plain words. A start
without an offset is read as UTC (docs/api.md says so). Lengths are rounded UP to the site's booking
unit (`BookingPolicy.unit_minutes`); starts are rounded up to the unit where they are placed.
"""
from __future__ import annotations

import dataclasses
import math
import re
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _

from jobs.models import Booking, BookingPolicy, StartChoice, capability_tuple
from jobs.uploads.content import without_hidden_characters
from jobs.webhooks import check_callback_url

#: the most GPUs one booking may ask for (a typo guard: no site has more on one booking)
MAX_GPUS = 64
#: priorities above this are typos, not urgency
MAX_PRIORITY = 1000
RESOLUTION = re.compile(r"^[1-9]\d{0,4}x[1-9]\d{0,4}$")


class BookingError(Exception):
    """A booking that cannot be made as asked: `problems` maps each field at fault to a plain
    sentence ("" or "__all__": not one field's fault, e.g. the quota)."""

    def __init__(self, problems: dict[str, str]):
        super().__init__("; ".join(problems.values()))
        self.problems = dict(problems)


@dataclasses.dataclass(frozen=True)
class BookingRequest:
    task_name: str
    image_resolution: str
    min_memory_gb: int
    compute_capability: str
    gpu_count: int
    duration_minutes: int  # already rounded up to the policy's unit
    priority: int
    callback_url: str
    start_choice: str  # StartChoice
    requested_start: datetime | None  # StartChoice.AT only; aware, not yet rounded


def round_up(moment: datetime, unit_minutes: int) -> datetime:
    """The first unit boundary at or after `moment` (boundaries counted from the epoch, in UTC)."""
    step = unit_minutes * 60
    seconds = math.ceil(moment.timestamp() / step) * step
    return datetime.fromtimestamp(seconds, tz=dt_timezone.utc)


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _whole(value) -> int | None:
    number = _number(value)
    return int(number) if number is not None and number == int(number) else None


def _start(raw, policy: BookingPolicy, problems: dict, now: datetime) -> tuple[str, datetime | None]:
    if raw is None or (isinstance(raw, str) and raw.strip().lower() in ("", StartChoice.ASAP)):
        return StartChoice.ASAP, None
    if not isinstance(raw, str):
        problems["start"] = _('start must be "asap", "off-peak" or a time like 2026-12-24T18:00:00+01:00.')
        return StartChoice.ASAP, None
    text = raw.strip()
    if text.lower() in (StartChoice.OFF_PEAK, "offpeak", "off_peak"):
        return StartChoice.OFF_PEAK, None
    try:
        moment = parse_datetime(text)
    except ValueError:
        moment = None
    if moment is None:
        problems["start"] = _('start must be "asap", "off-peak" or a time like 2026-12-24T18:00:00+01:00.')
        return StartChoice.AT, None
    if timezone.is_naive(moment):
        moment = moment.replace(tzinfo=dt_timezone.utc)  # documented: a time without offset is UTC
    # Compared before any arithmetic on `moment`: rounding a start near year 9999 (or year 1) to the
    # unit leaves the calendar and raises. A start more than a unit before now has passed whatever
    # the rounding; only one close to now is rounded, as its placement will be.
    unit = timedelta(minutes=policy.unit_minutes)
    if moment > now + timedelta(days=policy.max_days_ahead):
        problems["start"] = _("Bookings can be made at most %(days)d days ahead.") % {"days": policy.max_days_ahead}
    elif moment < now - unit or round_up(moment, policy.unit_minutes) < round_up(now, policy.unit_minutes):
        problems["start"] = _("The start %(start)s has passed; choose a later time or \"asap\".") % {"start": text}
    return StartChoice.AT, moment


def _duration(raw, policy: BookingPolicy, problems: dict) -> int:
    low, high, unit = policy.min_minutes / 60, policy.max_hours, policy.unit_minutes
    hours = _number(raw)
    if hours is None or hours * 60 < policy.min_minutes - 1e-9 or hours > high + 1e-9:
        problems["duration_hours"] = _(
            "duration_hours must be between %(low)s and %(high)s hours: the site books in %(unit)d-minute units."
        ) % {"low": f"{low:g}", "high": f"{high:g}", "unit": unit}
        return 0
    return max(unit, math.ceil(round(hours * 60, 6) / unit) * unit)


def _gpu_requirement(raw, problems: dict) -> tuple[int, str, int]:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        problems["gpu_requirement"] = _('gpu_requirement must be an object: {"min_memory_gb", '
                                        '"compute_capability", "count"}.')
        return 0, "", 1
    memory = raw.get("min_memory_gb", 0)
    memory_gb = _number(memory) if memory is not None else 0
    if memory_gb is None or memory_gb < 0 or memory_gb > 10_000:
        problems["gpu_requirement.min_memory_gb"] = _("min_memory_gb must be a number of GB, 0 or more.")
        memory_gb = 0
    capability = raw.get("compute_capability")
    capability_text = "" if capability in (None, "") else str(capability).strip()
    if capability_text:
        try:
            capability_tuple(capability_text)
        except ValueError:
            problems["gpu_requirement.compute_capability"] = _(
                "compute_capability must be a number like 8.0 or 9.0.")
            capability_text = ""
    count = _whole(raw.get("count", 1))
    if count is None or not 1 <= count <= MAX_GPUS:
        problems["gpu_requirement.count"] = _("count must be a whole number of GPUs, 1 to %(most)d.") % {"most": MAX_GPUS}
        count = 1
    return math.ceil(memory_gb), capability_text, count


def _callback(raw, problems: dict) -> str:
    if raw in (None, ""):
        return ""
    if not isinstance(raw, str):
        problems["callback_url"] = _("Give the callback as a full http:// or https:// URL.")
        return ""
    url = raw.strip()
    if len(url) > Booking._meta.get_field("callback_url").max_length:
        problems["callback_url"] = _("The callback URL is too long.")
        return ""
    problem = check_callback_url(url)  # None when fine; private addresses etc. in plain words
    if problem:
        problems["callback_url"] = str(problem)
    return url


def parse_request(data, now: datetime | None = None, policy: BookingPolicy | None = None) -> BookingRequest:
    """Check the seed's JSON (a dict); raise BookingError with every problem at once."""
    now = now or timezone.now()
    policy = policy or BookingPolicy.current()
    if not isinstance(data, dict):
        raise BookingError({"__all__": _("Send the booking as a JSON object.")})
    problems: dict[str, str] = {}
    name = data.get("task_name")
    name = without_hidden_characters(name).strip() if isinstance(name, str) else ""
    if not name:
        problems["task_name"] = _("task_name is required: say what the GPUs are for.")
    elif len(name) > Booking._meta.get_field("task_name").max_length:
        problems["task_name"] = _("task_name is too long (200 characters at most).")
    resolution = data.get("image_resolution") or ""
    if not isinstance(resolution, str) or (resolution and not RESOLUTION.match(resolution.strip())):
        problems["image_resolution"] = _("image_resolution must look like 1920x1080.")
        resolution = ""
    memory_gb, capability, count = _gpu_requirement(data.get("gpu_requirement"), problems)
    minutes = _duration(data.get("duration_hours"), policy, problems)
    priority = _whole(data.get("priority", 0))
    if priority is None or not 0 <= priority <= MAX_PRIORITY:
        problems["priority"] = _("priority must be a whole number, 0 to %(most)d (higher is more urgent).") % {
            "most": MAX_PRIORITY}
        priority = 0
    callback = _callback(data.get("callback_url"), problems)
    choice, start = _start(data.get("start"), policy, problems, now)
    if problems:
        raise BookingError(problems)
    return BookingRequest(task_name=name, image_resolution=resolution.strip(), min_memory_gb=memory_gb,
                          compute_capability=capability, gpu_count=count, duration_minutes=minutes,
                          priority=priority, callback_url=callback, start_choice=choice, requested_start=start)
