#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages the portal and its tests use. Idempotent; runs as root.
# Skips apt entirely when every package is already installed (the common case on a dev machine).
set -euo pipefail
# fonts-wqy-microhei: Chinese glyphs for the browser's screenshots of the Chinese pages (5 MB)
PKGS=(ffmpeg redis-server slurmctld slurmd slurm-client slurmdbd munge mariadb-server
      openssh-server chromium fonts-wqy-microhei python3-venv
      postgresql nginx openssl  # the production shape: docs/deploy.md, scripts/postgres.sh
      faketime  # make test-clock: the tests at a chosen moment (scripts/test-clock.sh)
      mmdebstrap)  # the newer Slurm clusters' Debian roots (scripts/cluster/newer.sh)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "system packages: all present"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "error: missing packages (${missing[*]}); run this script as root" >&2
  exit 1
fi
echo "system packages: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
