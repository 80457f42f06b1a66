"""The portal's words as tables: cluster profile, template, job, task, target, source, API token."""
from .cluster_profile import ClusterProfile
from .job import Job, JobStatus, Source, Target, TargetStatus, Task
from .template import Template
from .token import ApiToken

__all__ = ["ApiToken", "ClusterProfile", "Job", "JobStatus", "Source", "Target", "TargetStatus", "Task", "Template"]
