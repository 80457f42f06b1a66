#!/usr/bin/env bash
# The portal's service user ($FFP_WEB_USER): the web server, the RQ workers and the watcher run as it,
# never as root (scripts/up.sh, scripts/prod-shape.sh, docs/deploy.md). Its home is a fixed private
# folder of its own ($FFP_WEB_HOME, 700), never the portal's state folder: that one moves with
# PORTAL_VAR (a test's temporary folder, once), and a home that a run deletes is a path any local
# user could create and fill. Safe to run again: a user made with another home gets this one.
set -euo pipefail
# shellcheck source=scripts/cluster/env.sh
. "$(dirname "$0")/cluster/env.sh"
[ "$(id -u)" = 0 ] || { echo "web-user: run as root" >&2; exit 1; }
if ! id "$FFP_WEB_USER" >/dev/null 2>&1; then
  useradd --system --user-group --no-create-home --home-dir "$FFP_WEB_HOME" --shell /usr/sbin/nologin \
    --comment "FaceFusion Portal web, RQ worker and watcher" "$FFP_WEB_USER"
  echo "portal: created the service user $FFP_WEB_USER (home $FFP_WEB_HOME)"
elif [ "$(getent passwd "$FFP_WEB_USER" | cut -d: -f6)" != "$FFP_WEB_HOME" ]; then
  usermod --home "$FFP_WEB_HOME" "$FFP_WEB_USER"
  echo "portal: the service user's home is now $FFP_WEB_HOME"
fi
install -d -m 700 -o "$FFP_WEB_USER" -g "$FFP_WEB_USER" "$FFP_WEB_HOME"
