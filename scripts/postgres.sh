#!/usr/bin/env bash
# PostgreSQL for the tests and the production shape on this machine: install it when missing, start
# Debian's cluster (pg_ctlcluster: the server runs as the `postgres` user, never as root) on
# 127.0.0.1:5432 only, and create the portal's role and database. Idempotent: run it as often as
# you like; a running server is left as it is.
#
# Prints nothing secret. The role's password is generated once (mode 600, root's) and the whole
# DATABASE_URL is written to $FFP_STATE/secrets/postgres-url (mode 600) for scripts/test.sh and
# scripts/prod-shape.sh. The role may create databases: Django's test runner makes test_<name>.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/cluster/env.sh
. scripts/cluster/env.sh
PG_PORT=${FFP_PG_PORT:-5432}
PG_ROLE=${FFP_PG_ROLE:-ffportal}
PG_DB=${FFP_PG_DB:-ffportal}
secrets=$FFP_STATE/secrets
install -d -m 700 "$secrets"

if ! command -v pg_ctlcluster >/dev/null || ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] || { echo "postgres: not installed; run this script as root" >&2; exit 1; }
  echo "postgres: installing"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql >/dev/null
fi
version=$(ls /usr/lib/postgresql | sort -V | tail -1)
if ! pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main"' | grep -q .; then
  pg_createcluster "$version" main --port "$PG_PORT" >/dev/null
fi
conf=/etc/postgresql/$version/main
# Only this machine may connect (Debian's pg_hba.conf asks a password, scram, over TCP). A drop-in
# (conf.d is read last) leaves Debian's postgresql.conf as the package wrote it.
install -d -o postgres -g postgres "$conf/conf.d"
printf "listen_addresses = '127.0.0.1'\nport = %d\n" "$PG_PORT" >"$conf/conf.d/ffportal.conf"
if pg_ctlcluster "$version" main status >/dev/null 2>&1; then
  pg_ctlcluster "$version" main reload
else
  pg_ctlcluster "$version" main start
fi
# `pg_ctlcluster start` returns once the server accepts connections; a check all the same.
for _ in $(seq 30); do
  pg_isready -q -h 127.0.0.1 -p "$PG_PORT" && break
  sleep 1
done
pg_isready -q -h 127.0.0.1 -p "$PG_PORT" || { echo "postgres: not answering on 127.0.0.1:$PG_PORT; see /var/log/postgresql/" >&2; exit 1; }

pw_file=$secrets/postgres-password
if [ ! -s "$pw_file" ]; then
  (umask 077; python3 -c 'import secrets; print(secrets.token_hex(24))' >"$pw_file")
fi
pw=$(<"$pw_file")
# psql as the postgres superuser over its local socket (peer authentication); names are fixed
# words checked here, the password is hex: nothing untrusted reaches the SQL.
[[ "$PG_ROLE" =~ ^[a-z_][a-z0-9_]*$ && "$PG_DB" =~ ^[a-z_][a-z0-9_]*$ && "$pw" =~ ^[0-9a-f]+$ ]] \
  || { echo "postgres: role/database names must be plain lower-case words" >&2; exit 1; }
as_pg=(runuser -u postgres -- psql -q -v ON_ERROR_STOP=1 -p "$PG_PORT" -d postgres)
if [ "$("${as_pg[@]}" -tAc "SELECT 1 FROM pg_roles WHERE rolname = '$PG_ROLE'")" != 1 ]; then
  "${as_pg[@]}" -c "CREATE ROLE $PG_ROLE LOGIN CREATEDB PASSWORD '$pw'"
else
  "${as_pg[@]}" -c "ALTER ROLE $PG_ROLE LOGIN CREATEDB PASSWORD '$pw'"
fi
if [ "$("${as_pg[@]}" -tAc "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'")" != 1 ]; then
  "${as_pg[@]}" -c "CREATE DATABASE $PG_DB OWNER $PG_ROLE ENCODING 'UTF8' TEMPLATE template0"
fi
(umask 077; echo "postgres://$PG_ROLE:$pw@127.0.0.1:$PG_PORT/$PG_DB" >"$secrets/postgres-url")
echo "postgres: up on 127.0.0.1:$PG_PORT (role $PG_ROLE, database $PG_DB; URL in $secrets/postgres-url)"
