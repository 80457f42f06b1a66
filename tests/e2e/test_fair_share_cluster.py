"""Fair share between teams, measured on a REAL cluster: Slurm 24.11 (its h200 node: two GPUs). Its
id ([slurm2411]) puts it in `make test`'s run on the newer clusters, beside the main run rather than
after it: most of its three minutes is waiting for Slurm.

Team A queues a big job first: a backlog of WAVES tasks per GPU the template may use, TASK_S seconds each, many waves
deep on the two GPUs. Right after it, two small portal jobs of one photo are started together:
one for team B (its account made on first use, as for any team) and one for team A. They are the
same template, photo and moment; only the account differs, so the second is the baseline: within
one account only age and submission order rank jobs, as if there were no fair share.

What Slurm does (deploy/slurm/slurm.conf.in): once its next usage pass (PriorityCalcPeriod, one
minute here) has charged A's running tasks to A's account, B's jobs rank above A's; B's job starts
at the next free GPU, long before A's backlog drains. A's own small job waits for the whole backlog.

A's backlog is plain `sleep` tasks submitted as the service user with `sbatch --account`: 30 real
photo swaps would hold the shared test machine's two CPUs for minutes. They ask for what a task of
the portal's GPU template asks for (partition, GPU, CPU, memory, time limit, the account's default
QOS), so the scheduler weighs them like portal tasks; the test checks that all share one QOS.

The measured delays (Start - Submit, from `sacct`) are printed to the log (docs/teams.md quotes
them). Other test runs' jobs on the same cluster can take GPUs meanwhile: they lengthen the
backlog and both delays, never the order between A's jobs and B's.
"""
import re
import time
import uuid
from datetime import datetime

import pytest
from django.contrib.auth.models import Group, User

from cluster.slurm.accounts import account_state_argv, add_account_argv, add_user_argv, parse_account_state
from jobs.models import JobStatus, Team, Template
from tests.e2e import sites
from tests.e2e.conftest import SAMPLES, fill, run_rq, watch_until
from tests.e2e.test_end_to_end import start
from tests.e2e.test_teams_cluster import forget

#: team A's backlog: 25 waves on the GPUs (about 125-150 s). B's job overtakes at Slurm's next usage
#: pass (PriorityCalcPeriod: up to a minute after A's tasks start; pending jobs are re-ranked only
#: then), after its way through the portal (seconds; more on a new machine) and one task: at most
#: about 90 s. 15 waves (75-90 s) was too short: on a new machine B's job started 5 s after the
#: backlog's last task (CI).
WAVES = 25
TASK_S = 5


