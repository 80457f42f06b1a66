"""Once more on a fresh connection: `cluster._connect.retried_once`, as commands and SFTP calls use it.

No sshd: the runner's connections are stand-ins, the first of which may be dead.
"""
from __future__ import annotations

import pytest

from cluster import ClusterConfig, ClusterUnreachable, RemoteFileError, SSHRunner
from cluster._connect import retried_once
from cluster.errors import PathNotAllowed

# ---- the helper itself --------------------------------------------------------------------------


class Calls:
    """An attempt that fails with each of `errors` in turn, then answers "done"; and a drop that counts."""

    def __init__(self, *errors: Exception):
        self.errors, self.runs, self.drops = list(errors), 0, 0

    def attempt(self) -> str:
        self.runs += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"

    def drop(self) -> None:
        self.drops += 1


def lost(e: Exception) -> ClusterUnreachable:
    return ClusterUnreachable(f"lost: {e}")


def test_it_runs_once_when_the_connection_is_alive():
    calls = Calls()
    assert retried_once(calls.attempt, calls.drop, lost) == "done"
    assert (calls.runs, calls.drops) == (1, 0)


def test_it_drops_a_dead_connection_and_runs_once_more():
    calls = Calls(EOFError("gone"))
    assert retried_once(calls.attempt, calls.drop, lost) == "done"
    assert (calls.runs, calls.drops) == (2, 1)


def test_it_gives_up_after_the_second_failure():
    calls = Calls(EOFError("gone"), OSError("refused"), EOFError("never reached"))
    with pytest.raises(ClusterUnreachable, match="lost: refused"):
        retried_once(calls.attempt, calls.drop, lost)
    assert (calls.runs, calls.drops) == (2, 2)


def test_other_errors_go_through_at_once():
    calls = Calls(PathNotAllowed("no"))
    with pytest.raises(PathNotAllowed):
        retried_once(calls.attempt, calls.drop, lost)
    assert (calls.runs, calls.drops) == (1, 0)
    calls = Calls(AttributeError("no transport"))
    with pytest.raises(AttributeError):
        retried_once(calls.attempt, calls.drop, lost)
    assert retried_once(Calls(AttributeError("x")).attempt, calls.drop, lost,
                        dropped=(AttributeError,)) == "done"


def test_it_holds_the_guard_around_each_run_and_its_drop():
    seen = []

    class Guard:
        held = False

        def __enter__(self):
            Guard.held = True

        def __exit__(self, *exc):
            Guard.held = False

    calls = Calls(EOFError("gone"))

    def attempt():
        seen.append(("run", Guard.held))
        return calls.attempt()

    def drop():
        seen.append(("drop", Guard.held))

    retried_once(attempt, drop, lost, guard=Guard())
    assert seen == [("run", True), ("drop", True), ("run", True)] and not Guard.held


# ---- a runner whose first connection died --------------------------------------------------------


class FakeFile:
    def __init__(self, files: dict, path: str):
        self.files, self.path = files, path

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def set_pipelined(self, on: bool) -> None:
        pass

    def write(self, data: bytes) -> None:
        self.files[self.path] = self.files.get(self.path, b"") + data


class FakeSftp:
    """An SFTP session over a dict of files; `fail` is raised by the step it names."""

    def __init__(self, files: dict, fail: tuple[str, Exception] | None = None):
        self.files, self.fail = files, fail

    def _step(self, name: str) -> None:
        if self.fail and self.fail[0] == name:
            raise self.fail[1]

    def get_channel(self):
        return self

    def settimeout(self, seconds: float) -> None:
        pass

    def open(self, path: str, mode: str) -> FakeFile:
        self._step("open")
        return FakeFile(self.files, path)

    def chmod(self, path: str, mode: int) -> None:
        self._step("chmod")

    def posix_rename(self, old: str, new: str) -> None:
        self._step("rename")
        self.files[new] = self.files.pop(old)

    def put(self, local_path: str, path: str) -> None:
        self._step("put")
        with open(local_path, "rb") as f:
            self.files[path] = f.read()

    def remove(self, path: str) -> None:
        del self.files[path]


