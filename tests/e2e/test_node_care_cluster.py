"""Capacity that follows demand, on the REAL Slurm 26.05 cluster (two nodes; scripts/cluster/newer.sh):

- GPU health: Slurm's HealthCheckProgram (deploy/slurm/gpu-health.sh, every 10 s) drains the node
  whose fake GPU is broken, with the fault as the reason; the admin's page, /metrics, the bookable
  GPUs and new tasks all leave it; healed, the check resumes it.
- Power saving: with every node asleep, a job wakes one (the owner reads "starting a cluster
  computer"), runs, and the node sleeps again after SuspendTime idle; a booking's asleep node is
  woken ahead by the warm-up job and is up when the booking starts.

The timelines are printed and kept in artifacts/node-care-timeline.txt.
"""
import time
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

import cluster
from jobs.bookings import inventory, tick
from jobs.clusters import node_states
from jobs.models import Booking, BookingState, GpuType, JobStatus
from jobs.ops.collectors import ClusterGpuCollector
from tests.e2e import sites
from tests.e2e.conftest import SAMPLES, fill, run_rq, watch_until
from tests.e2e.test_end_to_end import start

FINAL = {JobStatus.COMPLETED, JobStatus.PARTIALLY_FAILED, JobStatus.FAILED}
#: HealthCheckInterval on the local clusters, and what one check may take besides
HEALTH_INTERVAL_S = 10
#: SuspendTime on the local clusters (scripts/cluster/lib.sh node_care)
SUSPEND_TIME_S = 60


def timeline(line: str) -> None:
    print(line)
    artifacts = sites.REPO / "artifacts"
    artifacts.mkdir(exist_ok=True)
    with open(artifacts / "node-care-timeline.txt", "a") as f:
        f.write(line + "\n")


def conditions(profile) -> dict[str, dict]:
    return {n["name"]: n for n in node_states.read_nodes(profile)}


def wait_for(what: str, check, timeout: float, every: float = 1.0):
    started = time.monotonic()
    while True:
        value = check()
        if value:
            return time.monotonic() - started
        assert time.monotonic() - started < timeout, f"{what}: not within {timeout:.0f}s"
        time.sleep(every)


def gpus_metric(profile, kind: str, state: str) -> float:
    return {(s.labels["type"], s.labels["state"]): s.value for family in ClusterGpuCollector().collect()
            if family.name == "ffportal_gpus" for s in family.samples if s.labels["cluster"] == profile.slug}[
        (kind, state)]


# On the 26.05 cluster, in the run of the newer clusters' tests (scripts/test.sh): one at a time with
# the others that drain, kill or put its nodes to sleep.
ON_26_05 = pytest.mark.parametrize("site", ["26.05"], indirect=True, ids=sites.site_id)


@ON_26_05
def test_a_broken_gpu_drains_its_node_until_it_is_healed(api, site, folder, redis_queue, monkeypatch):
    profile, (well, sick) = site.profile, site.nodes
    emails = []
    monkeypatch.setattr("jobs.background.enqueue.enqueue_node_email", lambda *args: emails.append(args))
    conditions(profile)  # the reading the change is seen against
    try:
        site.newer_sh("gpu", "2", "1", "temperature=97")
        took = wait_for("the health check drains the node",
                        lambda: conditions(profile)[sick]["condition"] in ("drained", "draining"),
                        timeout=2 * HEALTH_INTERVAL_S + 10)
        node = conditions(profile)[sick]
        timeline(f"Slurm 26.05: GPU 1 of {sick} at 97 C; drained by the health check after {took:.0f} s "
                 f"(HealthCheckInterval {HEALTH_INTERVAL_S} s): {node['reason']!r}")
        assert node["reason"] == "gpu health: GPU 1 too hot (97 C)"
        assert [e[1]["name"] for e in emails] == [sick]  # the admins' email, once
        assert gpus_metric(profile, "a100", "draining") == 2

        admin = Client()
        admin.force_login(User.objects.create_superuser("e2e-health-admin", "h@example.org", "health-pass-123"))
        body = admin.get(reverse("admin:jobs_clusterprofile_gpus")).content.decode()
        assert "taken out of service by the GPU health check: GPU 1 is too hot (97 °C)" in body
        zh = admin.get(reverse("admin:jobs_clusterprofile_gpus"), HTTP_ACCEPT_LANGUAGE="zh-Hans").content.decode()
        assert "已被 GPU 健康检查停用：GPU 1 温度过高（97 °C）" in zh

        # Bookings no longer count its GPUs; new tasks run on the other node.
        assert inventory.refresh_inventory(profile).get("a100", 0) == 0
        fill(folder, {f"p{i}.jpg": SAMPLES / "t1.jpg" for i in range(4)})
        job = start(api, folder, template=site.gpu, name="beside a sick GPU")
        run_rq(redis_queue)
        job = watch_until(job, FINAL)
        assert job.status == JobStatus.COMPLETED, job.error
        assert {t.node for t in job.tasks.all()} == {well}
    finally:
        site.newer_sh("gpu", "2", "1", "ok")
    took = wait_for("the healed node is resumed",
                    lambda: conditions(profile)[sick]["condition"] not in ("drained", "draining"),
                    timeout=2 * HEALTH_INTERVAL_S + 10)
    # Resumed, it answers Slurm again within seconds ("idle*" until its slurmd registers anew).
    answering = wait_for("its GPUs bookable again", lambda: inventory.refresh_inventory(profile).get("a100") == 2,
                         timeout=60)
    timeline(f"Slurm 26.05: GPU healed; {sick} resumed by the health check after {took:.0f} s, "
             f"its GPUs bookable {answering:.0f} s later")


