"""The portal's words as tables: cluster profile, template (and a job's snapshot of it), job,
job attempt, task, target, source, quota, GPU type, booking, booking rules, usage, audit entry, notification preference, API token, upload."""
from jobs.models.attempt import JobAttempt
from jobs.models.audit import AuditEntry
from jobs.models.booking import (
    Approval,
    Booking,
    BookingPolicy,
    BookingState,
    GpuType,
    StartChoice,
    capability_tuple,
)
from jobs.models.cluster_profile import ClusterProfile
from jobs.models.content_safety import SafetyPolicy
from jobs.models.job import Job, JobStatus, Source, Target, TargetStatus, Task
from jobs.models.model_set import ModelSet
from jobs.models.preferences import EmailNotice, NoticeKind, NoticeStatus, NotificationPreference
from jobs.models.priority import GroupPriority, QosLevel
from jobs.models.quota import Quota
from jobs.models.retention import RetentionPolicy
from jobs.models.snapshot import TemplateSnapshot
from jobs.models.team import Team
from jobs.models.team_usage import TeamUsage
from jobs.models.template import Template
from jobs.models.token import ApiToken
from jobs.models.upload import Upload, UploadKind, UploadPolicy, UploadStatus
from jobs.models.usage import UsageRecord
from jobs.models.webhook import DeliveryState, WebhookDelivery, WebhookSecret

__all__ = ["ApiToken", "Approval", "AuditEntry", "Booking", "BookingPolicy", "BookingState", "GpuType",
           "StartChoice", "capability_tuple", "ClusterProfile", "EmailNotice", "GroupPriority", "QosLevel", "Job", "JobAttempt", "JobStatus", "NoticeKind",
           "NoticeStatus", "NotificationPreference", "Quota", "Source", "Target", "TargetStatus", "Task", "Team", "TeamUsage", "Template",
           "TemplateSnapshot", "Upload", "UploadKind", "UploadPolicy", "UploadStatus", "UsageRecord", "RetentionPolicy", "SafetyPolicy", "ModelSet",
           "DeliveryState", "WebhookDelivery", "WebhookSecret"]