@pytest.mark.parametrize("site", ["24.11"], indirect=True, ids=sites.site_id)
def test_another_teams_small_job_starts_before_a_big_teams_backlog_drains(api, site, folder, redis_queue, capsys):
    host = site
    user = host.profile.username
    tag = uuid.uuid4().hex[:8]
    a, b = f"e2e-fsa-{tag}", f"e2e-fsb-{tag}"
    demo = User.objects.get(username="demo")  # the `api` fixture's user, in both teams
    for account in (a, b):
        group = Group.objects.create(name=f"Team {account}")
        demo.groups.add(group)
        Team.objects.create(group=group, slurm_account=account)
    try:
        # A's account made with the portal's own commands (jobs.clusters.team_accounts), as A's first job would.
        state = parse_account_state(host.slurm(*account_state_argv(user)), a)
        host.slurm(*add_account_argv(a, state.cluster, f"Team {a}"))
        host.slurm(*add_user_argv(user, a, state.cluster, state.qos, state.default_qos))
        template = Template.objects.get(slug=host.gpu)
        gpus = _gpus(host, template)  # every GPU a task of the template may run on: all of them busy
        backlog_tasks = WAVES * gpus
        gres = ":".join(["gpu", *([template.gpu_type] if template.gpu_type else []), str(template.gpu_count)])
        backlog = host.slurm(
            "runuser", "-u", user, "--", "sbatch", "--parsable", f"--account={a}", f"--partition={template.partition}",
            f"--gres={gres}", f"--cpus-per-task={template.cpus_per_task}",
            f"--mem={template.mem}", f"--time={template.time_limit}", f"--array=0-{backlog_tasks - 1}",
            f"--job-name=e2e-fair-share-{tag}", "--output=/dev/null", "--chdir=/tmp", f"--wrap=sleep {TASK_S}",
        ).strip().split(";")[0]

        fill(folder, {"a.jpg": SAMPLES / "t1.jpg"})
        small_b = start(api, folder, template=host.gpu, team=b, name="team B, small")
        small_a = start(api, folder, template=host.gpu, team=a, name="team A, small (baseline)")
        run_rq(redis_queue)  # both submitted, B's account made on the way
        for job in (small_b, small_a):
            job.refresh_from_db()
            assert job.slurm_job_id, job.error
            job = watch_until(job, {JobStatus.COMPLETED, JobStatus.PARTIALLY_FAILED, JobStatus.FAILED})
            assert job.status == JobStatus.COMPLETED, job.error  # the worker really ran
        small_b.refresh_from_db()
        small_a.refresh_from_db()

        # A's small job may end while the backlog's last wave still runs: wait for the backlog's end.
        deadline = time.monotonic() + 120
        while True:
            rows = _sacct(host, backlog, small_b.slurm_job_id, small_a.slurm_job_id)
            tasks = [r for r in rows if r["JobID"].startswith(f"{backlog}_")]
            if len(tasks) == backlog_tasks and not any(r["State"] in ("PENDING", "RUNNING") for r in tasks):
                break
            assert time.monotonic() < deadline, [r for r in tasks if r["State"] != "COMPLETED"]
            time.sleep(2)
        assert all(r["State"] == "COMPLETED" for r in tasks), [r for r in tasks if r["State"] != "COMPLETED"]
        (b_row,) = [r for r in rows if r["JobID"].startswith(f"{small_b.slurm_job_id}_")]
        (a_row,) = [r for r in rows if r["JobID"].startswith(f"{small_a.slurm_job_id}_")]
        # Each job carries its team's account; one QOS for all, so only fair share and age can order them.
        assert {r["Account"] for r in tasks} == {a} and (b_row["Account"], a_row["Account"]) == (b, a), rows
        assert len({r["QOS"] for r in rows}) == 1, rows

        submitted = _at(tasks[0]["Submit"])
        last_backlog_start = max(_at(r["Start"]) for r in tasks)
        drained = max(_at(r["End"]) for r in tasks)
        b_delay = _at(b_row["Start"]) - _at(b_row["Submit"])
        a_delay = _at(a_row["Start"]) - _at(a_row["Submit"])
        with capsys.disabled():
            print(f"\nfair share on Slurm {host.version} ({gpus} GPUs): team A's backlog of {backlog_tasks} x "
                  f"{TASK_S} s tasks "
                  f"drained in {(drained - submitted).total_seconds():.0f} s (its last task started after "
                  f"{(last_backlog_start - submitted).total_seconds():.0f} s); a one-photo job started after "
                  f"{b_delay.total_seconds():.0f} s for team B, {a_delay.total_seconds():.0f} s for team A (baseline)")
        # B's job overtook A's backlog; A's own small job, the same but for its account, did not.
        assert _at(b_row["Start"]) < last_backlog_start, rows
        assert _at(a_row["Start"]) >= last_backlog_start, rows
        assert b_delay < a_delay
    finally:  # the other tests' jobs run for no team again; slurmdbd forgets both accounts
        Group.objects.filter(name__in=[f"Team {a}", f"Team {b}"]).delete()
        forget(host, user, a)
        forget(host, user, b)


def _gpus(host: sites.Site, template: Template) -> int:
    """The GPUs of the template's partition that its tasks may use (its GPU type, or any)."""
    total = 0
    for line in host.slurm("sinfo", "-h", "-N", "-p", template.partition, "-o", "%N %G").splitlines():
        for kind, count in re.findall(r"gpu:(?:([\w.-]+):)?(\d+)", line):
            total += int(count) if not template.gpu_type or kind == template.gpu_type else 0
    assert total, f"no GPU for template {template.slug} on Slurm {host.version}"
    return total // template.gpu_count


def _sacct(host: sites.Site, *job_ids: str) -> list[dict[str, str]]:
    """Each array task's account, QOS, state and times, as Slurm accounted them."""
    fields = ["JobID", "Account", "QOS", "State", "Submit", "Start", "End"]
    out = host.slurm("sacct", "-n", "-X", "-P", "-j", ",".join(job_ids), "-o", ",".join(fields))
    return [dict(zip(fields, line.split("|"), strict=True)) for line in out.splitlines() if line.strip()]


def _at(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)
