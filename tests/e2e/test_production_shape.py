"""The production shape, for real, on this machine (scripts/prod-shape.sh, docs/deploy.md): nginx with
a self-signed certificate in front of TWO ASGI processes, TWO RQ workers and the watcher, all as the
service user with the systemd units' command lines, on PostgreSQL and the password-protected Redis,
submitting to the real local cluster. Everything below goes through nginx over HTTPS, as a browser
or an API client would; nothing calls the portal's Python directly.

- the processes are the units' command lines, as the service user, with the units' umask;
- a job started through the API completes on the cluster; its output comes from nginx (the portal
  answered X-Accel-Redirect), ranges too; WebSockets through nginx, on both ASGI processes, see it;
- jobs started at the same moment each reach Slurm once, although two RQ workers take them;
- killing one ASGI process loses no job and no request, and its sockets reconnect to the other.

The shape is started once for the whole module (about a minute); the helpers are in prod_shape.py.
"""
from __future__ import annotations

import functools
import json
import os
import re
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import pytest
import requests

from tests.e2e.conftest import SAMPLES, fill
from tests.e2e.prod_shape import (
    FINAL,
    PROD_DIR,
    REPO,
    WAIT_S,
    access_log,
    api,
    login,
    pid_of,
    postgres_connections,
    prod_shape,
    sample,
    saw_job,
    socket,
    start_job,
    survive,
    tails,
    unit_command,
    wait_job,
)


@pytest.fixture(scope="module")
def shape():
    r = prod_shape("up")
    if r.returncode != 0:
        logs = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}"
                         for p in sorted((PROD_DIR / "var/log").glob("*.log")))
        prod_shape("down")
        pytest.fail(f"scripts/prod-shape.sh up failed:\n{r.stdout}\n{r.stderr}\n{logs}", pytrace=False)
    info = json.loads((PROD_DIR / "info.json").read_text())
    try:
        yield info
    finally:
        prod_shape("down")



def test_the_processes_are_the_units_command_lines_as_the_service_user(shape):
    import pwd

    web = pwd.getpwnam(os.environ.get("FFP_WEB_USER", "ffpweb"))
    processes = {"ffportal-asgi@8101": ("ffportal-asgi@.service", "8101"),
                 "ffportal-asgi@8102": ("ffportal-asgi@.service", "8102"),
                 "ffportal-rq@1": ("ffportal-rq@.service", "1"), "ffportal-rq@2": ("ffportal-rq@.service", "2"),
                 "ffportal-watcher": ("ffportal-watcher.service", "")}
    for name, (unit_file, instance) in processes.items():
        proc = Path("/proc") / str(pid_of(shape, name))
        argv = (proc / "cmdline").read_bytes().rstrip(b"\0").decode().split("\0")
        status = (proc / "status").read_text()
        assert argv == unit_command(shape, unit_file, instance), (name, argv)
        assert re.search(rf"^Uid:\s+{web.pw_uid}\s+{web.pw_uid}\s+{web.pw_uid}\s+{web.pw_uid}$", status, re.M), name
        assert re.search(r"^Umask:\s+0077$", status, re.M), name
        environ = dict(v.split("=", 1) for v in (proc / "environ").read_bytes().decode().split("\0") if "=" in v)
        assert environ["DEBUG"] == "false" and environ["DATABASE_URL"].startswith("postgres://"), name
        assert environ["SENDFILE_BACKEND"] == "django_sendfile.backends.nginx", name
        # nginx on this machine is the one proxy whose X-Forwarded-For/-Proto count (docs/security.md)
        assert environ["FFP_TRUSTED_PROXIES"] == "127.0.0.1", name
        assert re.match(r"redis://[^:]+-service:", environ["REDIS_URL"]), name
    # ffportal-metrics-reset.service ran before them: every metrics file is one of these processes'
    # (files of an earlier run's processes, with their pids, would be added to today's figures).
    files = list(Path(environ["PROMETHEUS_MULTIPROC_DIR"]).iterdir())
    owners = {int(m[1]) for f in files if (m := re.search(r"_(\d+)\.db$", f.name))}
    assert files and owners <= {pid_of(shape, name) for name in processes}, (owners, [f.name for f in files])


