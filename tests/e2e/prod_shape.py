"""What the production-shape tests share (tests/e2e/test_production_shape.py): the shape's script,
a job started and followed through nginx over HTTPS, logins, live sockets, the units' processes."""
from __future__ import annotations

import json
import os
import re
import signal
import ssl
import subprocess
import time
from contextlib import ExitStack
from pathlib import Path

import pytest
import requests
from websockets.exceptions import ConnectionClosed

from tests.e2e.conftest import SAMPLES
from tests.e2e.live_socket import LiveSocket


def api(shape) -> requests.Session:
    s = requests.Session()
    s.trust_env = False  # REQUESTS_CA_BUNDLE would win over `verify` (and a proxy over 127.0.0.1)
    s.verify = shape["cert"]  # the self-signed certificate is the only one trusted
    s.headers["Authorization"] = f"Token {shape['token']}"
    return s


REPO = Path(__file__).resolve().parents[2]


PROD_DIR = Path(os.environ.get("FFP_PROD_DIR", "/var/lib/ffportal-prod"))


#: a job of a few photos on the shared local cluster; it ends as soon as it is done
JOB_WAIT_S = 600


#: the shape's processes starting, a socket's first snapshot, a Slurm id: generous on a loaded machine
WAIT_S = 120


FINAL = {"completed", "partially_failed", "failed", "cancelled"}


def prod_shape(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(REPO / "scripts/prod-shape.sh"), *args], capture_output=True, text=True,
                          timeout=timeout)


def start_job(shape, folder: Path, template: str = "cpu-small", name: str = "prod shape") -> str:
    with open(SAMPLES / "Tom_Hanks_54745.png", "rb") as face:
        r = api(shape).post(f"{shape['https']}/api/v1/jobs", files={"source": face},
                            data={"template": template, "target_folder": str(folder), "consent": "true",
                                  "name": name}, timeout=60)
    assert r.status_code == 201, r.text
    return r.json()["id"]


def job_of(shape, job_id: str, session: requests.Session | None = None) -> dict:
    r = (session or api(shape)).get(f"{shape['https']}/api/v1/jobs/{job_id}", timeout=30)
    assert r.status_code == 200, (r.status_code, r.text[:500])
    return r.json()


def wait_job(shape, job_id: str, until, timeout: float = JOB_WAIT_S) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        job = job_of(shape, job_id)
        if until(job):
            return job
        if time.monotonic() > deadline:
            pytest.fail(f"job {job_id} still {job['status']} after {timeout}s: {job.get('error')}\n{tails(shape)}",
                        pytrace=False)
        time.sleep(1)


def tails(shape) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-1500:]}" for p in sorted(Path(shape["logs"]).glob("*.log")))


def login(shape) -> str:
    """The session cookie of the demo user, logged in through nginx with the login form."""
    s = requests.Session()
    s.trust_env = False
    s.verify = shape["cert"]
    url = f"{shape['https']}/login/"
    s.get(url, timeout=30).raise_for_status()
    r = s.post(url, data={"username": "demo", "password": shape["demo_password"],
                          "csrfmiddlewaretoken": s.cookies["csrftoken"]},
               headers={"Origin": shape["https"], "Referer": url}, allow_redirects=False, timeout=30)
    assert r.status_code == 302, (r.status_code, r.text[:500])
    return s.cookies["sessionid"]


def socket(shape, session_id: str, pages: ExitStack):
    """A live-events socket (the job list) through nginx, over TLS, as a logged-in page opens it;
    its first message, the snapshot, already read. Closed when `pages` closes."""
    ctx = ssl.create_default_context(cafile=shape["cert"])
    try:
        # One thread per TLS connection (tests/e2e/live_socket.py: websockets' sync client lost a
        # handshake now and then over TLS 1.3, by reading and writing from two threads at once).
        ws = pages.enter_context(LiveSocket(shape["https"].replace("https://", "wss://") + "/ws/jobs/", ssl=ctx,
                                            origin=shape["https"], open_timeout=30,
                                            headers={"Cookie": f"sessionid={session_id}"}))
    except TimeoutError:
        pytest.fail(f"a WebSocket handshake through nginx got no answer in 30 s\n{stacks(shape)}", pytrace=False)
    first = json.loads(ws.recv(timeout=WAIT_S))
    assert first["type"] == "snapshot", first
    return ws


