"""Shared set-up of the portal benches: a throw-away SQLite database, the local cluster profile
(from scripts/cluster/env.sh's variables) and a user. Needs the local cluster up (make up / test)."""
from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def setup(database_url: str | None = None) -> None:
    """`database_url`: a database the bench made for itself (own_postgres); None: a SQLite file."""
    sys.path.insert(0, str(ROOT))
    if database_url is None:
        folder = tempfile.mkdtemp(prefix="ffp-bench-db-")
        atexit.register(shutil.rmtree, folder, True)  # a bench leaves no files behind
        database_url = f"sqlite:///{Path(folder) / 'bench.sqlite3'}"
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    os.environ["SUBMIT_ON_START"] = "false"
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("seed_local", "--demo-password", "bench-pass-123", stdout=open(os.devnull, "w"))


def own_postgres(server_url_file: str = "/var/lib/ffportal/secrets/postgres-url") -> str:
    """A throw-away PostgreSQL database on the server `make up` uses (scripts/postgres.sh), named for
    this process and dropped at exit (connections and all): a bench never writes into make up's
    database. Returns its URL, for setup()."""
    import psycopg

    server = Path(server_url_file).read_text().strip()
    name = f"ffp_bench_{os.getpid()}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')

    def drop() -> None:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    atexit.register(drop)
    return server.rsplit("/", 1)[0] + "/" + name


def storage() -> Path:
    return Path(os.environ.get("FFP_STORAGE", "/srv/ffportal/storage"))


#: the Redis database a bench that runs RQ workers takes for itself (make up uses 0, the test runs 11-15)
BENCH_REDIS_DB = 9


def own_redis(db: int = BENCH_REDIS_DB) -> str:
    """Point REDIS_URL (this process and the workers it starts) at database `db` of the same Redis
    server, and refuse to go on unless that database is empty: a bench never empties or reads a live
    queue. Call before setup(); `release_redis()` empties it again at the end (all of it is the bench's)."""
    import redis

    base = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0").rsplit("/", 1)[0]
    url = f"{base}/{db}"
    keys = redis.Redis.from_url(url).dbsize()
    if keys:
        sys.exit(f"Redis database {db} holds {keys} keys: another run is using it. This bench takes an empty "
                 f"database for its queue and never empties one it did not fill.")
    os.environ["REDIS_URL"] = url
    return url


def release_redis() -> None:
    """Empty the bench's own Redis database (checked empty by own_redis at the start)."""
    import redis

    redis.Redis.from_url(os.environ["REDIS_URL"]).flushdb()


def own_media() -> Path:
    """A throw-away MEDIA_ROOT (call before setup()): sources and thumbnails never land in make up's."""
    media = Path(tempfile.mkdtemp(prefix="ffp-bench-media-"))
    os.environ["MEDIA_ROOT"] = str(media)
    return media
