#!/usr/bin/env bash
# `make up`: the whole portal on a local real cluster, in the foreground. Ctrl-C stops what it started.
# Safe to run twice: every step checks before it acts (packages, venv, cluster daemons, database).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-system.sh
bash scripts/setup-python.sh

cluster_was_up=0
bash scripts/cluster/check.sh >/dev/null 2>&1 && cluster_was_up=1
bash scripts/cluster/up.sh
# shellcheck source=scripts/cluster/env.sh
. scripts/cluster/env.sh
export REDIS_URL="$FFP_REDIS_URL" DJANGO_SETTINGS_MODULE=portal.settings PYTHONUNBUFFERED=1
PY=.venv/bin/python
mkdir -p var/log
"$PY" manage.py migrate --noinput >/dev/null
# The demo password is generated once and kept (mode 600), so a second `make up` prints the same one.
if [ ! -s var/demo-password ]; then
  (umask 077; "$PY" -c "import secrets; print(secrets.token_urlsafe(9))" > var/demo-password)
fi
"$PY" manage.py seed_local --demo-password "$(cat var/demo-password)"

pids=()
stop() {
  trap - INT TERM EXIT
  echo; echo "stopping the portal..."
  kill "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
  if [ "$cluster_was_up" = 0 ]; then bash scripts/cluster/down.sh || true; fi
}
trap 'stop; exit 0' INT TERM
trap stop EXIT
# setsid: Ctrl-C reaches this script only, whose trap stops the three in order and reports honestly.
setsid "$PY" manage.py rqworker default --with-scheduler --serializer rq.serializers.JSONSerializer >var/log/rqworker.log 2>&1 & pids+=($!)
setsid "$PY" manage.py watch_cluster >var/log/watcher.log 2>&1 & pids+=($!)
setsid "$PY" -m portal.server --host 127.0.0.1 --port "${PORT:-8000}" >var/log/web.log 2>&1 & pids+=($!)
sleep 2
for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null || { echo "a portal process died at start; see var/log/" >&2; exit 1; }; done
cat <<MSG

  FaceFusion Portal is up:  http://127.0.0.1:${PORT:-8000}/
  log in as:                demo / $(cat var/demo-password)
  sample target folder:     $FFP_SAMPLE_FACES
  logs:                     var/log/ (rqworker, watcher, web)

  Press Ctrl-C to stop.
MSG
wait -n "${pids[@]}" || true
echo "a portal process exited on its own; see var/log/" >&2
exit 1
