"""The runner against the REAL local cluster: sshd on 127.0.0.1:2222 and Slurm 22.05.

Never skipped: when the cluster is down these tests FAIL and say how to bring it up
(`bash scripts/cluster/up.sh`). Paths come from the same environment variables, with the same
defaults, as scripts/cluster/env.sh.
"""
import os
import posixpath
import socket
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from cluster import (
    AuthenticationFailed,
    ClusterConfig,
    ClusterUnreachable,
    HostKeyRejected,
    PathNotAllowed,
    RemoteFileError,
    SbatchSpec,
    SSHRunner,
    find_job_by_name,
    parse_sacct,
    parse_sbatch_parsable,
    parse_sinfo,
    parse_squeue,
    plain_reason,
    render_script,
    resolve_remote_in_roots,
    sacct_argv,
    sacct_exit_codes_argv,
    sbatch_argv,
    scancel_argv,
    sinfo_argv,
    squeue_argv,
)
from cluster.states import is_terminal

from .real_cluster import GRES, HOST, PARTITION, PORT, USER, WORK

HOSTILE = "it's \"quoted\" $(touch /tmp/ffp-pwned) ; `id` # 名字 😀 \\ back"


def new_key_text() -> str:
    return ed25519.Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption()).decode()


def new_public_line() -> str:
    return ed25519.Ed25519PrivateKey.generate().public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()


@pytest.fixture(scope="module")
def scratch(runner):
    """A fresh folder under $FFP_WORK/tmp-tests, with a hostile name, removed afterwards."""
    path = posixpath.join(WORK, "tmp-tests", f"run {uuid.uuid4().hex[:8]} $(x) 名字")
    runner.makedirs(path)
    yield path
    runner.run(["rm", "-rf", "--", path], timeout=30)


def test_it_runs_sinfo_with_the_pinned_key(runner):
    nodes = parse_sinfo(runner.run(sinfo_argv(), check=True).stdout)
    assert nodes and PARTITION in nodes[0].partitions and nodes[0].gpus >= 1


def test_it_reuses_one_connection_for_20_commands(cfg):
    runner = SSHRunner(cfg)
    try:
        runner.run(["true"])
        transport = runner.transport
        for i in range(20):
            assert runner.run(["echo", str(i)]).stdout == f"{i}\n"
        assert runner.connect_count == 1 and runner.transport is transport
    finally:
        runner.close()


def test_it_shares_one_connection_between_threads(cfg, scratch):
    runner = SSHRunner(cfg)

    def work(i):
        path = posixpath.join(scratch, f"thread-{i}")
        runner.put_bytes(str(i).encode(), path)
        return [runner.run(["cat", path]).stdout for _ in range(5)] + [runner.get_bytes(path).decode()]
    try:
        with ThreadPoolExecutor(8) as pool:
            outputs = list(pool.map(work, range(8)))
        assert outputs == [[str(i)] * 6 for i in range(8)]
        assert runner.connect_count == 1
    finally:
        runner.close()


def test_a_command_reading_stdin_without_input_ends_instead_of_hanging(cfg):
    runner = SSHRunner(cfg)
    try:
        assert runner.run(["cat"], timeout=10).stdout == ""
        assert runner.run(["cat"], stdin="fed\n", timeout=10).stdout == "fed\n"
    finally:
        runner.close()


def test_many_quick_commands_at_once_never_break_the_shared_connection(cfg):
    # Commands that exit at once used to race their EOF against sshd's CLOSE, and sshd then dropped
    # the whole connection (seen under load in CI): every thread's command failed or reconnected.
    runner = SSHRunner(cfg)
    try:
        with ThreadPoolExecutor(8) as pool:
            codes = list(pool.map(lambda _: runner.run(["true"]).rc, range(400)))
        assert codes == [0] * 400
        assert runner.connect_count == 1
    finally:
        runner.close()


def test_it_reconnects_once_when_the_connection_died(cfg):
    runner = SSHRunner(cfg)
    try:
        runner.run(["true"])
        runner.transport.close()  # as if sshd restarted
        assert runner.run(["echo", "back"]).stdout == "back\n"
        assert runner.connect_count == 2
    finally:
        runner.close()


def test_it_runs_a_batch_in_one_exec(cfg):
    runner = SSHRunner(cfg)
    opened = []
    real_open = runner._open_channel
    runner._open_channel = lambda: opened.append(1) or real_open()
    try:
        results = runner.run_batch([["echo", "a b"], ["sh", "-c", "echo oops >&2; exit 3"],
                                    squeue_argv()], timeout=30)
    finally:
        runner.close()
    assert len(opened) == 1
    assert [(r.rc, r.stdout, r.stderr) for r in results[:2]] == [(0, "a b\n", ""), (3, "", "oops\n")]
    assert results[2].rc == 0 and isinstance(parse_squeue(results[2].stdout), list)


