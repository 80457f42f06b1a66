"""What scripts/cluster/up.sh and second.sh set up for priorities and bookings, checked on the REAL
clusters: QOS levels with priorities and preemption, the service user allowed to use them, its
right to make reservations, and a real preemption: an urgent job takes the GPU of a running normal
task, which Slurm requeues and runs again (docs/local-cluster.md, "QOS, preemption").

The preemption runs on the second cluster, where nothing else of the test suite fills the GPUs.
Everything is submitted over SSH as the service user, as the portal does.
"""
import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIRST = os.environ.get("FFP_SLURM_CLUSTER", "ffportal")
SECOND = os.environ.get("FFP_SECOND_CLUSTER", "ffportal2")
SECOND_CONF = os.environ.get("FFP_SECOND_SLURM_CONF", "/etc/slurm-second/slurm.conf")
SECOND_WORK = os.environ.get("FFP_SECOND_WORK", "/srv/ffportal/work-second")
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


def squeue_json(job_id: str) -> list[dict]:
    return [j for j in json.loads(run("ffp_ssh2 squeue --json"))["jobs"] if j["array_job_id"] == int(job_id)
            or j["job_id"] == int(job_id)]


def wait_for(what: str, check, timeout: float = 150):
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(1)


def test_an_urgent_job_preempts_a_normal_task_which_is_requeued_and_runs_again():
    name = f"ffp-qos-{uuid.uuid4().hex[:8]}"
    out = f"{SECOND_WORK}/{name}_%a.out"
    # First run: holds its GPU for 5 minutes. A rerun (SLURM_RESTART_COUNT set) ends at once.
    script = 'echo "run restart=${SLURM_RESTART_COUNT:-0}"; [ -n "$SLURM_RESTART_COUNT" ] || sleep 300'
    low = run(f"ffp_run2 sbatch --parsable --qos=normal --gres=gpu:a100:1 --array=0-1 --time=10 --mem=100M "
              f"--open-mode=append -J {name} -o '{out}' --wrap '{script}'").strip()
    try:
        wait_for("both normal tasks running", lambda: [j["job_state"] for j in squeue_json(low)] == ["RUNNING"] * 2)
        urgent = run(f"ffp_run2 sbatch --parsable --qos=urgent --gres=gpu:a100:1 --time=2 --mem=100M "
                     f"-J {name}-urgent -o /dev/null --wrap 'sleep 5'").strip()

        def requeued():
            tasks = {j["array_task_id"]: j for j in squeue_json(low)}
            again = [t for t in tasks.values() if t["restart_cnt"] == 1]
            return again if len(tasks) == 2 and len(again) == 1 and again[0]["job_state"] == "PENDING" else None

        task = wait_for("one normal task back in the queue, restarted once", requeued, timeout=30)[0]
        index, raw_id = task["array_task_id"], task["job_id"]
        # Slurm holds a requeued job cred_expire (30 s) with reason BeginTime; right after the requeue,
        # before the scheduler's next pass, the reason may still read "None" (seen in CI).
        assert task["state_reason"] in ("BeginTime", "None"), task["state_reason"]
        # The requeued task is the same Slurm job (same id); the other one still runs.
        assert [j["job_state"] for j in squeue_json(low) if j["array_task_id"] != index] == ["RUNNING"]

        def both_runs_accounted():
            rows = run(f"ffp_ssh2 sacct -D -X -n -P -j {raw_id} -o JobIDRaw,State").split()
            return rows if [r.split("|")[1].split()[0] for r in rows] == ["PREEMPTED", "COMPLETED"] else None

        rows = wait_for("the preempted task's second run COMPLETED", both_runs_accounted, timeout=120)
        assert {r.split("|")[0] for r in rows} == {str(raw_id)}
        urgent_state = run(f"ffp_ssh2 sacct -X -n -P -j {urgent} -o State").split()
        assert urgent_state and urgent_state[0] in {"RUNNING", "COMPLETED"}
        log = run(f"ffp_ssh2 cat {SECOND_WORK}/{name}_{index}.out")
        assert "DUE TO PREEMPTION" in log and log.count("run restart=") == 2 and "run restart=1" in log
    finally:
        run(f"ffp_ssh2 scancel --name {name} && ffp_ssh2 'rm -f {SECOND_WORK}/{name}_*.out'")
