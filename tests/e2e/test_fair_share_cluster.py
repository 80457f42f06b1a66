"""Fair share between teams, measured on a REAL cluster: Slurm 24.11 (two nodes, four GPUs). Its
id ([slurm2411]) puts it in `make test`'s run on the newer clusters, beside the main run rather than
after it: most of its two minutes is waiting for Slurm.

Team A queues a big job first: a backlog of WAVES tasks per GPU the template may use, TASK_S seconds
each, many waves deep. Right after it, two small portal jobs of one photo are started together:
one for team B (its account made on first use, as for any team) and one for team A. They are the
same template, photo and moment; only the account differs, so the second is the baseline: within
one account only age and submission order rank jobs, as if there were no fair share.

What Slurm does (deploy/slurm/slurm.conf.in): once a usage pass (PriorityCalcPeriod, one minute
here) has counted A's charged usage (each task's, at its end: AccountingStorageEnforce has `limits`;
without it 5-second tasks were barely charged and B waited up to 269 s) and computed B's new
account's share (0 until then), B's job ranks above A's waiting tasks and starts at the next free
GPU while A's tasks still wait; A's own small job waits behind them. The test checks exactly that moment, from `sacct`, then cancels A's
tasks still waiting instead of waiting minutes for them. The backlog is longer than any pass timing
can make B wait, so the order checked does not depend on when the pass falls; if B never overtakes,
the failure shows what `sprio` and `sshare` said while it waited.

A's backlog is plain `sleep` tasks submitted as the service user with `sbatch --account`: 30 real
photo swaps would hold the shared test machine's two CPUs for minutes. They ask for what a task of
the portal's GPU template asks for (partition, GPU, CPU, memory, time limit, the account's default
QOS), so the scheduler weighs them like portal tasks; the test checks that all share one QOS.

The measured delays (Start - Submit, from `sacct`) are printed to the log (docs/teams.md quotes
them). Other test runs' jobs on the same cluster can take GPUs meanwhile: they lengthen both
delays, never the order between A's jobs and B's.
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

#: team A's backlog: 60 waves on the GPUs (300 s or more), far longer than B's job can wait: it overtakes
#: at Slurm's first usage pass after B's account is made (PriorityCalcPeriod: a new account's jobs rank
#: with a fair-share factor of 0 until a pass has computed the account's), so within about 65 s. The test
#: does not wait for the backlog to drain: once B's task has started it cancels A's tasks still waiting.
WAVES = 60
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

        # Until B's task starts: what Slurm ranks and accounts (kept, to say why if B never overtakes).
        seen: list[str] = []
        while True:
            rows = _sacct(host, backlog, small_b.slurm_job_id, small_a.slurm_job_id)
            b_row = _task(rows, small_b.slurm_job_id)
            waiting = [r for r in rows if r["JobID"].startswith(f"{backlog}_") and r["State"] == "PENDING"]
            if b_row and b_row["State"] != "PENDING":
                break
            seen = [*seen[-5:], _ranks(host, backlog, small_b.slurm_job_id, small_a.slurm_job_id)]
            assert waiting, "team B's job did not overtake team A's backlog; what Slurm showed:\n" + "\n".join(seen)
            time.sleep(3)
        # B's task started while A's tasks still waited; A's own small job, the same but for its account, waits.
        a_row = _task(rows, small_a.slurm_job_id)
        assert waiting and a_row and a_row["State"] == "PENDING", rows
        host.slurm("scancel", "--state=PENDING", backlog)  # the rest of the backlog is not needed

        for job in (small_b, small_a):
            job = watch_until(job, {JobStatus.COMPLETED, JobStatus.PARTIALLY_FAILED, JobStatus.FAILED})
            assert job.status == JobStatus.COMPLETED, job.error  # the worker really ran
        rows = _sacct(host, backlog, small_b.slurm_job_id, small_a.slurm_job_id)
        tasks = [r for r in rows if r["JobID"].startswith(f"{backlog}_")]
        b_row, a_row = _task(rows, small_b.slurm_job_id), _task(rows, small_a.slurm_job_id)
        # Each job carries its team's account; one QOS for all, so only fair share and age can order them.
        assert {r["Account"] for r in tasks} == {a} and (b_row["Account"], a_row["Account"]) == (b, a), rows
        assert len({r["QOS"] for r in rows}) == 1, rows

        b_delay = _at(b_row["Start"]) - _at(b_row["Submit"])
        a_delay = _at(a_row["Start"]) - _at(a_row["Submit"])
        ran = sum(1 for r in tasks if r["State"] == "COMPLETED")
        with capsys.disabled():
            print(f"\nfair share on Slurm {host.version} ({gpus} GPUs): team B's one-photo job started after "
                  f"{b_delay.total_seconds():.0f} s, when {ran} of team A's {backlog_tasks} tasks of {TASK_S} s had "
                  f"run or were running and the rest waited (cancelled then); team A's (baseline) waited behind them "
                  f"and started after {a_delay.total_seconds():.0f} s")
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


def _task(rows: list[dict[str, str]], job_id: str) -> dict[str, str] | None:
    """The one task of a portal job of one photo (array task 0), once sacct has it."""
    return next((r for r in rows if r["JobID"].startswith(f"{job_id}_")), None)


def _ranks(host: sites.Site, *job_ids: str) -> str:
    """What ranks the waiting jobs (sprio: priority, fair-share part) and each account's usage (sshare)."""
    # sprio -j refuses a job id that is not waiting (a task that started): all waiting jobs, these picked.
    prio = [line for line in host.slurm("sprio", "-h", "-o", "%i %a %Y %F %A").splitlines()
            if line.split() and line.split()[0].split("_")[0] in job_ids]
    usage = host.slurm("sshare", "-h", "-P", "-a", "-o", "Account,User,RawUsage,FairShare")
    shares = [line for line in usage.splitlines() if "e2e-fs" in line]
    return f"{datetime.now():%H:%M:%S} sprio: {' / '.join(prio)} sshare: {' / '.join(shares)}"


def _at(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)