def test_it_refuses_a_changed_host_key(cfg):
    bad = ClusterConfig(HOST, PORT, USER, cfg.private_key, f"[{HOST}]:{PORT} {new_public_line()}")
    with pytest.raises(HostKeyRejected, match="CHANGED.*man-in-the-middle") as caught:
        SSHRunner(bad).run(["true"])
    assert cfg.private_key.strip().splitlines()[1] not in str(caught.value)


def test_it_refuses_an_unknown_host(cfg):
    for known in ("", f"[{HOST}]:{PORT + 1} {new_public_line()}"):
        with pytest.raises(HostKeyRejected, match="not the one pinned.*To fix"):
            SSHRunner(ClusterConfig(HOST, PORT, USER, cfg.private_key, known)).run(["true"])


def test_it_reports_a_key_the_cluster_does_not_accept(cfg):
    with pytest.raises(AuthenticationFailed, match="refused the profile's SSH key"):
        SSHRunner(ClusterConfig(HOST, PORT, USER, new_key_text(), cfg.known_hosts)).run(["true"])


def test_it_reports_a_port_with_nothing_listening_without_waiting_for_the_timeout(cfg):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # free once the socket closes
    connect_timeout = 60
    started = time.monotonic()
    with pytest.raises(ClusterUnreachable, match=f"cannot reach the cluster at 127.0.0.1:{port}: "
                                                  "connection refused"):
        SSHRunner(ClusterConfig("127.0.0.1", port, USER, cfg.private_key, cfg.known_hosts,
                                connect_timeout=connect_timeout)).run(["true"])
    # A refusal is reported as such, not after the connect timeout ran out (a generous bound).
    assert time.monotonic() - started < connect_timeout / 2


def test_it_moves_files_atomically_with_hostile_names(runner, scratch, tmp_path):
    folder = posixpath.join(scratch, "a b", "c;d")
    runner.makedirs(folder)
    runner.makedirs(folder)  # already there: fine
    path = posixpath.join(folder, "it's $(touch pwned) ; 名字 😀.bin")
    data = os.urandom(300_000)
    runner.put_bytes(data, path, mode=0o600)
    assert runner.get_bytes(path) == data
    assert runner.run(["stat", "-c", "%a", path]).stdout.strip() == "600"
    local = tmp_path / "up.bin"
    local.write_bytes(b"second")
    runner.put_file(str(local), path)  # replaces atomically
    runner.get_file(path, str(tmp_path / "down.bin"))
    assert (tmp_path / "down.bin").read_bytes() == b"second"
    entries = runner.listdir(folder)
    assert [(e.name, e.type, e.size) for e in entries] == [(posixpath.basename(path), "file", 6)]
    assert entries[0].path == path and entries[0].mtime > 0  # and no .part file left behind
    assert runner.run(["test", "-e", posixpath.join(folder, "pwned")]).rc == 1


def test_it_resolves_symlinks_and_skips_broken_ones(runner, scratch):
    target = posixpath.join(scratch, "real dir")
    runner.makedirs(target)
    link = posixpath.join(scratch, "link")
    runner.run(["ln", "-s", target, link], check=True)
    runner.run(["ln", "-s", "/nonexistent/nowhere", posixpath.join(scratch, "broken")], check=True)
    runner.run(["ln", "-s", "/etc", posixpath.join(scratch, "escape")], check=True)
    assert runner.realpath(link) == target
    kinds = {e.name: e.type for e in runner.listdir(scratch)}
    assert kinds["link"] == "dir" and kinds["real dir"] == "dir" and "broken" not in kinds
    assert resolve_remote_in_roots(runner, link, [scratch]) == target
    with pytest.raises(PathNotAllowed, match="symbolic link"):
        resolve_remote_in_roots(runner, posixpath.join(scratch, "escape", "passwd"), [scratch])


def test_it_reports_a_missing_remote_file(runner, scratch):
    with pytest.raises(RemoteFileError, match="no such file") as caught:
        runner.get_bytes(posixpath.join(scratch, "missing.txt"))
    assert caught.value.errno == 2


