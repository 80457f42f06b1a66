#!/usr/bin/env bash
# `make test`: start what the tests need (the real local cluster: munge, MariaDB, slurmdbd,
# slurmctld, slurmd, sshd, Redis), then run every test. A component that does not come up fails
# the run loudly (scripts/cluster/up.sh exits non-zero); no test skips for a missing component.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/cluster/up.sh
# shellcheck source=scripts/cluster/env.sh
. scripts/cluster/env.sh
# Tests use their own Redis database so a running `make up` (database 0) never picks up their jobs.
export REDIS_URL="$FFP_REDIS_BASE/15"
export PYTHONUNBUFFERED=1 DJANGO_SETTINGS_MODULE=portal.settings
mkdir -p artifacts
set +e
.venv/bin/python -m pytest "$@"
rc=$?
set -e
# pytest's 5 means "no tests ran": that is a failure here, never a silent pass.
exit $rc
