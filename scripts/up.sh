#!/usr/bin/env bash
# `make up`: the whole portal on a local real cluster, in the foreground. Ctrl-C stops what it started.
# Safe to run twice: every step checks before it acts (packages, venv, cluster daemons, database).
#
# As in production: DEBUG off, a generated SECRET_KEY and key for the SSH key's encryption at rest
# (kept in $PORTAL_VAR/secrets, mode 600), Redis behind a password, and the three portal processes
# (web server, RQ worker, watcher) running as the service user $FFP_WEB_USER, never as root. The
# portal's state folder ($PORTAL_VAR, default var/) is that user's alone (700; files 600).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-system.sh
bash scripts/setup-python.sh

# Whether this run starts the cluster (then Ctrl-C stops it again): up.sh leaves a marker per daemon
# it starts, down.sh removes them. Markers already there mean someone else's run (make test, another
# make up) started it: leave it running. (A health check would say "down" on a merely busy cluster.)
owned_dir=$(. scripts/cluster/env.sh && . scripts/cluster/lib.sh && echo "$FFP_OWNED")
cluster_was_up=0
[ -n "$(ls -A "$owned_dir" 2>/dev/null)" ] && cluster_was_up=1
bash scripts/cluster/up.sh
# FFP_NEWER=1 make up: the Slurm 24.11 and 26.05 clusters too (two nodes each; docs/slurm-versions.md),
# each a cluster profile with its templates (26.05 also the worker's container image). They stay up
# after Ctrl-C (newer.sh VERSION down).
if [ "${FFP_NEWER:-0}" = 1 ]; then
  bash scripts/cluster/newer.sh 24.11 up
  bash scripts/cluster/newer.sh 26.05 up
  # Power saving to see (docs/clusters.md): 26.05's second node sleeps after a minute idle, and
  # Slurm wakes it for work or a booking. (Every node stays up by default, as the tests need.)
  bash scripts/cluster/newer.sh 26.05 exec scontrol update SuspendExcNodes=ffp2605-n1
  bash scripts/cluster/worker-image.sh  # the worker's Apptainer image, and a template that runs it
fi
# shellcheck source=scripts/cluster/env.sh
. scripts/cluster/env.sh
PY=$PWD/.venv/bin/python
PORT=${PORT:-8000}
PORTAL_VAR=$(realpath -m "${PORTAL_VAR:-$PWD/var}")
WEB=$FFP_WEB_USER

# --- the service user and its private state folder -------------------------------------------------
bash scripts/web-user.sh
install -d -m 700 -o "$WEB" -g "$WEB" "$PORTAL_VAR" "$PORTAL_VAR/log" "$PORTAL_VAR/secrets"
# A folder left by an earlier run as root (before the portal had a user of its own): hand it over.
chown -R "$WEB:$WEB" "$PORTAL_VAR"
chmod -R go-rwx "$PORTAL_VAR"

# --- secrets, generated once ----------------------------------------------------------------------
secrets=$PORTAL_VAR/secrets/portal.env
if [ ! -s "$secrets" ]; then
  (umask 077; "$PY" - >"$secrets" <<'PY'
import secrets
from cryptography.fernet import Fernet
print(f"SECRET_KEY={secrets.token_urlsafe(50)}")
print(f"FIELD_ENCRYPTION_KEY={Fernet.generate_key().decode()}")
PY
  )
  echo "portal: generated SECRET_KEY and FIELD_ENCRYPTION_KEY ($secrets, mode 600)"
fi
# The cluster's SSH key and pinned host key, readable by the service user for seeding the profile.
install -m 600 -o "$WEB" -g "$WEB" "$FFP_SSH_KEY" "$PORTAL_VAR/secrets/cluster_key"
install -m 600 -o "$WEB" -g "$WEB" "$FFP_SSH_KNOWN_HOSTS" "$PORTAL_VAR/secrets/cluster_known_hosts"
chown "$WEB:$WEB" "$secrets"
chmod 600 "$secrets"

