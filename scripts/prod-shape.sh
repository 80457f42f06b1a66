#!/usr/bin/env bash
# The production shape on this machine (docs/deploy.md), for tests/e2e/test_production_shape.py:
# nginx with a self-signed certificate in front of TWO ASGI processes, TWO RQ workers and the
# watcher, on PostgreSQL (scripts/postgres.sh) and the password-protected Redis of the local
# cluster. The portal processes are started with the command lines of deploy/systemd/*.service
# (ExecStart, WorkingDirectory, User, UMask, EnvironmentFile), read from the unit files here: no
# systemd in this container, so this script does what systemd would do with them.
#
#   bash scripts/prod-shape.sh up       # (re)creates everything; writes $DIR/info.json (root, 600)
#   bash scripts/prod-shape.sh start UNIT INSTANCE   # one process again (systemd's Restart=always)
#   bash scripts/prod-shape.sh down     # stops what `up` started, drops its database
#
# Runs as root (like systemd and nginx's master). Ports: 8480 (HTTP, redirects), 8443 (HTTPS),
# 8101 and 8102 (ASGI): clear of `make up` (8000) and the tests' live servers (free ports).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
[ "$(id -u)" = 0 ] || { echo "prod-shape: run as root" >&2; exit 1; }
# shellcheck source=scripts/cluster/env.sh
. scripts/cluster/env.sh
DIR=${FFP_PROD_DIR:-/var/lib/ffportal-prod}
HTTP_PORT=${FFP_PROD_HTTP_PORT:-8480}
HTTPS_PORT=${FFP_PROD_HTTPS_PORT:-8443}
ASGI_PORTS=(8101 8102)
RQ_INSTANCES=(1 2)
WEB=$FFP_WEB_USER
VAR=$DIR/var
ENVFILE=$DIR/env
RUN=$DIR/run
PG_DB=ffportal_prodshape
UNITS=$REPO/deploy/systemd
# Where the units expect the code (WorkingDirectory, ExecStart); here it is this checkout.
UNIT_PREFIX=/opt/ffportal

unit_value() {  # unit_value FILE KEY: the first KEY=value of a unit file
  sed -n "s/^$2=//p" "$1" | head -n 1
}

