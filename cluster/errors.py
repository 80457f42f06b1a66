"""Errors raised by the `cluster` package: one tree, every message in plain words.

    ClusterError                  anything that went wrong talking to the cluster
    ├── ClusterUnreachable        no connection: refused, timed out, DNS, connection lost
    │   └── CommandTimedOut       a command did not finish in time (it may still be running)
    ├── HostKeyRejected           the host key is unknown or differs from the pinned one
    ├── AuthenticationFailed      the cluster refused the profile's key (or the key is unreadable)
    ├── CommandFailed             a remote command exited non-zero (has .rc, .stderr)
    ├── RemoteFileError           an SFTP operation failed: no such file, permission denied
    ├── SlurmError                Slurm answered, but not with something usable
    └── PathNotAllowed            a path is outside the allowed roots, or malformed

Callers decide what to do (retry later, mark a job failed, show a form error); library code never
turns an error into `False` or exits. No message ever contains a private key.
"""
from __future__ import annotations


class ClusterError(Exception):
    """Base class: catch this to handle every cluster problem at once."""


class ClusterUnreachable(ClusterError):
    """The cluster could not be reached, or the connection died mid-way. Usually worth retrying."""


class CommandTimedOut(ClusterUnreachable):
    """A command ran longer than its timeout. The channel was closed, but the command may have run
    (or still be running) on the cluster, so callers must not assume it did nothing."""


class HostKeyRejected(ClusterError):
    """The cluster's SSH host key does not match the key pinned in the cluster profile."""


class AuthenticationFailed(ClusterError):
    """The cluster did not accept the profile's private key, or the key text could not be read."""


class CommandFailed(ClusterError):
    """A remote command exited with a non-zero status (only raised when the caller asked `check`)."""

    def __init__(self, message: str, rc: int, stderr: str = ""):
        super().__init__(message)
        self.rc = rc
        self.stderr = stderr


class RemoteFileError(ClusterError):
    """A file operation on the cluster failed. `errno` is the POSIX code when known (ENOENT, EACCES)."""

    def __init__(self, message: str, path: str, errno: int | None = None):
        super().__init__(message)
        self.path = path
        self.errno = errno


class SlurmError(ClusterError):
    """Slurm's output could not be understood, or Slurm reported an error in it."""


class PathNotAllowed(ClusterError):
    """A path is not absolute, is malformed, or lies outside every allowed root."""