set -a
# shellcheck source=/dev/null
. "$secrets"
DEBUG=false
ALLOWED_HOSTS=127.0.0.1,localhost
SITE_URL=http://127.0.0.1:$PORT
# Plain HTTP on this machine only (127.0.0.1): cookies without the Secure flag (a client keeps a
# Secure cookie for HTTPS only), which the production checks accept for such a lab when told so
# explicitly. Behind HTTPS, drop these three lines.
ALLOW_INSECURE_COOKIES=true
SESSION_COOKIE_SECURE=false
CSRF_COOKIE_SECURE=false
DATABASE_URL=sqlite:///$PORTAL_VAR/portal.sqlite3
MEDIA_ROOT=$PORTAL_VAR/media
STATIC_ROOT=$PORTAL_VAR/static
REDIS_URL=$FFP_REDIS_URL
DJANGO_SETTINGS_MODULE=portal.settings
PYTHONUNBUFFERED=1
HOME=$PORTAL_VAR
FFP_SSH_KEY=$PORTAL_VAR/secrets/cluster_key
FFP_SSH_KNOWN_HOSTS=$PORTAL_VAR/secrets/cluster_known_hosts
PORTAL_VAR=$PORTAL_VAR
set +a

# "${as_web[@]}" COMMAND...: run as the service user, with the portal's private umask. setpriv and
# bash exec in place, so the pid is the command's own and no root process stays above it.
as_web=(setpriv --reuid="$WEB" --regid="$WEB" --init-groups -- bash -c 'umask 077; exec "$@"' as_web)

"${as_web[@]}" "$PY" manage.py migrate --noinput >/dev/null
"${as_web[@]}" "$PY" manage.py collectstatic --noinput >/dev/null
# The demo password is generated once and kept (mode 600), so a second `make up` prints the same one.
if [ ! -s "$PORTAL_VAR/demo-password" ]; then
  (umask 077; "$PY" -c "import secrets; print(secrets.token_urlsafe(9))" >"$PORTAL_VAR/demo-password")
  chown "$WEB:$WEB" "$PORTAL_VAR/demo-password"
fi
"${as_web[@]}" "$PY" manage.py seed_local --demo-password="$(cat "$PORTAL_VAR/demo-password")"  # `=`: it may start with -

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
# The logs are the service user's too (this root shell opens them for the redirections below).
# FFP_RQ_WORKERS RQ workers (default 2) share the queue: submissions, and the outputs fetched in batches
# (jobs/background/enqueue.py), whose rate grows with the workers (bench/output_fetch.py, docs/scale.md).
rq_workers=${FFP_RQ_WORKERS:-2}
case "$rq_workers" in ''|*[!0-9]*|0) echo "FFP_RQ_WORKERS must be a whole number of 1 or more, not '$rq_workers'" >&2; exit 2 ;; esac
for name in $(seq -f 'rqworker-%g' 1 "$rq_workers") watcher web; do
  install -m 600 -o "$WEB" -g "$WEB" /dev/null "$PORTAL_VAR/log/$name.log"
done
# setsid: Ctrl-C reaches this script only, whose trap stops the three in order and reports honestly.
# The RQ worker runs jobs in its own process (no fork per job), so its SSH connection to the cluster
# stays open from one Start to the next (jobs/background/rq_worker.py says what stands in for the fork).
for n in $(seq 1 "$rq_workers"); do
  setsid "${as_web[@]}" "$PY" manage.py portal_rqworker >"$PORTAL_VAR/log/rqworker-$n.log" 2>&1 & pids+=($!)
done
setsid "${as_web[@]}" "$PY" manage.py watch_cluster >"$PORTAL_VAR/log/watcher.log" 2>&1 & pids+=($!)
# The web server as FFP_WEB_PROCESSES processes sharing the port (default: one per core, at most 2;
# portal/server.py): each process fans an event out to its own sockets, on its own core (docs/scale.md).
web_processes=$("${as_web[@]}" "$PY" -c 'from portal.server import default_processes; print(default_processes())')
setsid "${as_web[@]}" "$PY" -m portal.server --host 127.0.0.1 --port "$PORT" --processes "$web_processes" \
  >"$PORTAL_VAR/log/web.log" 2>&1 & pids+=($!)
sleep 2
for pid in "${pids[@]}"; do
  kill -0 "$pid" 2>/dev/null || { echo "a portal process died at start; see $PORTAL_VAR/log/" >&2; exit 1; }
done
cat <<MSG

  FaceFusion Portal is up:  http://127.0.0.1:$PORT/
  log in as:                demo / $(cat "$PORTAL_VAR/demo-password")
  sample target folder:     $FFP_SAMPLE_FACES
  logs:                     $PORTAL_VAR/log/ (rqworker-1..$rq_workers, watcher, web)
  web server:               $web_processes process(es) (FFP_WEB_PROCESSES)
  runs as:                  $WEB (DEBUG off; secrets in $PORTAL_VAR/secrets, mode 600)

  Press Ctrl-C to stop.
MSG
wait -n "${pids[@]}" || true
echo "a portal process exited on its own; see $PORTAL_VAR/log/" >&2
exit 1
