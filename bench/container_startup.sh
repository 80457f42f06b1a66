#!/usr/bin/env bash
# The container's start-up cost per task, cold and warm (bench/container_startup.py), measured on
# the Slurm 26.05 cluster's Debian (the one with Apptainer) as the service user, beside the same
# start without a container. Needs root, `newer.sh 26.05 up` and `worker-image.sh` done; submits no
# Slurm job and leaves no file behind.
#   bash bench/container_startup.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/cluster/env.sh
. scripts/cluster/env.sh
image=$FFP_IMAGES/worker.sif
[ -r "$image" ] || { echo "no $image: run scripts/cluster/worker-image.sh first" >&2; exit 1; }
tmp=$(mktemp -d "$FFP_STORAGE/.bench-container.XXXXXX")  # bound into the cluster's root at the same path
trap 'rm -rf "$tmp"' EXIT
chown "$FFP_SSH_USER:" "$tmp"
bash scripts/cluster/newer.sh 26.05 exec runuser -u "$FFP_SSH_USER" -- env -C "$tmp" TMPDIR="$tmp" \
  HOME="$tmp" "$FFP_PYTHON" "$FFP_REPO/bench/container_startup.py" "$image" "$FFP_REPO" "$FFP_PYTHON" "${1:-5}"
