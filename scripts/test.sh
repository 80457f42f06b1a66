#!/usr/bin/env bash
# `make test`: start what the tests need (the real local cluster: munge, MariaDB, slurmdbd,
# slurmctld, slurmd, sshd, Redis), then run every test. A component that does not come up fails
# the run loudly (scripts/cluster/up.sh exits non-zero); no test skips for a missing component.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/cluster/up.sh
# PostgreSQL, the production database: the portal suite runs on it a second time (below), and the
# production-shape test (tests/e2e/test_production_shape.py) uses it.
bash scripts/postgres.sh
# shellcheck source=scripts/cluster/env.sh
. scripts/cluster/env.sh
# Tests use their own Redis database so a running `make up` (database 0) never picks up their jobs.
export REDIS_URL="$FFP_REDIS_BASE/15"
export PYTHONUNBUFFERED=1 DJANGO_SETTINGS_MODULE=portal.settings
mkdir -p artifacts
set +e
.venv/bin/python -m pytest "$@"
rc=$?
# A whole run (no arguments): the portal tests where the database matters run once more on PostgreSQL,
# since SQLite forgives what PostgreSQL refuses (types, locks, ordering): races, migrations, quotas,
# bookings, the API, state changes, the watcher, retention, audit, uploads. The whole portal suite
# passes there too (1,102 tests, 4 min 19 s on this 2-core machine): `make test-postgres`; it is not
# run here to keep CI well under 20 minutes. A run of chosen files runs them once.
if [ $# -eq 0 ]; then
  shopt -s nullglob
  pg_tests=(tests/portal/test_*race*.py tests/portal/test_migrations.py tests/portal/test_quotas*.py
            tests/portal/test_bookings_*.py tests/portal/test_api_*.py tests/portal/test_lifecycle.py
            tests/portal/test_watcher*.py tests/portal/test_retention.py tests/portal/test_audit.py
            tests/portal/test_gallery.py tests/portal/test_big_job.py tests/portal/test_accounting.py
            tests/portal/test_uploads_tus.py tests/portal/test_start_*.py tests/portal/test_webhooks.py)
  DATABASE_URL=$(<"$FFP_STATE/secrets/postgres-url") .venv/bin/python -m pytest "${pg_tests[@]}"
  pg_rc=$?
  [ "$rc" -ne 0 ] || rc=$pg_rc
fi
set -e
# pytest's 5 means "no tests ran": that is a failure here, never a silent pass.
exit $rc