class FakeTransport:
    """Looks alive; `dropped`: the peer has gone, which only the next request finds out."""

    def __init__(self, dropped: bool):
        self.dropped = dropped

    def is_active(self) -> bool:
        return True

    def open_session(self, timeout: float | None = None) -> str:
        if self.dropped:
            raise EOFError("the connection dropped")
        return "a channel"


class FakeClient:
    def __init__(self, dropped: bool = False, sftp_fail: tuple[str, Exception] | None = None,
                 files: dict | None = None):
        self.transport = FakeTransport(dropped)
        self.sftp_fail, self.files, self.closed = sftp_fail, files if files is not None else {}, False

    def get_transport(self) -> FakeTransport:
        return self.transport

    def open_sftp(self) -> FakeSftp:
        return FakeSftp(self.files, self.sftp_fail)

    def close(self) -> None:
        self.closed = True


class Runner(SSHRunner):
    """Hands out the given connections in turn instead of connecting."""

    def __init__(self, *clients: FakeClient):
        super().__init__(ClusterConfig("login.example", 22, "ffportal", "no key", "no pin"))
        self.clients = list(clients)

    def _connect(self):
        self.connect_count += 1
        return self.clients.pop(0)


def pooled_then(*clients: FakeClient) -> Runner:
    """A runner whose pool holds the first client (alive when pooled: it may die before the next call)."""
    runner = Runner(*clients)
    runner._live_client()
    return runner


def test_a_channel_is_opened_on_a_new_connection_when_the_pooled_one_died():
    dead, fresh = FakeClient(dropped=True), FakeClient()
    runner = pooled_then(dead, fresh)
    assert runner._open_channel() == "a channel"
    assert runner.connect_count == 2 and dead.closed and not fresh.closed


def test_a_channel_that_fails_on_the_new_connection_too_says_so():
    runner = pooled_then(FakeClient(dropped=True), FakeClient(dropped=True), FakeClient())
    with pytest.raises(ClusterUnreachable, match="dropped and a new one failed too"):
        runner._open_channel()
    assert runner.connect_count == 2


def test_an_upload_is_written_again_on_a_new_connection_and_renamed_into_place():
    files: dict = {}
    runner = pooled_then(FakeClient(sftp_fail=("open", EOFError("dropped")), files=files), FakeClient(files=files))
    runner.put_bytes(b"face", "/work/job/sources/0.jpg")
    assert files == {"/work/job/sources/0.jpg": b"face"} and runner.connect_count == 2


def test_a_file_error_on_a_live_connection_is_not_retried():
    runner = pooled_then(FakeClient(sftp_fail=("open", PermissionError(13, "denied"))), FakeClient())
    with pytest.raises(RemoteFileError, match="cannot write /work/x on the cluster: permission denied"):
        runner.put_bytes(b"face", "/work/x")
    assert runner.connect_count == 1


def test_a_failed_upload_leaves_no_part_file():
    files: dict = {}
    runner = pooled_then(FakeClient(sftp_fail=("rename", PermissionError(13, "denied")), files=files))
    with pytest.raises(RemoteFileError):
        runner.put_bytes(b"face", "/work/x")
    assert files == {}


def test_a_local_file_is_uploaded_the_same_way(tmp_path):
    files: dict = {}
    local = tmp_path / "face.jpg"
    local.write_bytes(b"jpeg")
    runner = pooled_then(FakeClient(sftp_fail=("put", EOFError("dropped")), files=files), FakeClient(files=files))
    runner.put_file(str(local), "/work/job/face.jpg")
    assert files == {"/work/job/face.jpg": b"jpeg"} and runner.connect_count == 2