# start_unit FILE INSTANCE: what systemd does for `systemctl start NAME@INSTANCE`, with the unit's
# own ExecStart, WorkingDirectory, User/Group, UMask and EnvironmentFile, and nothing else in the
# environment (env -i). The pid (setsid and setpriv exec in place) goes to $RUN/NAME@INSTANCE.pid.
start_unit() {
  local file=$UNITS/$1 inst=$2 name exec_start workdir user group umask_ argv envs
  name=${1%.service}; name=${name%@}${inst:+@$inst}
  exec_start=$(unit_value "$file" ExecStart)
  exec_start=${exec_start//$UNIT_PREFIX/$REPO}; exec_start=${exec_start//%i/$inst}
  workdir=$(unit_value "$file" WorkingDirectory); workdir=${workdir//$UNIT_PREFIX/$REPO}
  user=$(unit_value "$file" User); group=$(unit_value "$file" Group); umask_=$(unit_value "$file" UMask)
  [[ "$umask_" =~ ^[0-7]{3,4}$ && -n "$user" && -n "$group" ]] || { echo "prod-shape: $1 lacks User/Group/UMask" >&2; exit 1; }
  # The units' ExecStart lines are plain words (no quotes, no variables): split on blanks.
  read -r -a argv <<<"$exec_start"
  mapfile -t envs < <(grep -E '^[A-Za-z_][A-Za-z0-9_]*=' "$ENVFILE")
  [ -e "$VAR/log/$name.log" ] || install -m 600 -o "$WEB" -g "$WEB" /dev/null "$VAR/log/$name.log"
  (cd "$workdir" && exec setsid env -i PATH=/usr/local/bin:/usr/bin:/bin "${envs[@]}" \
     setpriv --reuid="$user" --regid="$group" --init-groups -- \
     bash -c 'umask "$0"; exec "$@"' "$umask_" "${argv[@]}" >>"$VAR/log/$name.log" 2>&1 < /dev/null) &
  echo $! >"$RUN/$name.pid"
}

# as_web COMMAND...: a one-off command (migrate, collectstatic, seed) as the service user, in the
# units' environment plus the cluster's FFP_* variables that seed_local reads.
as_web() {
  local envs
  mapfile -t envs < <(grep -E '^[A-Za-z_][A-Za-z0-9_]*=' "$ENVFILE")
  env "${envs[@]}" setpriv --reuid="$WEB" --regid="$WEB" --init-groups -- bash -c 'umask 077; exec "$@"' as_web "$@"
}

stop_all() {
  local pidfile pid
  for pidfile in "$RUN"/*.pid; do
    [ -e "$pidfile" ] || continue
    pid=$(<"$pidfile")
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pidfile in "$RUN"/*.pid; do
    [ -e "$pidfile" ] || continue
    pid=$(<"$pidfile")
    for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$pidfile"
  done
  if [ -s "$DIR/nginx/nginx.pid" ]; then
    nginx -c "$DIR/nginx/nginx.conf" -s quit 2>/dev/null || true
    for _ in $(seq 40); do [ -e "$DIR/nginx/nginx.pid" ] || break; sleep 0.25; done
  fi
}

wait_http() {  # wait_http URL [curl options]: until it answers below 500
  local url=$1; shift
  for _ in $(seq 120); do
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$@" "$url" || true)
    [[ "$code" =~ ^[1-4] ]] && return 0
    sleep 0.5
  done
  echo "prod-shape: $url does not answer (last: $code); logs in $VAR/log, $DIR/nginx/log" >&2
  exit 1
}

case "${1:-}" in
  down)
    stop_all
    if [ -s "$FFP_STATE/secrets/postgres-password" ]; then
      PGPASSWORD=$(<"$FFP_STATE/secrets/postgres-password") dropdb -h 127.0.0.1 -U ffportal --if-exists "$PG_DB" || true
    fi
    echo "prod-shape: down"
    exit 0 ;;
  start)
    [ $# -ge 2 ] || { echo "usage: $0 start UNIT [INSTANCE]" >&2; exit 2; }
    start_unit "$2" "${3:-}"
    exit 0 ;;
  up) ;;
  *) echo "usage: $0 up | down | start UNIT [INSTANCE]" >&2; exit 2 ;;
esac

command -v nginx >/dev/null || { echo "prod-shape: nginx is not installed (make system)" >&2; exit 1; }
stop_all
bash scripts/web-user.sh >/dev/null
bash scripts/postgres.sh >/dev/null
pg_pw=$(<"$FFP_STATE/secrets/postgres-password")
PGPASSWORD=$pg_pw dropdb -h 127.0.0.1 -U ffportal --if-exists "$PG_DB"
PGPASSWORD=$pg_pw createdb -h 127.0.0.1 -U ffportal -E UTF8 -T template0 "$PG_DB"

install -d -m 755 "$DIR"
install -d -m 700 "$RUN"
rm -rf "$VAR/log"
install -d -m 700 -o "$WEB" -g "$WEB" "$VAR" "$VAR/log" "$VAR/secrets" "$VAR/media" "$VAR/static" "$VAR/prometheus"
install -m 600 -o "$WEB" -g "$WEB" "$FFP_SSH_KEY" "$VAR/secrets/cluster_key"
install -m 600 -o "$WEB" -g "$WEB" "$FFP_SSH_KNOWN_HOSTS" "$VAR/secrets/cluster_known_hosts"

# --- the environment file, from deploy/env.example with this machine's values --------------------
secret() { "$REPO/.venv/bin/python" -c "import secrets; print(secrets.token_urlsafe($1))"; }
metrics_token=$(secret 32)
(umask 077; {
  sed -E '/^(SECRET_KEY|FIELD_ENCRYPTION_KEY|ALLOWED_HOSTS|CSRF_TRUSTED_ORIGINS|SITE_URL|PORTAL_VAR|HOME|MEDIA_ROOT|STATIC_ROOT|DATABASE_URL|REDIS_URL|METRICS_TOKEN|PROMETHEUS_MULTIPROC_DIR|FFP_SSH_KEY|FFP_SSH_KNOWN_HOSTS)=/d' \
    deploy/env.example
  echo "SECRET_KEY=$(secret 50)"
  echo "FIELD_ENCRYPTION_KEY=$("$REPO/.venv/bin/python" -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())')"
  echo "ALLOWED_HOSTS=127.0.0.1,localhost"
  echo "CSRF_TRUSTED_ORIGINS=https://127.0.0.1:$HTTPS_PORT"
  echo "SITE_URL=https://127.0.0.1:$HTTPS_PORT"
  echo "PORTAL_VAR=$VAR"
  echo "HOME=$VAR"
  echo "MEDIA_ROOT=$VAR/media"
  echo "STATIC_ROOT=$VAR/static"
  echo "DATABASE_URL=postgres://ffportal:$pg_pw@127.0.0.1:5432/$PG_DB"
  # The tests' Redis database (15), behind the local cluster's Redis password, as the user with a
  # server's permissions (deploy/redis/redis.conf.in; docs/deploy.md, step 7). The shape's RQ
  # workers take whatever is queued there: while another test run shares the database, they
  # may take (and fail, "no such job") its submissions; FFP_PROD_REDIS_DB gives the shape its own.
  echo "REDIS_URL=redis://$FFP_REDIS_USER-service:$(<"$FFP_REDIS_PASSWORD_FILE")@127.0.0.1:$FFP_REDIS_PORT/${FFP_PROD_REDIS_DB:-15}"
  echo "METRICS_TOKEN=$metrics_token"
  echo "PROMETHEUS_MULTIPROC_DIR=$VAR/prometheus"
  echo "FFP_SSH_KEY=$VAR/secrets/cluster_key"
  echo "FFP_SSH_KNOWN_HOSTS=$VAR/secrets/cluster_known_hosts"
  echo "WATCH_INTERVAL=2"
} >"$ENVFILE")
chmod 600 "$ENVFILE"

# --- database, static files, the demo user and the local cluster profile ------------------------
as_web .venv/bin/python manage.py migrate --noinput >/dev/null
as_web .venv/bin/python manage.py collectstatic --noinput >/dev/null
demo_password=$(secret 12)
as_web .venv/bin/python manage.py seed_local "--demo-password=$demo_password" >/dev/null
token=$(as_web .venv/bin/python manage.py create_api_token demo)

# --- TLS: a self-signed certificate for 127.0.0.1 ---------------------------------------------------
install -d -m 700 "$DIR/tls"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=127.0.0.1" \
  -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
  -keyout "$DIR/tls/key.pem" -out "$DIR/tls/cert.pem" 2>/dev/null
chmod 600 "$DIR/tls/key.pem"

# --- nginx: the site from deploy/nginx/, inside a main config of its own ------------------------
ng=$DIR/nginx
install -d -m 755 "$ng"
rm -rf "$ng/log"  # each run's access log is its own (the test reads it)
install -d -m 700 -o "$WEB" -g "$WEB" "$ng/log" "$ng/tmp"
sed -e "s|@ASGI_1@|127.0.0.1:${ASGI_PORTS[0]}|; s|@ASGI_2@|127.0.0.1:${ASGI_PORTS[1]}|" \
    -e "s|@HTTP_PORT@|$HTTP_PORT|g; s|@HTTPS_PORT@|$HTTPS_PORT|g; s|@SERVER_NAME@|127.0.0.1 localhost|g" \
    -e "s|@TLS_CERT@|$DIR/tls/cert.pem|; s|@TLS_KEY@|$DIR/tls/key.pem|" \
    -e "s|@LOG_DIR@|$ng/log|g; s|@STATIC_ROOT@|$VAR/static|; s|@MEDIA_ROOT@|$VAR/media|" \
    -e "s|@UPLOAD_MAX@|4g|" deploy/nginx/ffportal.conf.in >"$ng/ffportal.conf"
# No IPv6 in some containers: then the [::] listens go.
[ -s /proc/net/if_inet6 ] || sed -i '/listen \[::\]/d' "$ng/ffportal.conf"
if grep -q '@[A-Z_0-9]*@' "$ng/ffportal.conf"; then
  echo "prod-shape: unfilled placeholders in the nginx site: $(grep -o '@[A-Z_0-9]*@' "$ng/ffportal.conf" | sort -u | tr '\n' ' ')" >&2
  exit 1
fi
cat >"$ng/nginx.conf" <<CONF
# The master runs as root (it reads the key, binds the ports); the workers that talk to clients
# and read MEDIA_ROOT run as the service user, as in production (docs/deploy.md).
user $WEB $WEB;
worker_processes 2;
pid $ng/nginx.pid;
error_log $ng/log/error.log;
events { worker_connections 1024; }
http {
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    sendfile on;
    tcp_nopush on;
    client_body_temp_path $ng/tmp/body;
    proxy_temp_path $ng/tmp/proxy;
    fastcgi_temp_path $ng/tmp/fastcgi;
    uwsgi_temp_path $ng/tmp/uwsgi;
    scgi_temp_path $ng/tmp/scgi;
    include $ng/ffportal.conf;
}
CONF
nginx -t -q -c "$ng/nginx.conf"
# nginx's daemon keeps the stderr it was given: not this script's (a caller waiting for its end).
nginx -c "$ng/nginx.conf" </dev/null >/dev/null 2>>"$ng/log/error.log"

# --- the metrics folder emptied, by the oneshot unit's own command, as systemd runs it first ----
# (its ExecStart's ${PROMETHEUS_MULTIPROC_DIR} is the environment file's, as systemd expands it)
reset=$(unit_value "$UNITS/ffportal-metrics-reset.service" ExecStart)
reset=${reset//'${PROMETHEUS_MULTIPROC_DIR}'/$VAR/prometheus}
read -r -a reset_argv <<<"$reset"
setpriv --reuid="$WEB" --regid="$WEB" --init-groups -- "${reset_argv[@]}"

# --- the portal's processes, with the units' command lines --------------------------------------
for port in "${ASGI_PORTS[@]}"; do start_unit ffportal-asgi@.service "$port"; done
for n in "${RQ_INSTANCES[@]}"; do start_unit ffportal-rq@.service "$n"; done
start_unit ffportal-watcher.service ""

for port in "${ASGI_PORTS[@]}"; do wait_http "http://127.0.0.1:$port/login/"; done
wait_http "https://127.0.0.1:$HTTPS_PORT/login/" --cacert "$DIR/tls/cert.pem"
for pidfile in "$RUN"/*.pid; do
  kill -0 "$(<"$pidfile")" 2>/dev/null || { echo "prod-shape: $(basename "$pidfile" .pid) died at start; see $VAR/log" >&2; exit 1; }
done

(umask 077; "$REPO/.venv/bin/python" - "$DIR/info.json" <<PY
import json, sys
json.dump({"https": "https://127.0.0.1:$HTTPS_PORT", "http": "http://127.0.0.1:$HTTP_PORT",
           "asgi_ports": [${ASGI_PORTS[0]}, ${ASGI_PORTS[1]}], "cert": "$DIR/tls/cert.pem",
           "access_log": "$ng/log/access.log", "logs": "$VAR/log", "run": "$RUN", "units": "$UNITS",
           "unit_prefix": "$UNIT_PREFIX", "repo": "$REPO", "media": "$VAR/media",
           "token": "$token", "demo_password": "$demo_password", "metrics_token": "$metrics_token"},
          open(sys.argv[1], "w"))
PY
)
echo "prod-shape: up at https://127.0.0.1:$HTTPS_PORT (ASGI ${ASGI_PORTS[*]}, RQ workers ${RQ_INSTANCES[*]}, watcher; logs $VAR/log)"
