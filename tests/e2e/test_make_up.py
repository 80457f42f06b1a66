"""`make up` as a user starts it (scripts/up.sh), checked from outside like an attacker on this machine.

One real run: the cluster, Redis and the three portal processes, a real job through the API on
the real cluster, then Ctrl-C. It checks what the hardening promises:
- the web server (all its processes: FFP_WEB_PROCESSES, each serving WebSockets), the RQ worker
  and the watcher run as the service user, never as root;
- DEBUG is off (a 404 lists no URLs), a Content-Security-Policy is on the pages, static files are
  served (WhiteNoise), the secret key was generated (never the dev key);
- Redis refuses a client without the password;
- every file and folder the portal wrote (its state folder, the job's folder on the cluster, the
  demo teams' folders) is its user's alone: folders 700, files 600.
"""
from __future__ import annotations

import http.cookiejar
import json
import os
import pwd
import re
import signal
import stat
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from contextlib import ExitStack
from pathlib import Path

import pytest
from websockets.sync.client import connect as ws_connect

from tests.e2e.conftest import SAMPLES, STORAGE
from tests.e2e.test_web_processes import SOCKETS, client_sockets, workers

REPO = Path(__file__).resolve().parents[2]
PORT = 8765
WORK = Path(os.environ.get("FFP_WORK", "/srv/ffportal/work"))
STARTUP_S = 240
JOB_S = 300
#: the web server's processes (FFP_WEB_PROCESSES)
WEB_PROCESSES = 2


def get(url, headers=None, data=None, method=None):
    request = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, r.headers, r.read()  # headers: case-insensitive
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def multipart(fields: dict, files: dict) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    parts = []
    for name, value in fields.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode())
    for name, path in files.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{path.name}"\r\n'
                     f"Content-Type: application/octet-stream\r\n\r\n".encode() + path.read_bytes() + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def processes_of(var: Path) -> dict[int, tuple[int, str]]:
    """{pid: (uid, command line)} of every process whose environment names this state folder."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            if f"PORTAL_VAR={var}".encode() not in environ:
                continue
            uid = int(next(line.split()[1] for line in (entry / "status").read_text().splitlines()
                           if line.startswith("Uid:")))
            found[int(entry.name)] = (uid, (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except (OSError, StopIteration):
            continue
    return found


def not_private(root: Path, owner: str) -> list[str]:
    """Everything under `root` that is not owner-only (folders 700, files 600) or not `owner`'s."""
    uid = pwd.getpwnam(owner).pw_uid
    bad = []
    for path in [root, *root.rglob("*")]:
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode):
            continue
        want = 0o700 if stat.S_ISDIR(st.st_mode) else 0o600
        if stat.S_IMODE(st.st_mode) & ~want or st.st_uid != uid:
            bad.append(f"{oct(stat.S_IMODE(st.st_mode))} uid {st.st_uid} {path}")
    return bad


