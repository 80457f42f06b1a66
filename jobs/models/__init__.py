"""The portal's words as tables: cluster profile, template, job, task, target, source, quota, usage,
audit entry, notification preference, API token."""
from jobs.models.audit import AuditEntry
from jobs.models.cluster_profile import ClusterProfile
from jobs.models.job import Job, JobStatus, Source, Target, TargetStatus, Task
from jobs.models.preferences import EmailNotice, NoticeKind, NoticeStatus, NotificationPreference
from jobs.models.quota import Quota
from jobs.models.template import Template
from jobs.models.token import ApiToken
from jobs.models.usage import UsageRecord

__all__ = ["ApiToken", "AuditEntry", "ClusterProfile", "EmailNotice", "Job", "JobStatus", "NoticeKind", "NoticeStatus",
           "NotificationPreference", "Quota", "Source", "Target", "TargetStatus", "Task", "Template", "UsageRecord"]
