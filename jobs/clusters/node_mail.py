"""The email to the admins when a cluster node stops taking work (drained or down).

`jobs.clusters.node_states.read_nodes` notices the change in the watcher's sweep and queues
`notify_node_stopped` on the RQ worker (email is never sent in the watcher's loop). It goes to
every active user holding `NOTIFY_PERMISSION` who has an address, each in their own language
(jobs.usage.notifications.language_of_user), once per change (`EmailNotice.key`); when nobody holds
the permission, to settings.ADMINS in the site's language.
"""
from __future__ import annotations

import hashlib

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import mail_admins
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import translation
from django.utils.translation import gettext as _

from jobs.clusters.node_states import RESUME_TIMEOUT_REASON, condition_text
from jobs.models import ClusterProfile, NoticeKind
from jobs.usage import notices
from jobs.usage.notifications import SUBJECT_TAG, absolute_url, language_of_user

#: who is told: those who may change cluster profiles (superusers included)
NOTIFY_PERMISSION = "jobs.change_clusterprofile"


def recipients():
    """Active users holding NOTIFY_PERMISSION, with an address."""
    # the permissions are the database's (ModelBackend); axes' backend, listed first, holds none
    users = get_user_model().objects.with_perm(NOTIFY_PERMISSION, include_superusers=True,
                                               backend="django.contrib.auth.backends.ModelBackend").filter(is_active=True)
    return [u for u in users.order_by("pk") if u.email]


def notify_node_stopped(profile_id: int, node: dict, seen_at: str) -> list[str]:
    """RQ task: email the admins that `node` of the cluster stopped taking work (seen at `seen_at`).
    Returns the notices' statuses (["admins"] when settings.ADMINS got it instead)."""
    profile = ClusterProfile.objects.filter(pk=profile_id).first()
    if profile is None:
        return []
    users = recipients()
    if not users:
        with translation.override(settings.LANGUAGE_CODE):
            subject, context = _message(profile, node, "")
            mail_admins(subject, render_to_string("email/node_stopped.txt", context),
                        html_message=render_to_string("email/node_stopped.html", context))
        return ["admins"]
    statuses = []
    for user in users:
        with translation.override(language_of_user(user)):
            subject, context = _message(profile, node, user.get_full_name() or user.get_username())
            # once per change: the node, what it became and when the sweep first saw it
            change = hashlib.sha256(f"{node['name']}:{node['condition']}:{seen_at}".encode()).hexdigest()[:32]
            notice = notices.claim(f"node:{profile.pk}:{change}:{user.pk}", kind=NoticeKind.NODE_DOWN, user=user,
                                   to=user.email, subject=f"{SUBJECT_TAG} {subject}"[:300])
            if notice is not None:
                statuses.append(notices.send(notice, "email/node_stopped", context))
    return statuses


def _message(profile: ClusterProfile, node: dict, user_name: str) -> tuple[str, dict]:
    gpus = ", ".join(f"{total} × {kind or 'GPU'}" for kind, (total, _used) in sorted((node.get("gpus") or {}).items()))
    if node["condition"] == "down" and node.get("reason") == RESUME_TIMEOUT_REASON:
        subject = _("Node %(node)s of cluster %(cluster)s failed to wake up") % {
            "node": node["name"], "cluster": profile.shown_name}
    elif node["condition"] == "down":
        subject = _("Node %(node)s of cluster %(cluster)s is down") % {"node": node["name"], "cluster": profile.shown_name}
    else:
        subject = _("Node %(node)s of cluster %(cluster)s was drained") % {
            "node": node["name"], "cluster": profile.shown_name}
    return subject, {"user_name": user_name, "node": node["name"], "cluster": profile.shown_name,
                     "state": condition_text(node), "gpus": gpus,
                     "url": absolute_url(reverse("admin:jobs_clusterprofile_gpus"))}