@pytest.mark.slow
def test_make_up_runs_the_portal_as_its_own_user_with_private_files(tmp_path):
    var = Path("/var/tmp") / f"ffp-make-up-{uuid.uuid4().hex[:8]}"  # reachable by the service user
    log = tmp_path / "make-up.log"
    env = {**os.environ, "PORT": str(PORT), "PORTAL_VAR": str(var), "FFP_WEB_PROCESSES": str(WEB_PROCESSES)}
    for name in ("DEBUG", "SECRET_KEY", "DATABASE_URL", "MEDIA_ROOT", "STATIC_ROOT", "REDIS_URL", "ALLOWED_HOSTS"):
        env.pop(name, None)  # what the test run itself uses must not leak into make up
    # SIGINT as a terminal leaves it: a test run started in the background (`cmd &` in a script)
    # inherits SIGINT ignored, and bash cannot trap a signal ignored on entry (seen: up.sh went on
    # running after the "Ctrl-C" below).
    up = subprocess.Popen(["bash", "scripts/up.sh"], cwd=REPO, env=env, stdout=log.open("wb"),
                          stderr=subprocess.STDOUT, start_new_session=True,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    base = f"http://127.0.0.1:{PORT}"
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            assert up.poll() is None, "make up exited:\n" + log.read_text()[-4000:]
            assert time.monotonic() < deadline, "make up not serving:\n" + log.read_text()[-4000:]
            try:
                if get(f"{base}/login/")[0] == 200 and "Press Ctrl-C" in log.read_text():
                    break
            except OSError:
                pass
            time.sleep(1)

        # The three processes, and no other process of this portal, run as the service user.
        web_uid = pwd.getpwnam(env.get("FFP_WEB_USER", "ffpweb")).pw_uid
        procs = processes_of(var)
        commands = " | ".join(cmd for _uid, cmd in procs.values())
        for needle in ("portal.server", "rqworker", "watch_cluster"):
            assert needle in commands, commands
        assert web_uid != 0 and {uid for uid, cmd in procs.values() if "manage.py" in cmd or "portal.server" in cmd} \
            == {web_uid}, procs
        # The web server serves from FFP_WEB_PROCESSES processes, its children: the service user's too.
        web_pid = next(pid for pid, (_uid, cmd) in procs.items() if "portal.server" in cmd)
        deadline = time.monotonic() + STARTUP_S
        while len(serving := workers(web_pid)) < WEB_PROCESSES:
            assert time.monotonic() < deadline, f"web server processes: {serving}"
            time.sleep(1)
        assert len(serving) == WEB_PROCESSES and {processes_of(var)[pid][0] for pid in serving} == {web_uid}

        # DEBUG off, a policy on the pages, static files served, a generated key.
        status, headers, body = get(f"{base}/no-such-page/")
        assert status == 404 and b"URLconf" not in body and b"Traceback" not in body
        status, headers, _ = get(f"{base}/login/")
        assert "script-src 'self'" in (headers.get("Content-Security-Policy") or "")
        assert get(f"{base}/static/css/portal.css")[0] == 200
        secrets = (var / "secrets" / "portal.env").read_text()
        assert "SECRET_KEY=" in secrets and "dev-only-insecure-key" not in secrets

        # The demo user logs in through the login page (a cookie jar, as a browser over plain HTTP).
        jar = http.cookiejar.CookieJar()
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        page = browser.open(f"{base}/login/", timeout=30).read()
        csrf = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1).decode()
        form = urllib.parse.urlencode({"csrfmiddlewaretoken": csrf, "username": "demo",
                                       "password": (var / "demo-password").read_text().strip()}).encode()
        landed = browser.open(urllib.request.Request(f"{base}/login/", data=form, headers={"Referer": f"{base}/login/"}),
                              timeout=30)
        assert landed.status == 200 and landed.geturl() == f"{base}/", landed.geturl()

        # Live pages' WebSockets, logged in: every web server process takes some, and answers them.
        session = next(c.value for c in jar if c.name == "sessionid")
        with ExitStack() as pages:
            for _ in range(SOCKETS):
                ws = pages.enter_context(ws_connect(f"ws://127.0.0.1:{PORT}/ws/jobs/", origin=base, open_timeout=60,
                                                    additional_headers={"Cookie": f"sessionid={session}"}))
                assert json.loads(ws.recv(timeout=60))["type"] == "snapshot"
            held = {pid: client_sockets(PORT, pid) for pid in serving}
            assert sum(held.values()) == SOCKETS and all(held.values()), held

        # Redis: nobody without the password.
        anonymous = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", os.environ.get("FFP_REDIS_PORT", "6379"),
                                    "ping"], capture_output=True, text=True, timeout=30)
        assert "PONG" not in anonymous.stdout and "NOAUTH" in anonymous.stdout + anonymous.stderr

        # A real job through the API, with a token made as the service user.
        token = subprocess.run(
            ["setpriv", f"--reuid={web_uid}", f"--regid={web_uid}", "--init-groups", "--", "bash", "-c",
             f"set -a; . {var}/secrets/portal.env; exec .venv/bin/python manage.py create_api_token demo"],
            cwd=REPO, capture_output=True, text=True, timeout=120,
            env={**env, "DEBUG": "false", "ALLOWED_HOSTS": "127.0.0.1", "DATABASE_URL": f"sqlite:///{var}/portal.sqlite3",
                 "ALLOW_INSECURE_COOKIES": "true", "HOME": str(var)})
        assert token.returncode == 0, token.stderr
        key = token.stdout.strip().splitlines()[-1]
        body, content_type = multipart({"template": "cpu-small", "consent": "true",
                                        "target_folder": str(SAMPLES)}, {"source": SAMPLES / "t1.jpg"})
        status, _, answer = get(f"{base}/api/v1/jobs", {"Authorization": f"Token {key}", "Content-Type": content_type},
                                data=body, method="POST")
        assert status == 201, answer[:2000]
        job_id = json.loads(answer)["id"]
        deadline = time.monotonic() + JOB_S
        while True:
            job = json.loads(get(f"{base}/api/v1/jobs/{job_id}", {"Authorization": f"Token {key}"})[2])
            if job["status"] in ("completed", "partially_failed", "failed", "cancelled", "lost"):
                break
            assert time.monotonic() < deadline, job
            time.sleep(2)
        assert job["status"] == "completed" and job["outputs"], job

        # Everything the portal wrote is private to its user: here, and on the cluster (the job's
        # folder, under its team's in the work root; the demo teams' folders seed_local made).
        assert not_private(var, pwd.getpwuid(web_uid).pw_name) == []
        service_user = os.environ.get("FFP_SSH_USER", "ffportal")
        assert job["team"], job  # the demo account is in two teams: its jobs run for one
        assert not_private(WORK / "teams" / job["team"] / "jobs" / job_id, service_user) == []
        assert not_private(STORAGE / "teams", service_user) == []
        assert {p.name for p in (STORAGE / "teams" / "vfx").iterdir()} >= {"t1.jpg", "astronaut.png"}
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGINT)  # Ctrl-C
            try:
                up.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(up.pid, signal.SIGKILL)
        leftover = processes_of(var)
        for pid in leftover:
            os.kill(pid, signal.SIGKILL)
        subprocess.run(["rm", "-rf", str(var)], check=False)
    assert not leftover, f"make up left processes behind after Ctrl-C: {leftover}"
