"""What a quota refusal says, and numbers (GPU-hours, MB, durations) in words."""
from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING

from django.utils import formats
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

if TYPE_CHECKING:
    from jobs.quotas.limits import Budget

MB = 1024 * 1024


def jobs_message(b: Budget) -> str:
    """The refusal when `b`, a budget of jobs at a time (the user's or their group's), is used up."""
    used, limit = int(b.used), int(b.limit)
    args = {"count": format_count(used), "limit": format_count(limit), "source": b.source}
    if b.is_group:
        return ngettext("Your group already has %(count)s job waiting or running; its limit is %(limit)s at a time "
                        "(%(source)s). Wait for one to finish, or cancel one.",
                        "Your group already has %(count)s jobs waiting or running; its limit is %(limit)s at a time "
                        "(%(source)s). Wait for one to finish, or cancel one.", used) % args
    return ngettext("You already have %(count)s job waiting or running; your limit is %(limit)s at a time "
                    "(%(source)s). Wait for one to finish, or cancel one.",
                    "You already have %(count)s jobs waiting or running; your limit is %(limit)s at a time "
                    "(%(source)s). Wait for one to finish, or cancel one.", used) % args


def gpu_message(b: Budget, need: float, reset: date) -> str:
    """The refusal when a job needing about `need` GPU-hours does not fit what is left of `b` this
    month; `reset`: the day the monthly budget starts again."""
    args = {"used": format_hours(b.used), "limit": format_hours(b.limit), "left": format_hours(b.left),
            "need": format_hours(need), "source": b.source, "reset": formats.date_format(reset, "j F")}
    if b.is_group:
        return _("Your group has used %(used)s of its %(limit)s GPU-hours this month (%(source)s), %(left)s left; "
                 "this job needs about %(need)s. The limit resets on %(reset)s.") % args
    return _("You have used %(used)s of your %(limit)s GPU-hours this month (%(source)s), %(left)s left; "
             "this job needs about %(need)s. The limit resets on %(reset)s.") % args


def too_many_targets(n: int, count: str, limit: str, source: str, in_folder: bool = False) -> str:
    """The refusal when a job of `n` targets (written `count`) is over the user's `limit` per job,
    set by `source` ("your own quota", "group vfx"). The texts take the numbers as text, so that
    the New job page can write them with `{count}` in place for its script (jobs.quotas.check)."""
    args = {"count": count, "limit": limit, "source": source}
    if in_folder:
        return ngettext("The folder has %(count)s image or video; your limit is %(limit)s per job (%(source)s). "
                        "Split the folder or ask an admin.",
                        "The folder has %(count)s images and videos; your limit is %(limit)s per job (%(source)s). "
                        "Split the folder or ask an admin.", n) % args
    return ngettext("This job has %(count)s image or video; your limit is %(limit)s per job (%(source)s). "
                    "Split them into several jobs or ask an admin.",
                    "This job has %(count)s images and videos; your limit is %(limit)s per job (%(source)s). "
                    "Split them into several jobs or ask an admin.", n) % args


def too_big_for_cluster(n: int, count: str, limit: str, cluster: str) -> str:
    """The refusal when a job of `n` targets (written `count`) is bigger than the cluster takes."""
    args = {"count": count, "limit": limit, "cluster": cluster}
    return ngettext("This job has %(count)s image or video; the cluster %(cluster)s takes at most %(limit)s per "
                    "job. Split them into several jobs, or ask an admin to raise the limit.",
                    "This job has %(count)s images and videos; the cluster %(cluster)s takes at most %(limit)s "
                    "per job. Split them into several jobs, or ask an admin to raise the limit.", n) % args


# --- numbers in words ------------------------------------------------------------------------

def format_hours(hours: float) -> str:
    """GPU-hours for people: 10, 9.5, 0.25 (two decimals only below 0.1), localised."""
    hours = float(hours)
    digits = 1 if hours >= 0.095 or hours == 0 else 2
    text = formats.number_format(round(hours, digits), digits, force_grouping=True)
    sep = formats.get_format("DECIMAL_SEPARATOR")
    if sep in text:
        text = text.rstrip("0").rstrip(sep)
    return text


def format_mb(size: int) -> str:
    return format_hours(size / MB)  # same rounding: 120, 1.5, 0.05


def format_count(n) -> str:
    """A whole number for people: localised, with thousands grouped (1,234 / 1 234)."""
    return formats.number_format(int(n), 0, force_grouping=True)


def plain_duration(seconds: float) -> str:
    """A time as people say it, rounded: "45 seconds", "3 minutes", "1 hour 30 minutes", "2 days"."""
    s = max(0, round(seconds))
    if s < 90:
        return ngettext("%(n)s second", "%(n)s seconds", s) % {"n": s}
    minutes = round(s / 60)
    if minutes < 60:
        return ngettext("%(n)s minute", "%(n)s minutes", minutes) % {"n": minutes}
    hours, minutes = divmod(minutes, 60)
    if hours >= 48:
        days = round(hours / 24)
        return ngettext("%(n)s day", "%(n)s days", days) % {"n": days}
    text = ngettext("%(n)s hour", "%(n)s hours", hours) % {"n": hours}
    if minutes:
        text = _("%(hours)s %(minutes)s") % {
            "hours": text, "minutes": ngettext("%(n)s minute", "%(n)s minutes", minutes) % {"n": minutes}}
    return text