def test_redis_permissions_are_the_ones_the_deploy_guide_gives():
    """The shape's processes run with a server's Redis permissions (docs/deploy.md, step 7), so a
    command the portal needs and the guide forbids fails here first (an RQ worker once died at
    start on a fresh server for want of `client|list`)."""
    guide = re.search(r'"user ffportal on >\$rp (~\* &\* [^"]+)"', (REPO / "docs/deploy.md").read_text())
    conf = re.search(r"^user @USER@-service on >@PASSWORD@ (.+)$", (REPO / "deploy/redis/redis.conf.in").read_text(), re.M)
    assert guide and conf and guide[1] == conf[1], (guide and guide[1], conf and conf[1])


def test_each_process_keeps_at_most_its_pool_of_database_connections(shape):
    """DATABASE_POOL_MAX (deploy/env.example): without the pool an ASGI process kept a connection
    for every thread that ever used the database (10 to 11 each on a fresh server), and PostgreSQL
    refuses connections past max_connections. A burst of requests on both processes at once."""
    env = dict(line.split("=", 1) for line in (REPO / "deploy/env.example").read_text().splitlines()
               if line and not line.startswith("#"))
    limit = int(env["DATABASE_POOL_MAX"])

    def one(i: int) -> int:
        return api(shape).get(f"{shape['https']}/api/v1/jobs?page={1 + i % 3}", timeout=60).status_code

    with ThreadPoolExecutor(32) as pool:
        codes = list(pool.map(one, range(160)))
    assert codes.count(200) == len(codes), sorted(set(codes))
    held = {unit: postgres_connections(pid_of(shape, unit))
            for unit in [f"ffportal-asgi@{port}" for port in shape["asgi_ports"]] + ["ffportal-watcher"]}
    assert all(1 <= n <= limit for n in held.values()), (held, limit)


def test_plain_http_is_sent_to_https(shape):
    r = requests.get(f"{shape['http']}/jobs/?page=2", allow_redirects=False, timeout=30)
    assert r.status_code == 301
    assert r.headers["Location"] == f"{shape['https']}/jobs/?page=2"


def test_a_job_over_https_completes_and_its_output_comes_from_nginx(shape, folder):
    fill(folder, {"a.jpg": SAMPLES / "t1.jpg", "b.png": SAMPLES / "astronaut.png"})
    session_id = login(shape)
    log_start = len(access_log(shape))
    with ExitStack() as pages:
        sockets = [socket(shape, session_id, pages) for _ in range(4)]
        job_id = start_job(shape, folder)
        job = wait_job(shape, job_id, lambda j: j["status"] in FINAL)
        assert job["status"] == "completed", (job["status"], job.get("error"))
        assert job["slurm_job_id"]
        # Every socket heard of the job, whichever ASGI process holds it: the watcher's events
        # reach both processes through the Redis channel layer.
        for ws in sockets:
            assert saw_job(ws, job_id, timeout=WAIT_S)
    # nginx logs a socket once it has closed: wait for the lines of all of them, not a fixed second
    deadline = time.monotonic() + WAIT_S
    while len(ws_lines := [line for line in access_log(shape)[log_start:] if '"GET /ws/jobs/' in line]) < len(sockets):
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    served_by = {m[1] for line in ws_lines for m in [re.search(r"up=127\.0\.0\.1:(\d+)", line)] if m}
    assert served_by == {str(p) for p in shape["asgi_ports"]}, ws_lines

    # The output: the portal checks the token, then nginx sends the bytes (X-Accel-Redirect).
    s = api(shape)
    url = f"{shape['https']}/api/v1/jobs/{job_id}/outputs/0?download=1"
    r = s.get(url, timeout=60)
    assert r.status_code == 200, r.text[:300]
    assert r.headers.get("X-Ffportal-Sent-By") == "nginx" and "X-Accel-Redirect" not in r.headers
    assert r.headers["Content-Disposition"].startswith("attachment")
    assert "sandbox" in r.headers["Content-Security-Policy"]
    on_disk = [p.read_bytes() for p in Path(shape["media"]).rglob("*") if p.is_file() and "outputs" in p.parts]
    assert r.content in on_disk and len(r.content) > 1000
    part = s.get(url, headers={"Range": "bytes=0-99"}, timeout=60)
    assert part.status_code == 206 and part.content == r.content[:100]
    mine = [line for line in access_log(shape) if f"/api/v1/jobs/{job_id}/outputs/0" in line]
    assert mine and all("sent_by=nginx" in line for line in mine), mine
    # The web processes answered those downloads cleanly (a header promising bytes the empty
    # X-Accel answer lacks makes uvicorn log an error and drop the connection).
    for log in Path(shape["logs"]).glob("ffportal-asgi@*.log"):
        assert "Exception in ASGI application" not in log.read_text(errors="replace"), log.name
    # Without the token nginx sends nothing: the check is the portal's, before any byte.
    assert requests.get(url, verify=shape["cert"], timeout=30).status_code in (401, 403)

    # What a monitor sees through nginx: alive, ready, and the job and the watcher counted by all
    # the processes together (prometheus multi-process mode).
    get = functools.partial(requests.get, verify=shape["cert"], timeout=30)
    assert get(f"{shape['https']}/healthz").status_code == 200
    ready = get(f"{shape['https']}/readyz")
    assert ready.status_code == 200, ready.text
    assert get(f"{shape['https']}/metrics").status_code in (401, 403)
    metrics = get(f"{shape['https']}/metrics", headers={"Authorization": f"Bearer {shape['metrics_token']}"})
    assert metrics.status_code == 200
    assert sample(metrics.text, 'ffportal_jobs{state="completed"}') >= 1
    assert sample(metrics.text, "ffportal_submit_latency_seconds_count") >= 1
    assert sample(metrics.text, "ffportal_watcher_cycle_seconds_count") > 0


