"""The Django admin, by word: cluster profiles, templates, jobs and tokens, quotas, usage, the audit log.

Changes to templates, cluster profiles and quotas are audited (`base.AuditedAdmin`); the audit log
itself is read-only for everyone, superusers included. Importing this package registers every
ModelAdmin (Django's admin autodiscovery imports `jobs.admin`).
"""
from jobs.admin import audit, jobs, profiles, quotas, templates, uploads, usage  # noqa: F401 - they register themselves
from jobs.admin import bookings  # noqa: F401 - GPU types, booking rules, bookings (issue 13)
from jobs.admin import priority  # noqa: F401 - QOS levels and group priorities (issue 13)
from jobs.admin import webhooks  # noqa: F401 - webhook deliveries, read-only (issue 13)
from jobs.admin import retention  # noqa: F401 - how long job files are kept (issue 14)
from jobs.admin import model_sets  # noqa: F401 - model files by SHA-256, pinned per template (issue 14)
from jobs.admin import content_safety  # noqa: F401 - the optional content check of photos and results (issue 14)
