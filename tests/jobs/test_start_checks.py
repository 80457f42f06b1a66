"""The production checks run where the portal's processes start, not only in `manage.py check`:
the ASGI app, the WSGI app, the watcher and the RQ worker refuse to start with DEBUG off and the
dev SECRET_KEY, `*` in ALLOWED_HOSTS, or cookies over plain HTTP. Real processes, real imports."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: a valid key for the SSH key's encryption at rest, so only the checks under test can refuse
FERNET = "Xh5n0rY9m2c6kZ1bq3Wf8a7Tt4Ls0Vd2Jp9Ue5Gy1HI="
INSECURE = {"DEBUG": "false", "SECRET_KEY": "dev-only-insecure-key", "ALLOWED_HOSTS": "*",
            "FIELD_ENCRYPTION_KEY": FERNET}
GOOD = {"DEBUG": "false", "SECRET_KEY": "x" * 60, "ALLOWED_HOSTS": "portal.example.org",
        "ALLOW_INSECURE_COOKIES": "true", "FIELD_ENCRYPTION_KEY": FERNET}


def run(argv, env_extra, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECRET_KEY", "ALLOWED_HOSTS")}
    env.update(env_extra, DATABASE_URL=f"sqlite:///{tmp_path}/db.sqlite3", DJANGO_SETTINGS_MODULE="portal.settings")
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("argv", [
    [sys.executable, "-c", "import portal.asgi"],
    [sys.executable, "-c", "import portal.wsgi"],
    [sys.executable, "manage.py", "watch_cluster", "--once", "--skip-checks"],
    [sys.executable, "manage.py", "rqworker", "--burst", "default"],
], ids=["asgi", "wsgi", "watcher", "rqworker"])
def test_a_process_refuses_to_start_with_an_insecure_configuration(argv, tmp_path):
    r = run(argv, INSECURE, tmp_path)
    assert r.returncode != 0, r.stdout + r.stderr
    assert "jobs.E001" in r.stderr and "jobs.E003" in r.stderr, r.stderr[-2000:]


def test_the_asgi_app_starts_with_a_production_configuration(tmp_path):
    r = run([sys.executable, "-c", "import portal.asgi; print('ready')"], GOOD, tmp_path)
    assert r.returncode == 0 and "ready" in r.stdout, r.stderr[-2000:]
