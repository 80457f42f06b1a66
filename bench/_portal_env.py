"""Shared set-up of the portal benches: a throw-away SQLite database, the local cluster profile
(from scripts/cluster/env.sh's variables) and a user. Needs the local cluster up (make up / test)."""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def setup() -> None:
    sys.path.insert(0, str(ROOT))
    db = Path(tempfile.mkdtemp(prefix="ffp-bench-db-")) / "bench.sqlite3"
    os.environ["DATABASE_URL"] = f"sqlite:///{db}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    os.environ["SUBMIT_ON_START"] = "false"
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("seed_local", "--demo-password", "bench-pass-123", stdout=open(os.devnull, "w"))


def storage() -> Path:
    return Path(os.environ.get("FFP_STORAGE", "/srv/ffportal/storage"))
