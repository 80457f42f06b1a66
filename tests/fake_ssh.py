"""The one stand-in for the cluster's SSH seam in unit tests (`cluster.runner_for(profile)`).

`FakeSSH` has the methods of `cluster.SSHRunner` the portal calls (`run`, `run_batch`, `put_bytes`,
`put_file`, `get_bytes`, `get_file`, `makedirs`, `realpath`, `listdir`), answers them from what a
test gives it, and records what it was asked. The `fake_ssh` fixture (tests/conftest.py, a `Seam`)
installs one as `cluster.runner_for`, or makes the seam itself refuse, as for an unreachable cluster.

How a command is answered: `on_run` for `run`, `on_batch` for each command of a `run_batch`
(without `on_batch`, whatever `on_run` is at the time). Either is, and a test may change it
between calls:

- None: exit status 0, no output;
- an answer: a str (the stdout, exit status 0), a tuple (rc, stdout, stderr), a CommandResult, or
  an exception instance, which is raised (the cluster did not answer, or the test forbids the call);
- a dict from a program's name (`program(argv)`) to an answer or a responder; "*" answers any other
  program (without it: exit status 0, no output);
- a responder: a callable `(argv) -> answer`, such as `run_here`, which runs the command here.

A command is recorded once it is answered; one whose answer raised is not.
"""
from __future__ import annotations

import shlex
import subprocess
from pathlib import Path
from typing import Any

import cluster
from cluster import ClusterUnreachable, CommandFailed, CommandResult, RemoteFileError

Answer = Any  # None | str | tuple[int, str, str] | CommandResult | BaseException
How = Any  # Answer | dict[str, Answer | Callable] | Callable[[list[str]], Answer]


def program(argv: list[str]) -> str:
    """The program a command line runs: its first word after `env` and its NAME=value words."""
    words = list(argv)
    if words[:1] == ["env"]:
        words = words[1:]
        while words and "=" in words[0]:
            words = words[1:]
    return words[0] if words else ""


def run_here(argv: list[str], env: dict[str, str] | None = None, timeout: float = 60) -> CommandResult:
    """A responder that runs `argv` on this machine: the same POSIX sh, find and realpath a cluster
    has, so a command's own logic (a folder listing, a guarded delete) is tested for real."""
    done = subprocess.run(argv, capture_output=True, timeout=timeout, env=env)
    return CommandResult(list(argv), done.returncode, done.stdout.decode(errors="replace"),
                         done.stderr.decode(errors="replace"))


def _result(argv: list[str], answer: Answer) -> CommandResult:
    if isinstance(answer, BaseException):
        raise answer
    if isinstance(answer, CommandResult):
        return answer
    if answer is None:
        return CommandResult(list(argv), 0, "", "")
    if isinstance(answer, str):
        return CommandResult(list(argv), 0, answer, "")
    rc, stdout, stderr = answer
    return CommandResult(list(argv), rc, stdout, stderr)


def answer(how: How, argv: list[str]) -> CommandResult:
    """What `how` (see the module's docstring) answers to `argv`."""
    if isinstance(how, dict):
        how = how.get(program(argv), how.get("*"))
    if callable(how):
        how = how(argv)
    return _result(argv, how)