def stacks(shape) -> str:
    """Every ASGI process's thread stacks (SIGUSR1: faulthandler, portal/server.py), the sockets
    nginx holds to them, and the logs: what a server that stopped answering was waiting on."""
    for port in shape["asgi_ports"]:
        try:
            os.kill(pid_of(shape, f"ffportal-asgi@{port}"), signal.SIGUSR1)
        except (OSError, ValueError):
            pass
    time.sleep(2)
    ss = subprocess.run(["ss", "-tnpi", "( " + " or ".join(f"sport = :{p} or dport = :{p}" for p in shape["asgi_ports"])
                         + " )"], capture_output=True, text=True).stdout
    nginx_logs = Path(shape["access_log"]).parent
    nginx = "".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}\n" for p in sorted(nginx_logs.glob("*.log")))
    logs = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-12000:]}"
                      for p in sorted(Path(shape["logs"]).glob("ffportal-asgi@*.log")))
    return f"--- ss\n{ss}\n{nginx}{logs}"


def saw_job(ws, job_id: str, timeout: float) -> bool:
    """Whether `ws` brings a message naming `job_id` within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            text = ws.recv(timeout=max(0.1, deadline - time.monotonic()))
        except TimeoutError:
            return False
        if job_id in text:
            return True
    return False


def sample(text: str, name: str) -> float:
    """The value of the Prometheus sample `name` (with its labels, as written) in `text`; 0 if absent."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


def access_log(shape) -> list[str]:
    return Path(shape["access_log"]).read_text(errors="replace").splitlines()


def pid_of(shape, unit: str) -> int:
    return int((Path(shape["run"]) / f"{unit}.pid").read_text())


def unit_command(shape, unit_file: str, instance: str) -> list[str]:
    text = (Path(shape["units"]) / unit_file).read_text()
    line = re.search(r"^ExecStart=(.+)$", text, re.M)[1]
    return line.replace(shape["unit_prefix"], shape["repo"]).replace("%i", instance).split()


def postgres_connections(pid: int) -> int:
    """How many TCP connections to PostgreSQL (port 5432) the process holds: its socket inodes
    matched against the kernel's connection tables."""
    fd_dir = Path("/proc") / str(pid) / "fd"
    inodes = set()
    for fd in fd_dir.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("tcp", "tcp6"):
        for line in (Path("/proc") / str(pid) / "net" / table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[2].endswith(":1538") and fields[3] == "01" and fields[9] in inodes:  # 0x1538 = 5432, ESTABLISHED
                count += 1
    return count


def survive(shape, job_id: str, session_id: str, sockets: list, pages: ExitStack) -> None:
    """With one ASGI process killed: the sockets it held close and reconnect (live.js does the
    same) through nginx to the other process; requests go on answering; the job completes."""
    reconnected = 0
    for i, ws in enumerate(sockets):
        try:
            snapshot_of(ws)
        except (ConnectionClosed, TimeoutError, OSError):
            sockets[i] = socket(shape, session_id, pages)
            reconnected += 1
    assert 0 < reconnected < len(sockets)

    s = api(shape)
    for _ in range(20):  # nginx skips the dead process: no 502 for anyone
        assert s.get(f"{shape['https']}/api/v1/jobs/{job_id}", timeout=30).status_code == 200
    job = wait_job(shape, job_id, lambda j: j["status"] in FINAL)
    assert job["status"] == "completed", (job["status"], job.get("error"))
    assert job["slurm_job_id"]
    for ws in sockets:
        jobs = snapshot_of(ws)["jobs"]
        assert any(j["id"] == job_id and j["status"] == "completed" for j in jobs), jobs


def snapshot_of(ws, timeout: float = 10) -> dict:
    """A fresh snapshot (a page's `resync`), skipping live events that come first."""
    ws.send(json.dumps({"type": "resync"}))
    deadline = time.monotonic() + timeout
    while True:
        message = json.loads(ws.recv(timeout=max(0.1, deadline - time.monotonic())))
        if message.get("type") == "snapshot":
            return message

