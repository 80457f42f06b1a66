"""Who may see and act on a piece of work: the one rule, in one place.

The pages, the JSON API and the live sockets show a person their OWN work only: jobs (and their
targets, sources, inputs, outputs, thumbnails and zips), bookings, webhook deliveries and uploads.
Django's `is_staff` and `is_superuser` flags grant nothing there: someone else's row answers the
same 404 as a row that does not exist, for reading and for every action (cancel, retry, run again,
replace file, delete, send again, cancel a booking ...). Each model's `visible_to(user)` (`of` for
uploads) filters with `owned_by` below, and every view looks rows up through it.

Oversight of other people's work happens in the Django admin only, through explicit Django
permissions, never the staff flag: the admin's usual `view_*` permissions show a job's metadata;
its face photos and results (source photos, the reference face, inputs, outputs, the results zip)
need `jobs.see_faces` on top (`may_see_faces`), and every such file opened there is audited
(`jobs/admin/faces.py`).

Team leads (jobs.models.Team.leads, a role per team, never the staff flag) see and manage their
team's JOBS on top (`led_by`): open them, their files and zips, follow them live, cancel, retry and
run them again. Everything else stays the owner's alone: deleting a job's files, replacing a
target's file, the job lists (a lead finds the team's jobs on the team page), bookings other than
approving them, uploads and webhook deliveries. A lead acting on a job not theirs is audited as
such (jobs.audit: the job's "owner" and "team" in the entry's details).
"""
from __future__ import annotations

from django.db.models import Q

__all__ = ["SEE_FACES", "led_by", "owned_by", "may_see_faces"]

#: the permission to open other people's face photos and results in the admin (Job.Meta.permissions);
#: not named view_*, so that granting "every view permission" never grants it by the way
SEE_FACES = "jobs.see_faces"


def owned_by(user, owner_field: str = "owner") -> Q:
    """The rows `user` may see and act on outside the admin: those whose `owner_field` is `user`.

    An anonymous user owns nothing (an empty match, never an error), so a view that forgot its
    login check still shows nothing.
    """
    if user is None or not user.is_authenticated:
        return Q(pk__in=[])
    return Q(**{owner_field: user.pk})


def led_by(user, team_field: str = "team") -> Q:
    """The rows of the teams `user` leads (`team_field` leads to a Team); nothing for anyone else.
    One lead row per team and user, so the join never repeats a row."""
    if user is None or not user.is_authenticated:
        return Q(pk__in=[])
    return Q(**{f"{team_field}__leads": user.pk})


def may_see_faces(user) -> bool:
    """Whether `user` may open other people's face photos and results in the admin (superusers
    hold every permission; the staff flag alone holds none)."""
    return user is not None and user.has_perm(SEE_FACES)
