"""The Django admin, by word: cluster profiles, templates, jobs and tokens, quotas, usage, the audit log.

Changes to templates, cluster profiles and quotas are audited (`base.AuditedAdmin`); the audit log
itself is read-only for everyone, superusers included. Importing this package registers every
ModelAdmin (Django's admin autodiscovery imports `jobs.admin`).
"""
from jobs.admin import (  # noqa: F401 - they register themselves
    audit,
    bookings,
    content_safety,
    jobs,
    model_sets,
    priority,
    profiles,
    quotas,
    retention,
    teams,
    templates,
    uploads,
    usage,
    webhooks,
)
