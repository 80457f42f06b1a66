"""A moment as a person reads it on a page, in the site's local time (settings.TIME_ZONE): the clock
alone today, "tomorrow" before it, and from the day after a short date with the weekday, so that a
time past midnight never reads as earlier today.

    today          14:05              14:05
    tomorrow       tomorrow 00:14     明天 00:14
    another day    Fri 4 Dec, 09:00   12月4日 周五 09:00
    another year   Sat 2 Jan 2027, 09:00   2027年1月2日 周六 09:00

Pages only: the API says moments in ISO 8601 (jobs.shapes).
"""
from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import formats, timezone
from django.utils.translation import gettext as _
from django.utils.translation import pgettext, pgettext_lazy

#: Monday first, as datetime.weekday() counts
WEEKDAYS_SHORT = [pgettext_lazy("weekday", "Mon"), pgettext_lazy("weekday", "Tue"), pgettext_lazy("weekday", "Wed"),
                  pgettext_lazy("weekday", "Thu"), pgettext_lazy("weekday", "Fri"), pgettext_lazy("weekday", "Sat"),
                  pgettext_lazy("weekday", "Sun")]


def moment_words(when: datetime, now: datetime | None = None) -> str:
    """`when` in the site's local time, said relative to the local day of `now` (default: now)."""
    local = timezone.localtime(when)
    today = timezone.localtime(now or timezone.now()).date()
    clock = formats.time_format(local, "H:i")
    if local.date() == today:
        return clock
    if local.date() == today + timedelta(days=1):
        return _("tomorrow %(time)s") % {"time": clock}
    # Django date formats: the Chinese ones put the month first ("n月j日"); the year only when it is not this one
    day = formats.date_format(local, pgettext("a day of a job's expected start or finish", "j M") if local.year == today.year
                              else pgettext("a day of a job's expected start or finish, another year", "j M Y"))
    return _("%(weekday)s %(day)s, %(time)s") % {"weekday": WEEKDAYS_SHORT[local.weekday()], "day": day, "time": clock}


def zone_words(moment: datetime | None = None, zone=None) -> str:
    """The current (or given) time zone as anyone reads it, in any language: its offset from UTC at
    `moment` (default: now), "UTC+8", "UTC-3:30", "UTC". Zone names ("Asia/Shanghai") are English
    and abbreviations ambiguous (CST is China's and Chicago's), so pages and emails say the offset;
    the name stays in a tooltip or a data attribute for scripts."""
    zone = zone or timezone.get_current_timezone()
    offset = (moment or timezone.now()).astimezone(zone).utcoffset()
    minutes = int(offset.total_seconds() // 60) if offset else 0
    if not minutes:
        return "UTC"
    sign = "+" if minutes > 0 else "-"
    hours, mins = divmod(abs(minutes), 60)
    return f"UTC{sign}{hours}" + (f":{mins:02d}" if mins else "")


def moment_with_zone(when: datetime) -> str:
    """A moment in the current time zone, in one format with the zone as an offset: "2026-12-02
    18:05 UTC+8" (emails: the reader may be anywhere, and "CST" or "Asia/Shanghai" is English)."""
    return f"{formats.date_format(timezone.localtime(when), 'Y-m-d H:i')} {zone_words(when)}"
