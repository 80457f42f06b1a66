"""The portal's words as tables: cluster profile, template, job, task, target, source, quota, usage,
audit entry, notification preference, API token."""
from .audit import AuditEntry
from .cluster_profile import ClusterProfile
from .job import Job, JobStatus, Source, Target, TargetStatus, Task
from .preferences import EmailNotice, NoticeKind, NoticeStatus, NotificationPreference
from .quota import Quota
from .template import Template
from .token import ApiToken
from .usage import UsageRecord

__all__ = ["ApiToken", "AuditEntry", "ClusterProfile", "EmailNotice", "Job", "JobStatus", "NoticeKind", "NoticeStatus",
           "NotificationPreference", "Quota", "Source", "Target", "TargetStatus", "Task", "Template", "UsageRecord"]
