"""File operations over SFTP for `cluster.ssh.SSHRunner`: atomic uploads, downloads, folders.

Private to `cluster.ssh`. Every operation here is safe to repeat (uploads go to a temporary name
first, then are renamed), so a call whose connection died is retried once on a fresh one
(`cluster._connect.retried_once`).
"""
from __future__ import annotations

import dataclasses
import os
import posixpath
import secrets
import socket
import stat
import threading
from collections.abc import Callable
from typing import Literal, TypeVar

import paramiko

from ._connect import retried_once
from .errors import ClusterUnreachable, CommandTimedOut, RemoteFileError

_SFTP_TIMEOUT = 120  # seconds one SFTP request may take
T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class RemoteEntry:
    name: str
    path: str
    type: Literal["dir", "file", "other"]
    size: int
    mtime: int


class FileTransfers:
    """The SFTP half of `SSHRunner`: one SFTP session on the runner's pooled connection.

    Calls share that session under `_sftp_lock`; the connection itself comes from the runner
    (`_live_client`, `_drop`, `transport`, and `config` for the address in messages).
    """

    _sftp_lock: threading.Lock
    _sftp: paramiko.SFTPClient | None
    transport: paramiko.Transport | None

    def _live_client(self) -> paramiko.SSHClient:
        raise NotImplementedError

    def _drop(self) -> None:
        raise NotImplementedError

    def _sftp_call(self, what: str, path: str, fn: Callable[[paramiko.SFTPClient], T]) -> T:
        """Run `fn(sftp)`, retrying once on a fresh connection if the old one had died.

        Every SFTP operation here is safe to repeat (uploads go to a temporary name first). An
        OSError on a connection that is still alive is the file's problem (RemoteFileError), not
        the connection's, and is not retried.
        """
        def attempt() -> T:
            try:
                client = self._live_client()
                if self._sftp is None:
                    self._sftp = client.open_sftp()
                    # Without a timeout a hung server blocks an SFTP call forever.
                    self._sftp.get_channel().settimeout(_SFTP_TIMEOUT)
                return fn(self._sftp)
            except socket.timeout:
                self._sftp = None  # a request is still outstanding: the session is out of step
                raise CommandTimedOut(f"the cluster did not answer within {_SFTP_TIMEOUT} s "
                                      f"while trying to {what} {path}") from None
            except OSError as e:
                transport = self.transport
                if transport is not None and transport.is_active():
                    raise _file_error(what, path, e) from None
                raise

        return retried_once(
            attempt, self._drop,
            lambda e: ClusterUnreachable(f"the connection to the cluster at {self.config.address} was lost "
                                         f"while trying to {what} {path}: {e}"),
            guard=self._sftp_lock)

    def _put(self, what: str, remote_path: str, mode: int,
             write: Callable[[paramiko.SFTPClient, str], object]) -> None:
        """`write(sftp, tmp)` to a temporary `.part` name beside `remote_path`, then `mode`, then a
        posix-rename into place: a reader never sees half a file. The part is removed on any failure."""
        def put(sftp: paramiko.SFTPClient) -> None:
            tmp = f"{remote_path}.{secrets.token_hex(4)}.part"
            try:
                write(sftp, tmp)
                sftp.chmod(tmp, mode)
                sftp.posix_rename(tmp, remote_path)
            except BaseException:
                _remove_quietly(sftp, tmp)
                raise
        self._sftp_call(what, remote_path, put)

    def put_bytes(self, data: bytes, remote_path: str, mode: int = 0o600) -> None:
        """Write `data` to `remote_path` atomically: a temporary `.part` file, then posix-rename.
        Private to the service user unless `mode` says otherwise (a job's files are people's faces)."""
        def write(sftp: paramiko.SFTPClient, tmp: str) -> None:
            with sftp.open(tmp, "wb") as f:
                f.set_pipelined(True)
                f.write(data)
        self._put("write", remote_path, mode, write)

    def put_file(self, local_path: str, remote_path: str, mode: int = 0o600) -> None:
        """Upload a local file atomically (temporary `.part` name, then posix-rename), private to
        the service user unless `mode` says otherwise."""
        self._put("upload to", remote_path, mode, lambda sftp, tmp: sftp.put(local_path, tmp))

    def get_bytes(self, remote_path: str) -> bytes:
        def get(sftp: paramiko.SFTPClient) -> bytes:
            with sftp.open(remote_path, "rb") as f:
                f.prefetch()
                return f.read()
        return self._sftp_call("read", remote_path, get)

    def get_file(self, remote_path: str, local_path: str) -> None:
        """Download to `local_path`, atomically on the local side too (a reader never sees half a file)."""
        tmp = f"{local_path}.{secrets.token_hex(4)}.part"
        try:
            self._sftp_call("download", remote_path, lambda sftp: sftp.get(remote_path, tmp))
            os.replace(tmp, local_path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def makedirs(self, remote_path: str, mode: int = 0o700) -> None:
        """`mkdir -p` over SFTP; existing folders are fine, an existing non-folder is an error.
        New folders are private to the service user unless `mode` says otherwise."""
        def mkdirs(sftp: paramiko.SFTPClient) -> None:
            missing = []
            path = posixpath.normpath(remote_path)
            while True:
                try:
                    if not stat.S_ISDIR(sftp.stat(path).st_mode):
                        raise OSError(20, "not a folder", path)  # ENOTDIR
                    break
                except FileNotFoundError:
                    missing.append(path)
                    parent = posixpath.dirname(path)
                    if parent == path:
                        break
                    path = parent
            for path in reversed(missing):
                try:
                    sftp.mkdir(path, mode)
                except OSError:
                    if not stat.S_ISDIR(sftp.stat(path).st_mode):  # created by someone else: fine
                        raise
        self._sftp_call("create the folder", remote_path, mkdirs)

    def listdir(self, remote_path: str) -> list[RemoteEntry]:
        """Entries of a folder sorted by name; symlinks resolved by stat, broken ones left out."""
        def ls(sftp: paramiko.SFTPClient) -> list[RemoteEntry]:
            entries = []
            for attr in sftp.listdir_attr(remote_path):
                path = posixpath.join(remote_path, attr.filename)
                if stat.S_ISLNK(attr.st_mode or 0):
                    try:
                        attr = sftp.stat(path)
                    except OSError:
                        continue  # broken link (or target not readable): nothing to show
                mode = attr.st_mode or 0
                kind = "dir" if stat.S_ISDIR(mode) else "file" if stat.S_ISREG(mode) else "other"
                entries.append(RemoteEntry(posixpath.basename(path), path, kind,
                                           int(attr.st_size or 0), int(attr.st_mtime or 0)))
            return sorted(entries, key=lambda e: e.name)
        return self._sftp_call("list", remote_path, ls)

    def realpath(self, remote_path: str) -> str:
        """The canonical path on the cluster (symlinks resolved, via SFTP's realpath)."""
        return self._sftp_call("resolve", remote_path, lambda sftp: sftp.normalize(remote_path))


def _remove_quietly(sftp: paramiko.SFTPClient, path: str) -> None:
    try:
        sftp.remove(path)
    except Exception:  # noqa: BLE001 - best effort: the original error is the one worth reporting
        pass


def _file_error(what: str, path: str, e: OSError) -> RemoteFileError:
    words = {2: "no such file or folder", 13: "permission denied", 20: "not a folder",
             17: "already exists", 21: "is a folder"}.get(e.errno or 0, e.strerror or str(e))
    return RemoteFileError(f"cannot {what} {path} on the cluster: {words}", path, e.errno)
