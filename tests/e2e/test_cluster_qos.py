"""What scripts/cluster/up.sh and second.sh set up for priorities and bookings, checked on the REAL
clusters: QOS levels with priorities and preemption, the service user allowed to use them, its
right to make reservations (docs/local-cluster.md, "QOS, preemption"). A real preemption, from a
Start to every photo done exactly once, is tests/e2e/test_preemption.py's (the first cluster; the
second has the same settings, checked here).
"""
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIRST = os.environ.get("FFP_SLURM_CLUSTER", "ffportal")
SECOND = os.environ.get("FFP_SECOND_CLUSTER", "ffportal2")
SECOND_CONF = os.environ.get("FFP_SECOND_SLURM_CONF", "/etc/slurm-second/slurm.conf")
SSH_USER = os.environ.get("FFP_SSH_USER", "ffportal")


def run(command: str, timeout: float = 60) -> str:
    """A bash command line with scripts/cluster's helpers loaded (ffp_run2: over the second
    cluster's SSH login as the service user); its stdout."""
    r = subprocess.run(["bash", "-c", f". scripts/cluster/env.sh && . scripts/cluster/lib.sh && {command}"],
                       cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{command} failed ({r.returncode}): {r.stdout}{r.stderr}"
    return r.stdout


def config(conf: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}
    if conf:
        env["SLURM_CONF"] = conf
    out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, env=env, timeout=30,
                         check=True).stdout
    return {k.strip(): v.strip() for k, _, v in (line.partition("=") for line in out.splitlines()) if _}


@pytest.mark.parametrize("conf", [None, SECOND_CONF], ids=["first", "second"])
def test_both_clusters_preempt_by_qos_and_requeue(conf):
    c = config(conf)
    assert c["PreemptType"] == "preempt/qos" and c["PreemptMode"] == "REQUEUE"
    assert c["PriorityType"] == "priority/multifactor" and int(c["PriorityWeightQOS"]) >= 1000000
    assert "qos" in c["AccountingStorageEnforce"]


def test_the_service_user_may_use_every_qos_and_make_reservations():
    qos = {line.split("|")[0]: line.split("|")[1:] for line in subprocess.run(
        ["sacctmgr", "-n", "-P", "show", "qos", "format=name,priority,preempt"],
        capture_output=True, text=True, check=True).stdout.splitlines()}
    assert qos["normal"] == ["0", ""] and qos["high"] == ["100", "normal"] and qos["urgent"] == ["1000", "high,normal"]
    assocs = subprocess.run(["sacctmgr", "-n", "-P", "list", "assoc", f"user={SSH_USER}",
                             "format=cluster,qos,defaultqos"], capture_output=True, text=True, check=True).stdout
    assert set(assocs.split()) == {f"{FIRST}|high,normal,urgent|normal", f"{SECOND}|high,normal,urgent|normal"}
    admin = subprocess.run(["sacctmgr", "-n", "-P", "show", "user", SSH_USER, "format=adminlevel"],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert admin == "Operator"
    # An unknown QOS is refused at submission (AccountingStorageEnforce=qos), in Slurm's words.
    r = subprocess.run(["bash", "-c", ". scripts/cluster/env.sh && . scripts/cluster/lib.sh && "
                        "ffp_run2 sbatch --parsable --qos=no-such-qos --time=1 --wrap true"],
                       cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "Invalid qos specification" in r.stderr
