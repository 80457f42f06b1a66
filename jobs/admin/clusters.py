"""The admin's Clusters page: per cluster and GPU type, GPUs free, busy, booked, draining (and why),
down and asleep; and every node in plain words with Slurm's reason.

Served under the cluster profiles' admin (`admin:jobs_clusterprofile_gpus`, linked from its list;
jobs.admin.profiles adds `cluster_page_urls`). The admin site's login and staff check guard it, and
the staff member also needs `PAGE_PERMISSION`, never the staff flag alone. It shows the watcher's
last reading (jobs.clusters.node_states); a reading older than `STALE` (the watcher stopped, or
never read) is read again on open, with a short timeout, and "Read again now" (needs
`READ_PERMISSION`) reads every cluster at once.
"""
from __future__ import annotations

import logging
from datetime import timedelta

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import formats, timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

import cluster
from jobs.bookings import wake
from jobs.clusters import node_states
from jobs.models import ClusterProfile

log = logging.getLogger(__name__)

#: who sees the page
PAGE_PERMISSION = "jobs.view_clusterprofile"
#: who may make the portal read the clusters now (SSH to every cluster)
READ_PERMISSION = "jobs.change_clusterprofile"
#: a reading older than this is read again when the page opens
STALE = timedelta(minutes=3)


def cluster_page_urls(model_admin) -> list:
    view = model_admin.admin_site.admin_view
    return [
        path("gpus/", view(lambda request: gpus_view(model_admin, request)), name="jobs_clusterprofile_gpus"),
        path("gpus/read-again/", view(require_POST(lambda request: read_again_view(request))),
             name="jobs_clusterprofile_gpus_read_again"),
    ]


def _read(profiles) -> None:
    for profile in profiles:
        try:
            node_states.read_nodes(profile)
        except Exception:  # stored as "not answering since"; the page still shows
            log.warning("cluster %s: nodes not read for the Clusters page", profile.slug, exc_info=True)


def gpus_view(model_admin, request: HttpRequest) -> TemplateResponse:
    if not request.user.has_perm(PAGE_PERMISSION):
        raise PermissionDenied
    now = timezone.now()
    active = list(ClusterProfile.objects.filter(is_active=True).order_by("name"))
    _read([p for p in active if p.unreachable_since is None and _stale(p, now)])
    clusters = []
    for reading in map(node_states.cluster_gpus, active):
        rows = [{"type": kind, "counts": [counts[s] for s in cluster.GPU_STATES],
                 "reasons": reading.reasons.get(kind, [])} for kind, counts in reading.by_type.items()]
        nodes = [{**n, "text": node_states.condition_text(n),
                  "gpus_text": ", ".join(f"{used}/{total} {kind or 'GPU'}" for kind, (total, used) in n["gpus"].items())}
                 for n in reading.nodes]
        wakes = [_wake_text(item) for item in wake.upcoming(reading.profile, reading.nodes, now)]
        clusters.append({"reading": reading, "rows": rows, "nodes": nodes, "wakes": wakes})
    context = {
        **model_admin.admin_site.each_context(request),
        "title": _("Clusters: nodes and GPUs"),
        "opts": ClusterProfile._meta,
        "clusters": clusters,
        "states": [_state_label(s) for s in cluster.GPU_STATES],
        "can_read_again": request.user.has_perm(READ_PERMISSION),
    }
    return TemplateResponse(request, "admin/jobs/clusterprofile/gpus.html", context)


def read_again_view(request: HttpRequest) -> HttpResponseRedirect:
    if not request.user.has_perm(PAGE_PERMISSION) or not request.user.has_perm(READ_PERMISSION):
        raise PermissionDenied
    _read(ClusterProfile.objects.filter(is_active=True, unreachable_since__isnull=True))
    messages.success(request, _("The clusters' nodes were read again."))
    return HttpResponseRedirect(reverse("admin:jobs_clusterprofile_gpus"))


def _stale(profile: ClusterProfile, now) -> bool:
    read_at = node_states.cluster_gpus(profile).read_at
    return read_at is None or now - read_at > STALE


def _state_label(state: str) -> str:
    return {"free": _("free"), "busy": _("busy"), "booked": _("booked"), "draining": _("draining or drained"),
            "down": _("down"), "asleep": _("asleep")}[state]


def _wake_text(item: dict) -> str:
    """One line of "What wakes next", in the reader's language and time zone."""
    when = formats.date_format(timezone.localtime(item["when"]), "H:i")
    if "node" in item:
        return _("%(node)s is being powered on: ready about %(when)s") % {"node": item["node"], "when": when}
    booking = item["booking"]
    start = formats.date_format(timezone.localtime(booking.starts_at), "Y-m-d H:i")
    return _("Booking “%(name)s” (%(count)s GPUs, starts %(start)s): its asleep nodes are woken at %(when)s") % {
        "name": booking.task_name, "count": booking.gpu_count, "start": start, "when": when}
