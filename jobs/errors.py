"""The portal's domain errors, in one place. Every message is plain words for the person who acted.

    PortalError                   a request the portal refuses; `message` is shown as it is
    ├── StartError                a Start that cannot go ahead (`field`: the form field at fault)
    │   └── QuotaExceeded         ... because a quota refuses it (which limit, used, left, reset)
    ├── UploadRejected            an uploaded file is not what it claims (checked by content)
    ├── SubmitRejected            a queued job cannot run as asked (empty folder, outside the roots):
    │                             the job fails with the message, the submission is not retried
    └── BrowseError               a folder the user may not see, or the cluster is unreachable
                                  (`status`: the HTTP status the pages and the API answer with)

Errors talking to the cluster are `cluster.ClusterError` (cluster/errors.py); callers decide what
they mean for a job (retry later, fail it, show a banner).
"""
from __future__ import annotations


class PortalError(Exception):
    """Base class: `message` is what the user reads."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = str(message)


class StartError(PortalError):
    """A Start that cannot go ahead; `field` names the form field to show it next to (None: the form).

    `problems` lists every (field, message) found, all at once (the form shows each next to its
    field); `message` and `field` are the first, for callers that show one."""

    def __init__(self, message: str, field: str | None = None, problems: list[tuple[str | None, str]] | None = None):
        super().__init__(message)
        self.field = field
        self.problems = problems or [(field, self.message)]

    @classmethod
    def of(cls, problems: list[tuple[str | None, str]]) -> "StartError":
        field, message = problems[0]
        return cls(message, field, [(f, str(m)) for f, m in problems])


class QuotaExceeded(StartError):
    """A Start refused by a quota. `message` says which limit, how much is used and left, and when
    it resets; `field` names the form field to show it next to (None: the whole form)."""


class UploadRejected(PortalError):
    """An uploaded file refused by its content (not an image, truncated, too many pixels ...)."""


class SubmitRejected(PortalError):
    """The job cannot run as asked (empty folder, folder outside the roots): fail it, don't retry."""


class BrowseError(PortalError):
    """A folder listing refused; `status` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status
