"""The REAL local cluster the integration tests use: sshd on 127.0.0.1:2222 and Slurm 22.05.

Paths come from the same environment variables, with the same defaults, as scripts/cluster/env.sh.
`connect_or_fail` never skips: when the cluster is down the test FAILS and says how to bring it up.
"""
import os
import socket

import pytest

from cluster import ClusterConfig, get_runner, sinfo_argv

STATE = os.environ.get("FFP_STATE", "/var/lib/ffportal")
WORK = os.environ.get("FFP_WORK", "/srv/ffportal/work")
HOST = os.environ.get("FFP_SSH_HOST", "127.0.0.1")
PORT = int(os.environ.get("FFP_SSH_PORT", "2222"))
USER = os.environ.get("FFP_SSH_USER", "ffportal")
KEY = os.environ.get("FFP_SSH_KEY", f"{STATE}/ssh/id_ed25519")
KNOWN_HOSTS = os.environ.get("FFP_SSH_KNOWN_HOSTS", f"{STATE}/ssh/known_hosts")
PARTITION = os.environ.get("FFP_GPU_PARTITION", "gpu")
GRES = os.environ.get("FFP_GPU_GRES", "gpu:h200")
UP = "bring the local cluster up with `bash scripts/cluster/up.sh` (check: scripts/cluster/check.sh)"


def connect_or_fail() -> ClusterConfig:
    """The cluster's ClusterConfig once sshd and Slurm answer; pytest.fail with the reason otherwise."""
    for path in (KEY, KNOWN_HOSTS):
        if not os.path.isfile(path):
            pytest.fail(f"the cluster's SSH file {path} is missing: {UP}", pytrace=False)
    problem = None
    try:
        socket.create_connection((HOST, PORT), timeout=3).close()
    except OSError as e:
        problem = f"sshd is not listening on {HOST}:{PORT} ({e.strerror or e})"
    if problem is None:
        with open(KEY) as key, open(KNOWN_HOSTS) as known:
            config = ClusterConfig(HOST, PORT, USER, key.read(), known.read())
        probe = get_runner(config).run(sinfo_argv(), timeout=30)
        if probe.rc != 0:
            problem = f"Slurm does not answer over SSH (sinfo: {probe.stderr.strip()})"
    if problem:
        pytest.fail(f"{problem}: {UP}", pytrace=False)
    return config
