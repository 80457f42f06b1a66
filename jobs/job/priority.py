"""Which Slurm QOS a job runs at: the admin's priority levels (jobs.models.priority) applied.

    qos_for(user, template) -> "urgent"

The rule (also the admin's help text): a job runs at the HIGHER-ranked of its template's QOS and
the best QOS level of its owner's groups. A template QOS the admin has not listed as a level ranks
below every listed level (it is kept when nothing ranks above it); no QOS at all is "" (the
cluster's default, usually "normal"). Decided once, at Start, and frozen in the job's template
snapshot: a job already queued never changes QOS when an admin edits the levels.

What the QOS does is Slurm's: its priority orders the queue, and with `PreemptType=preempt/qos`
an urgent job may requeue running tasks of lower QOS levels (PreemptMode=REQUEUE) when the GPUs
are full. The portal schedules nothing itself.
"""
from __future__ import annotations

from django.utils.translation import gettext as _

from jobs.models import GroupPriority, QosLevel, Template

#: the rank of a QOS name no level lists (below every listed level)
UNLISTED_RANK = float("-inf")


def qos_for(user, template: Template) -> str:
    """The Slurm QOS name the user's job on `template` runs at ("" for the cluster's default)."""
    ranks = dict(QosLevel.objects.values_list("name", "rank"))
    own = (template.qos or "").strip()
    best_group = (GroupPriority.objects.filter(group__in=user.groups.all()).select_related("qos")
                  .order_by("-qos__rank", "qos__name").first())
    if best_group is None:
        return own
    group_qos = best_group.qos.name
    if not own or ranks.get(group_qos, UNLISTED_RANK) > ranks.get(own, UNLISTED_RANK):
        return group_qos
    return own


def qos_words(name: str) -> str:
    """The plain word users see for a QOS ("urgent"); the name itself when no level lists it, and
    "normal" for none."""
    if not name:
        return _("normal")
    level = QosLevel.objects.filter(name=name).first()
    return level.label if level else name
