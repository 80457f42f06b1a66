#!/usr/bin/env bash
# `make test`: start what the tests need (the real local clusters: munge, MariaDB, slurmdbd,
# slurmctld, slurmd, sshd, Redis; Slurm 22.05 on this host, 24.11 and 26.05 beside it), then run
# every test. A component that does not come up fails
# the run loudly (scripts/cluster/up.sh exits non-zero); no test skips for a missing component.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/cluster/up.sh
# The newer Slurm clusters (24.11 and 26.05, two nodes each, in Debian roots: about a minute the
# first time, seconds after), started beside the rest; the contract suite's third run waits for them.
mkdir -p artifacts
newer_log=artifacts/newer-clusters.log newer_rc=artifacts/newer-clusters.rc image_rc=artifacts/worker-image.rc
rm -f "$newer_rc" "$image_rc"
(
  bash scripts/cluster/newer.sh 24.11 up & a=$!
  bash scripts/cluster/newer.sh 26.05 up & b=$!
  wait "$a" && wait "$b"
  up=$?
  echo "$up" >"$newer_rc"
  # Then the worker's container image, on 26.05 (its Debian has Apptainer): about two minutes the
  # first time, while the contract suite's other tests already run there.
  if [ "$up" = 0 ]; then bash scripts/cluster/worker-image.sh; echo $? >"$image_rc"; else echo 1 >"$image_rc"; fi
) >"$newer_log" 2>&1 &
# The portal's service user (its processes in test_make_up and the production shape run as it).
bash scripts/web-user.sh
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
pytest() { .venv/bin/python -m pytest "$@"; }
# Every test runs on PostgreSQL, the production database (docs/deploy.md): the portal, the cluster,
# the worker and the end-to-end suites. FFP_TEST_DATABASE=sqlite runs them on SQLite instead.
main_pytest() {
  if [ "${FFP_TEST_DATABASE:-postgres}" = sqlite ]; then
    pytest "$@"
  else
    DATABASE_URL=$postgres_url pytest "$@"
  fi
}
# newer_up / image_up: wait until both newer clusters are up (or failed to come up), and the worker's
# container image is built (or failed), from any subshell.
newer_up() {
  while [ ! -s "$newer_rc" ]; do sleep 1; done
  [ "$(<"$newer_rc")" = 0 ]
}
image_up() {
  while [ ! -s "$image_rc" ]; do sleep 1; done
  cat "$newer_log"
  [ "$(<"$image_rc")" = 0 ]
}
if [ $# -gt 0 ]; then
  # Chosen files: run once, as asked (with every cluster up: a contract test may run on any).
  image_up || { echo "a newer Slurm cluster or the worker's image did not come up ($newer_log)" >&2; exit 1; }
  main_pytest "$@"
  rc=$?
else
  # A whole run, in two pytest processes side by side. Most of the end-to-end and cluster suites'
  # time is waiting for Slurm, sshd and the browser, so the suites that need no Slurm job (portal,
  # worker) run meanwhile, with a Redis server and a test database of their own; their output
  # follows this one's. The side run then runs the portal tests where the database matters once
  # more on SQLite, the database of `make up`'s demo, whose locks and types differ (IMMEDIATE
  # transactions stand in for row locks in the race tests).
  shopt -s nullglob
  db_tests=(tests/jobs/test_*race*.py tests/jobs/test_migrations.py tests/jobs/test_quotas*.py
            tests/jobs/test_bookings_*.py tests/jobs/test_api_*.py tests/jobs/test_lifecycle.py
            tests/jobs/test_watcher*.py tests/jobs/test_retention.py tests/jobs/test_audit.py
            tests/jobs/test_gallery.py tests/jobs/test_big_job.py tests/jobs/test_accounting.py
            tests/jobs/test_uploads_tus.py tests/jobs/test_start_*.py tests/jobs/test_webhooks.py)
  side_log=artifacts/test-side-run.log
  # The side run has a Redis SERVER of its own, not only a database: the main run's fault tests stop
  # and restart the cluster's Redis (tests/e2e/test_faults.py), and a side test using it at that
  # moment failed with "Connection closed by server" (a CI run). Same configuration and login.
  side_redis=$(mktemp -d /tmp/ffp-side-redis.XXXXXX)
  chown redis:redis "$side_redis"
  chmod 700 "$side_redis"
  side_port=$(.venv/bin/python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  stop_side_redis() {
    if [ -s "$side_redis/redis.pid" ]; then kill "$(<"$side_redis/redis.pid")" 2>/dev/null || true; fi
    for _ in $(seq 1 50); do [ -e "$side_redis/redis.pid" ] || break; sleep 0.1; done
    rm -rf "$side_redis"
  }
  trap stop_side_redis EXIT
  runuser -u redis -- redis-server "$FFP_STATE/redis/redis.conf" --port "$side_port" --dir "$side_redis" \
    --pidfile "$side_redis/redis.pid" --logfile "$side_redis/redis.log" --save "" || {
    echo "the side run's Redis did not start (log: $side_redis/redis.log)" >&2; exit 1; }
  side_redis_base="redis://$FFP_REDIS_USER:$(<"$FFP_REDIS_PASSWORD_FILE")@127.0.0.1:$side_port"
  side_redis_up() { [ "$(REDISCLI_AUTH=$(<"$FFP_REDIS_PASSWORD_FILE") redis-cli --no-auth-warning \
    --user "$FFP_REDIS_USER" -p "$side_port" ping 2>/dev/null)" = PONG ]; }
  for _ in $(seq 1 100); do side_redis_up && break; sleep 0.1; done
  side_redis_up || { echo "the side run's Redis does not answer on port $side_port (log: $side_redis/redis.log)" >&2; exit 1; }
  (
    export REDIS_URL="$side_redis_base/13"
    # SQLite's test database is a file per process already; PostgreSQL's needs a name of its own.
    [ "${FFP_TEST_DATABASE:-postgres}" = sqlite ] || export TEST_DATABASE_NAME=test_ffportal_side
    main_pytest tests/jobs tests/portal tests/worker tests/test_architecture.py --durations=15
    side_rc=$?
    unset TEST_DATABASE_NAME
    pytest "${db_tests[@]}"
    sqlite_rc=$?
    [ "$side_rc" -ne 0 ] || side_rc=$sqlite_rc
    exit "$side_rc"
  ) >"$side_log" 2>&1 &
  side=$!
  # The third run: the contract suite's tests on the newer clusters (tests/e2e/sites.py; their ids
  # name the version), once those are up. Its own test database and Redis database (the side run's
  # server: the fault tests restart the main one).
  newer_run_log=artifacts/test-newer-run.log
  # Those in the worker's container image (`[slurm2605+apptainer]`) last, once it is built.
  (
    newer_up || { cat "$newer_log"; echo "a newer Slurm cluster did not come up" >&2; exit 1; }
    export REDIS_URL="$side_redis_base/12"
    [ "${FFP_TEST_DATABASE:-postgres}" = sqlite ] || export TEST_DATABASE_NAME=test_ffportal_newer
    main_pytest tests/e2e -k "(slurm2411 or slurm2605) and not apptainer" --durations=15
    contract_rc=$?
    image_up || { echo "the worker's container image was not built" >&2; exit 1; }
    main_pytest tests/e2e -k "apptainer"
    image_tests_rc=$?
    [ "$contract_rc" -ne 0 ] || contract_rc=$image_tests_rc
    exit "$contract_rc"
  ) >"$newer_run_log" 2>&1 &
  newer_run=$!
  main_pytest tests --ignore=tests/jobs --ignore=tests/portal --ignore=tests/worker \
    --ignore=tests/test_architecture.py -k "not slurm2411 and not slurm2605" --durations=30
  rc=$?
  wait "$side"
  side_rc=$?
  wait "$newer_run"
  contract_rc=$?
  echo "===== the side run (tests/jobs, tests/portal, tests/worker; then the database tests on SQLite): $side_log ====="
  cat "$side_log"
  echo "===== the contract suite on Slurm 24.11 and 26.05 (and in the worker's image): $newer_run_log ====="
  cat "$newer_run_log"
  [ "$rc" -ne 0 ] || rc=$side_rc
  [ "$rc" -ne 0 ] || rc=$contract_rc
fi
set -e
# pytest's 5 means "no tests ran": that is a failure here, never a silent pass.
exit $rc