class FakeSSH:
    """A cluster that answers as told. Records: `commands` (the argv of each `run`), `batches` (the
    argv list of each `run_batch`), `written` (remote path -> bytes put there), `made` (folders
    made), `fetched` (remote paths read back).

    `serve`: what reading a remote file gives: bytes (for any path), a dict (path -> bytes; another
    path is missing), or a callable (path -> bytes); None: no file can be read.
    `links`: symbolic links for `realpath` (link -> where it leads; a path under a link follows it),
    `missing`: paths `realpath` finds missing; without `links`, realpath is not expected (a listing
    that took one SFTP call per file is what the portal must never do), and neither is `listdir`.
    """

    def __init__(self, on_run: How = None, on_batch: How = ..., *, serve=None, links: dict[str, str] | None = None,
                 missing=()):
        self.on_run, self.on_batch = on_run, on_batch
        self.serve, self.links, self.missing = serve, links, set(missing)
        self.commands: list[list[str]] = []
        self.batches: list[list[list[str]]] = []
        self.written: dict[str, bytes] = {}
        self.made: list[str] = []
        self.fetched: list[str] = []

    # ---- commands ---------------------------------------------------------------------------------

    def run(self, argv: list[str], stdin: bytes | str | None = None, timeout: float = 60,
            check: bool = False) -> CommandResult:
        """As SSHRunner.run: `check` raises CommandFailed on a non-zero exit status."""
        result = answer(self.on_run, argv)
        self.commands.append(argv)
        if check and result.rc != 0:
            last = result.stderr.strip().splitlines()[-1:] or ["(no error output)"]
            raise CommandFailed(f"`{shlex.join(argv)}` failed on the cluster (exit status {result.rc}): {last[0]}",
                                result.rc, result.stderr)
        return result

    def run_batch(self, argvs: list[list[str]], timeout: float = 60) -> list[CommandResult]:
        how = self.on_run if self.on_batch is ... else self.on_batch
        results = [answer(how, argv) for argv in argvs]
        self.batches.append(argvs)
        return results

    # ---- files ------------------------------------------------------------------------------------

    def put_bytes(self, data: bytes, remote_path: str, mode: int = 0o600) -> None:
        self.written[remote_path] = data

    def put_file(self, local_path: str, remote_path: str, mode: int = 0o600) -> None:
        self.written[remote_path] = Path(local_path).read_bytes()

    def makedirs(self, remote_path: str, mode: int = 0o700) -> None:
        self.made.append(remote_path)

    def get_bytes(self, remote_path: str) -> bytes:
        serve = self.serve
        if callable(serve):
            data = serve(remote_path)
        elif isinstance(serve, dict) and remote_path in serve:
            data = serve[remote_path]
        elif isinstance(serve, bytes):
            data = serve
        else:
            raise RemoteFileError(f"no such file on the cluster: {remote_path}", remote_path, 2)
        self.fetched.append(remote_path)
        return data

    def get_file(self, remote_path: str, local_path: str) -> None:
        Path(local_path).write_bytes(self.get_bytes(remote_path))

    def realpath(self, remote_path: str) -> str:
        if self.links is None:
            raise AssertionError(f"realpath({remote_path!r}) asked: one SFTP call per path")
        if remote_path in self.missing:
            raise RemoteFileError(f"no such file: {remote_path}", remote_path, 2)
        for link, target in sorted(self.links.items(), key=lambda kv: -len(kv[0])):
            if remote_path == link or remote_path.startswith(link + "/"):
                return target + remote_path[len(link):]
        return remote_path

    def listdir(self, remote_path: str):
        raise AssertionError(f"listdir({remote_path!r}) asked: one SFTP call per file")


class Seam:
    """The `fake_ssh` fixture: `fake_ssh(...)` installs a FakeSSH (the one given, or a new one made
    from the keywords) as `cluster.runner_for` and returns it; `fake_ssh.unreachable(message)`
    makes `cluster.runner_for` itself raise ClusterUnreachable, as when no connection can be made."""

    def __init__(self, monkeypatch):
        self._monkeypatch = monkeypatch

    def __call__(self, runner: FakeSSH | None = None, /, **how) -> FakeSSH:
        runner = runner if runner is not None else FakeSSH(**how)
        self._monkeypatch.setattr(cluster, "runner_for", lambda profile: runner)
        return runner

    def unreachable(self, message: str = "connection refused") -> None:
        def refuse(profile):
            raise ClusterUnreachable(message)

        self._monkeypatch.setattr(cluster, "runner_for", refuse)