@ON_26_05
def test_asleep_nodes_wake_for_a_job_and_ahead_of_a_booking(api, site, folder, redis_queue):
    profile, nodes = site.profile, site.nodes
    # newer.sh boots a node in 10 s (FFP_NODE_BOOT_SECONDS); slurmctld starts the job about 25 s later
    profile.node_boot_seconds = 35
    profile.save(update_fields=["node_boot_seconds"])
    asleep = lambda name: conditions(profile)[name]["condition"] == "asleep"  # noqa: E731
    name = f"ffp-wake-{uuid.uuid4().hex[:8]}"
    runner = cluster.runner_for(profile)
    try:
        # Every node may sleep (idle ones are powered off after SuspendTime: measured below); both are
        # put to sleep now, as an admin would, rather than waiting for a minute of idleness.
        site.slurm("scontrol", "update", "SuspendExcNodes=")
        site.slurm("scontrol", "power", "down", ",".join(nodes))
        took = wait_for("every node asleep", lambda: all(map(asleep, nodes)), timeout=SUSPEND_TIME_S + 90)
        timeline(f"Slurm 26.05: both nodes powered down by scontrol; asleep after {took:.0f} s")

        # A job while every node sleeps: Slurm wakes one; the owner reads why it waits.
        fill(folder, {"a.jpg": SAMPLES / "t1.jpg", "b.png": SAMPLES / "astronaut.png"})
        submitted = time.monotonic()
        job = start(api, folder, template=site.gpu, name="wakes a node")
        run_rq(redis_queue)
        said = {}

        def look(j):
            for t in j.tasks.all():
                if t.state == "CONFIGURING" and "waking" not in said:
                    said["waking"] = (time.monotonic() - submitted, t.reason, j.status,
                                      api.get(f"/api/v1/jobs/{j.id}").json()["expected_start"])
                if t.state == "RUNNING" and "running" not in said:
                    said["running"] = time.monotonic() - submitted
        job = watch_until(job, FINAL, on_cycle=look)
        ran_on = {t.node for t in job.tasks.all()}
        timeline(f"Slurm 26.05: job submitted with every node asleep; seen waiting for a boot after "
                 f"{said.get('waking', (-1,))[0]:.0f} s ({said.get('waking', ('', '?'))[1]!r}); running after "
                 f"{said.get('running', -1):.0f} s on {','.join(sorted(ran_on))}; {job.status} after "
                 f"{time.monotonic() - submitted:.0f} s")
        assert job.status == JobStatus.COMPLETED, job.error
        assert said["waking"][1] == "starting a cluster computer, about a minute" and said["waking"][2] == "pending"
        assert said["waking"][3], "the expected start includes the boot"

        # Idle again: the woken node sleeps after SuspendTime.
        idle_from = time.monotonic()
        took = wait_for("the woken node sleeps again", lambda: all(map(asleep, ran_on)), timeout=SUSPEND_TIME_S + 60)
        timeline(f"Slurm 26.05: {','.join(sorted(ran_on))} asleep again {took:.0f} s after the job ended "
                 f"(SuspendTime {SUSPEND_TIME_S} s)")
        assert time.monotonic() - idle_from >= SUSPEND_TIME_S - 15

        # A booking on the second node, 110 s ahead (its nodes are woken 95 s ahead: the wake-up time
        # and a minute): woken by the warm-up job, up at its start.
        gpu_type = GpuType.objects.get_or_create(cluster=profile, gres_type="a100",
                                                 defaults=dict(memory_gb=40, compute_capability="8.0"))[0]
        starts = (timezone.now() + timedelta(seconds=110)).replace(microsecond=0)
        made = runner.run(cluster.reservation_create_argv(name, starts, 10, ["ffportal"], [nodes[1]], 1), timeout=30)
        assert made.rc == 0, made.stderr
        booking = Booking.objects.create(
            user=User.objects.get(username="demo"), task_name="wake ahead", gpu_count=1, duration_minutes=10,
            cluster=profile, gpu_type=gpu_type, starts_at=starts, ends_at=starts + timedelta(minutes=10),
            state=BookingState.CONFIRMED, reservation_name=name, reservation_made=True)
        assert asleep(nodes[1])
        woken_at = None
        while timezone.now() < starts:
            tick()
            run_rq(redis_queue)
            booking.refresh_from_db()
            if woken_at is None and booking.wake_asked_at:
                woken_at = booking.wake_asked_at
            time.sleep(2)
        at_start = conditions(profile)[nodes[1]]
        timeline(f"Slurm 26.05: booking at {starts:%H:%M:%S} on {nodes[1]} (asleep); woken at "
                 f"{woken_at:%H:%M:%S} ({(starts - woken_at).total_seconds():.0f} s ahead); at its start the "
                 f"node is {at_start['condition']}")
        assert (starts - woken_at).total_seconds() <= profile.node_boot_seconds + 60 + 5
        assert at_start["condition"] not in ("asleep", "waking", "down"), at_start
        wake_jobs = site.slurm("sacct", "-n", "-X", "-P", "--name=ffportal-wake", "-o", "NodeList,State",
                               "-S", "now-10minutes")
        assert nodes[1] in wake_jobs, wake_jobs
    finally:
        runner.run(cluster.reservation_delete_argv(name), timeout=30)
        site.slurm("scontrol", "update", f"SuspendExcNodes={','.join(nodes)}")
        for node in nodes:  # awake again for the tests that follow
            if conditions(profile)[node]["condition"] == "asleep":
                site.slurm("scontrol", "update", f"nodename={node}", "state=power_up")
        wait_for("both nodes awake", lambda: not any(
            conditions(profile)[n]["condition"] in ("asleep", "waking") for n in nodes), timeout=90)
