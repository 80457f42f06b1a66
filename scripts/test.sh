#!/usr/bin/env bash
# `make test`: start what the tests need (the real local cluster: munge, MariaDB, slurmdbd,
# slurmctld, slurmd, sshd, Redis), then run every test. A component that does not come up fails
# the run loudly (scripts/cluster/up.sh exits non-zero); no test skips for a missing component.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/cluster/up.sh
# PostgreSQL, the production database: every test runs on it (below).
bash scripts/postgres.sh
# shellcheck source=scripts/cluster/env.sh
. scripts/cluster/env.sh
# Tests use their own Redis database so a running `make up` (database 0) never picks up their jobs.
export REDIS_URL="$FFP_REDIS_BASE/15"
export PYTHONUNBUFFERED=1 DJANGO_SETTINGS_MODULE=portal.settings
mkdir -p artifacts
postgres_url=$(<"$FFP_STATE/secrets/postgres-url")
set +e
# Every test runs on PostgreSQL, the production database (docs/deploy.md): the portal, the cluster,
# the worker and the end-to-end suites. FFP_TEST_DATABASE=sqlite runs them on SQLite instead.
if [ "${FFP_TEST_DATABASE:-postgres}" = sqlite ]; then
  .venv/bin/python -m pytest "$@"
else
  DATABASE_URL=$postgres_url .venv/bin/python -m pytest "$@"
fi
rc=$?
# A whole run (no arguments): the portal tests where the database matters run once more on SQLite,
# the database of `make up`'s single-machine demo, whose locks and types differ (IMMEDIATE
# transactions stand in for row locks in the race tests). A run of chosen files runs them once.
if [ $# -eq 0 ]; then
  shopt -s nullglob
  db_tests=(tests/portal/test_*race*.py tests/portal/test_migrations.py tests/portal/test_quotas*.py
            tests/portal/test_bookings_*.py tests/portal/test_api_*.py tests/portal/test_lifecycle.py
            tests/portal/test_watcher*.py tests/portal/test_retention.py tests/portal/test_audit.py
            tests/portal/test_gallery.py tests/portal/test_big_job.py tests/portal/test_accounting.py
            tests/portal/test_uploads_tus.py tests/portal/test_start_*.py tests/portal/test_webhooks.py)
  .venv/bin/python -m pytest "${db_tests[@]}"
  sqlite_rc=$?
  [ "$rc" -ne 0 ] || rc=$sqlite_rc
fi
set -e
# pytest's 5 means "no tests ran": that is a failure here, never a silent pass.
exit $rc