def poll_until_done(runner, job_id, count, timeout=60):
    """sacct's view of the job once all `count` tasks are terminal (exit codes from sacct -P)."""
    deadline, tasks = time.monotonic() + timeout, []
    while time.monotonic() < deadline:
        sq, sa, codes = runner.run_batch([squeue_argv(job_ids=[job_id]), sacct_argv(job_ids=[job_id]),
                                          sacct_exit_codes_argv([job_id])], timeout=30)
        if sa.rc == 0:
            tasks = parse_sacct(sa.stdout, codes.stdout)
            if len(tasks) == count and all(is_terminal(t.state) for t in tasks):
                return tasks, parse_squeue(sq.stdout, job_ids=[job_id])
        time.sleep(0.5)
    pytest.fail(f"job {job_id} not finished after {timeout} s: {[(t.task_index, t.state) for t in tasks]}")


RUN = uuid.uuid4().hex[:8]  # job names must differ from earlier runs: they are looked up by name


def job_name(name):
    return f"ffp-test {RUN} {name} {HOSTILE}".replace("'", "")  # a ' is refused in names


def submit(runner, scratch, name, command, indexes, env=None):
    logs = posixpath.join(scratch, name, "logs %")
    runner.makedirs(logs)
    script = render_script(SbatchSpec(
        job_name=job_name(name), comment=HOSTILE, partition=PARTITION,
        time_limit="00:02:00", cpus_per_task=1, mem="50M", gres=f"{GRES}:1", array_indexes=indexes,
        array_limit=None, log_dir=logs, log_name="slurm_%A_%a.out", workdir=posixpath.dirname(logs), command=command,
        env=env or {}))
    path = posixpath.join(scratch, name, "job.sh")
    runner.put_bytes(script.encode(), path, mode=0o755)
    return parse_sbatch_parsable(runner.run(sbatch_argv(path), check=True).stdout), logs


def test_it_runs_a_rendered_array_job_to_completion(runner, scratch):
    command = ["/bin/sh", "-c", 'echo "task=$SLURM_ARRAY_TASK_ID arg=$1 env=$HOSTILE"', "sh", HOSTILE]
    job_id, logs = submit(runner, scratch, "array", command, [0, 1, 2], env={"HOSTILE": HOSTILE})
    tasks, queued = poll_until_done(runner, job_id, 3)
    assert [(t.job_id, t.task_index, t.state, t.exit_code) for t in tasks] == \
        [(job_id, i, "COMPLETED", 0) for i in range(3)]
    assert all(t.node and t.gpus == 1 for t in tasks)
    assert {t.comment for t in tasks} == {HOSTILE}  # survived sbatch's directive parser intact
    # slurmdbd keeps a '"' in a job name as a backtick; squeue (slurmctld) has it as given.
    assert {t.name for t in tasks} == {job_name("array").replace('"', "`")}
    assert {t.name for t in queued} == {job_name("array")}
    sacct_by_name = runner.run(sacct_argv(name=job_name("array"))).stdout
    assert find_job_by_name(None, sacct_by_name, job_name("array")) == job_id
    assert all(t.state == "COMPLETED" for t in queued)  # still in squeue --json until MinJobAge
    for i in range(3):
        log = runner.get_bytes(posixpath.join(logs, f"slurm_{job_id}_{i}.out")).decode()
        assert log == f"task={i} arg={HOSTILE} env={HOSTILE}\n"
    assert runner.run(["test", "-e", "/tmp/ffp-pwned"]).rc == 1


def test_it_gets_the_exit_codes_sacct_json_loses(runner, scratch):
    command = ["/bin/sh", "-c", '[ "$SLURM_ARRAY_TASK_ID" != 1 ] || exit 3']
    job_id, _ = submit(runner, scratch, "exit codes", command, [0, 1])
    tasks, _ = poll_until_done(runner, job_id, 2)
    assert [(t.task_index, t.state, t.exit_code) for t in tasks] == [(0, "COMPLETED", 0), (1, "FAILED", 3)]
    json_only = parse_sacct(runner.run(sacct_argv(job_ids=[job_id])).stdout)
    assert json_only[1].exit_code is None  # 22.05's JSON says "SUCCESS 0" for exit 3


def test_it_cancels_a_running_job(runner, scratch):
    job_id, _ = submit(runner, scratch, "cancel", ["sleep", "300"], [0])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        queued = parse_squeue(runner.run(squeue_argv(job_ids=[job_id])).stdout, job_ids=[job_id])
        if queued and queued[0].state == "RUNNING":
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"job {job_id} did not start within 60 s")
    runner.run(scancel_argv([job_id]), check=True)
    (task,), _ = poll_until_done(runner, job_id, 1)
    assert (task.state, plain_reason(task)) == ("CANCELLED", "cancelled")