def test_two_rq_workers_never_submit_one_job_twice(shape, folder):
    fill(folder, {"a.jpg": SAMPLES / "t1.jpg"})
    began = time.monotonic()
    with ThreadPoolExecutor(max_workers=6) as pool:
        job_ids = list(pool.map(lambda n: start_job(shape, folder, name=f"at once {n}"), range(6)))
    try:
        jobs = [wait_job(shape, j, lambda job: bool(job["slurm_job_id"]) or job["status"] in FINAL, timeout=WAIT_S * 3)
                for j in job_ids]
        # A figure for docs/deploy.md ("Scale"), never asserted.
        print(f"six Starts at once, two RQ workers: every Slurm id within {time.monotonic() - began:.1f} s")
        slurm_ids = [j["slurm_job_id"] for j in jobs]
        assert all(slurm_ids) and len(set(slurm_ids)) == len(job_ids), [(j["status"], j.get("error")) for j in jobs]
        # Slurm's own accounting: one job (one array) per portal job, named after it.
        for job_id, slurm_id in zip(job_ids, slurm_ids):
            deadline = time.monotonic() + WAIT_S
            while True:
                out = subprocess.run(["sacct", "-X", "-n", "-P", "-S", "now-1hours", f"--name=ffp-{job_id}", "-o",
                                      "JobID"], capture_output=True, text=True, timeout=60).stdout.split()
                if out or time.monotonic() > deadline:
                    break
                time.sleep(1)
            assert {line.split("_")[0] for line in out} == {slurm_id.split("_")[0]}, (job_id, out)
        for pid in (pid_of(shape, "ffportal-rq@1"), pid_of(shape, "ffportal-rq@2")):
            os.kill(pid, 0)  # both workers still there: the jobs were shared out, not left to one
    finally:
        s = api(shape)
        for job_id in job_ids:
            s.post(f"{shape['https']}/api/v1/jobs/{job_id}/cancel", timeout=60)


def test_killing_one_asgi_process_loses_no_job_and_sockets_reconnect(shape, folder):
    fill(folder, {"a.jpg": SAMPLES / "t1.jpg", "b.png": SAMPLES / "astronaut.png"})
    session_id = login(shape)
    victim = f"ffportal-asgi@{shape['asgi_ports'][0]}"
    with ExitStack() as pages:
        sockets = [socket(shape, session_id, pages) for _ in range(6)]
        job_id = start_job(shape, folder, name="survives a dying web process")
        os.kill(pid_of(shape, victim), signal.SIGKILL)
        try:
            survive(shape, job_id, session_id, sockets, pages)
        finally:
            # systemd's Restart=always, by hand: the process comes back and serves again.
            r = prod_shape("start", "ffportal-asgi@.service", str(shape["asgi_ports"][0]))
            assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            if requests.get(f"http://127.0.0.1:{shape['asgi_ports'][0]}/login/", timeout=5).status_code == 200:
                break
        except requests.ConnectionError:
            time.sleep(0.5)
    else:
        pytest.fail(f"{victim} did not come back:\n{tails(shape)}", pytrace=False)
