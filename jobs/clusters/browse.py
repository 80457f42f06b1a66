"""The folder browser: what a user may see of the cluster's storage (allowed roots only: the
profile's and those of the user's teams; never another team's folder, jobs.clusters.team_roots)."""
from __future__ import annotations

import posixpath

from django.utils.translation import gettext as _

import cluster
from cluster import ClusterError, PathNotAllowed, list_folder_in_roots
from jobs.clusters import team_roots
from jobs.errors import BrowseError
from jobs.models import ClusterProfile, Template


def profiles_for(user) -> list[ClusterProfile]:
    ids = Template.objects.usable_by(user).values_list("cluster_id", flat=True)
    return list(ClusterProfile.objects.filter(pk__in=set(ids), is_active=True).order_by("name"))


def browse(user, path: str = "", profile: ClusterProfile | None = None) -> dict:
    """`{"path", "entries": [{"name", "path", "type", "size"}]}`; no path: the allowed roots (the
    profile's, then the user's team folders).

    The path is checked against the roots before AND after the cluster resolves symlinks, so a
    link pointing out of a root is refused like `..`. So is every entry, in the same one command:
    a file or folder that is a link leading out of the roots is not offered at all. Another team's
    folder is refused like a folder outside, and never listed where it lies inside a root.
    """
    profiles = profiles_for(user)
    if profile is None:
        if not profiles:
            raise BrowseError(_("No cluster is available to you. Ask an admin for a template."), 404)
        profile = profiles[0]
    elif profile not in profiles:
        raise BrowseError(_("No such cluster."), 404)
    roots = team_roots.for_user(user, profile)
    if not path:
        return {"path": "", "entries": [{"name": r, "path": r, "type": "dir", "size": None} for r in roots.allowed]}
    try:
        runner = cluster.runner_for(profile)
        listing = list_folder_in_roots(runner, path, list(roots.allowed), refused=roots.refused)
    except PathNotAllowed:
        raise BrowseError(_("That folder is outside the folders you may use."), 403) from None
    except ClusterError as exc:
        raise BrowseError(_("The cluster cannot be reached right now (%(why)s). Try again in a minute.") % {"why": exc}, 503) from None
    real = listing.path
    out = []
    for e in sorted(listing.entries, key=lambda e: (e.type != "dir", e.name.lower())):
        if e.name.startswith(".") or e.type not in ("dir", "file") or e.refused:
            continue
        out.append({"name": e.name, "path": posixpath.join(real, e.name), "type": e.type,
                    "size": e.size if e.type == "file" else None})
    return {"path": real, "entries": out}
