#!/usr/bin/env bash
# The worker's container image, built with Apptainer WITHOUT any registry (deploy/worker/worker-local.def),
# on the Slurm 26.05 cluster's Debian (Debian unstable: the one with an Apptainer package):
#   worker-image.sh          build $FFP_IMAGES/worker.sif if the worker or its recipe changed
#                            (seconds when nothing did), then describe it for seed_local
#   worker-image.sh --force  build it again anyway
# Run as root after `newer.sh 26.05 up` (its root has Apptainer; its nodes see $FFP_IMAGES).
#
# What goes in, all from this machine or Debian's archive: a Debian root (mmdebstrap: the C
# libraries the worker's Python loads, and ffmpeg for videos), the Python the portal's venv runs on
# (its installation, less its tests and globally installed packages) and the wheels of
# worker/requirements.txt (`pip wheel`, from the pip indexes this machine is configured with).
# The image is root's, readable by the service user's group (750/640): tasks run it, nobody changes it.
set -euo pipefail
# shellcheck source=scripts/cluster/env.sh
. "$(dirname "$0")/env.sh"
# shellcheck source=scripts/cluster/lib.sh
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || die worker-image "must run as root"
force=0
case "${1:-}" in
  "") ;;
  --force) force=1 ;;
  *) die worker-image "usage: worker-image.sh [--force]" ;;
esac
newer_env 26.05
started=$EPOCHREALTIME
private_logs
[ -x "$NV_ROOT/usr/bin/apptainer" ] || die worker-image "no Apptainer in $NV_ROOT: run scripts/cluster/newer.sh 26.05 up first"
image=$FFP_IMAGES/worker.sif
work=$FFP_STATE/images   # what the build is made from (root's)
info=$FFP_STATE/clusters/images/$NV_CLUSTER.json
log=$FFP_LOG/worker-image.log
install -d -m 700 "$work"
# Read by seed_local, which runs as the portal's service user too (make up, the production shape),
# as the clusters' own descriptions beside it are.
install -d -m 755 "$(dirname "$info")"
chmod 755 "$(dirname "$info")"
install -d -m 750 -g "$FFP_SSH_USER" "$FFP_IMAGES"

# The recipe's fingerprint: the definition, the worker's files and requirements, the Python. The
# image is rebuilt only when it changes (a second `make test` reuses it).
py_home=$NV_PYTHON_HOME
fingerprint=$(
  cd "$FFP_REPO"
  { sha256sum deploy/worker/worker-local.def
    find worker -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 | sort -z | xargs -0 sha256sum
    "$FFP_PYTHON" -c 'import sys; print(sys.version)'; echo "$py_home"; } | sha256sum | cut -d' ' -f1)

describe() {
  local digest
  digest=$(sha256sum "$image" | cut -d' ' -f1)
  printf '{"cluster": "%s", "image": "%s", "sha256": "%s", "bytes": %s}\n' "$NV_CLUSTER" "$image" "$digest" \
    "$(stat -c %s "$image")" >"$info.new"
  chmod 644 "$info.new"
  mv "$info.new" "$info"
}
if [ "$force" = 0 ] && [ -s "$image" ] && [ "$(cat "$work/fingerprint" 2>/dev/null)" = "$fingerprint" ]; then
  describe
  say worker-image "$image is up to date ($(( $(stat -c %s "$image") / 1048576 )) MB)"
  exit 0
fi

# 1. The Debian root (kept while its package list stays the same).
packages="libffi8,libbz2-1.0,liblzma5,libsqlite3-0,libexpat1,zlib1g,libuuid1,libgomp1,libssl3t64,ffmpeg"
stamp="$NV_SUITE mmdebstrap $packages"
if [ "$(cat "$work/base/.ffp-root" 2>/dev/null)" != "$stamp" ]; then
  say worker-image "making its Debian root ($NV_SUITE, with ffmpeg: about a minute)"
  rm -rf "$work/base" "$work/base.new"
  mmdebstrap --variant=minbase --include="$packages" --aptopt='Acquire::Check-Valid-Until "false"' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' "$NV_SUITE" "$work/base.new" "$FFP_DEBIAN_MIRROR" \
    >"$FFP_LOG/mmdebstrap-worker-image.log" 2>&1 ||
    die worker-image "mmdebstrap $NV_SUITE failed" "$FFP_LOG/mmdebstrap-worker-image.log"
  # No device files: Apptainer gives a container the host's /dev, and the build (in a user namespace,
  # below) may not create them.
  find "$work/base.new/dev" -mindepth 1 ! -type d -delete
  echo "$stamp" >"$work/base.new/.ffp-root"
  mv "$work/base.new" "$work/base"
fi

# 2. The Python: its installation without the test suite, the static library and the packages
# installed into it globally (the worker's own come from the wheels, into a venv of the image).
rm -rf "$work/python"
install -d -m 755 "$work/python"
tar -C "$py_home" -cf - --exclude='./lib/python3.*/test' --exclude='./lib/python3.*/site-packages/*' \
  --exclude='*.a' --exclude='./include' --exclude='./share' --exclude='__pycache__' . | tar -C "$work/python" -xf -
[ -x "$work/python/bin/python3" ] || die worker-image "no bin/python3 in $py_home"

# 3. The wheels, resolved by pip as the venv was (the machine's own pip configuration).
rm -rf "$work/wheels"
"$FFP_REPO/.venv/bin/pip" wheel -q --disable-pip-version-check -r "$FFP_REPO/worker/requirements.txt" \
  -w "$work/wheels" >"$log" 2>&1 || die worker-image "pip wheel failed" "$log"
"$FFP_REPO/.venv/bin/pip" wheel -q --disable-pip-version-check --no-deps -r "$FFP_REPO/worker/requirements-nodeps.txt" \
  -w "$work/wheels" >>"$log" 2>&1 || die worker-image "pip wheel failed" "$log"

# 4. The build, with the cluster's Apptainer, in its root (the repository, the work folder and the
# images folder bound in at the same paths). In a user namespace mapping root to root: this machine
# may withhold a capability from root (seen: CAP_SYS_RESOURCE, in a container), and Apptainer asks
# for all of them to run %post as root; in a namespace of its own root has them all. The new image replaces the old one in one rename, so a
# task starting meanwhile opens either the old file or the new one, never half of one.
say worker-image "building $image (apptainer build, deploy/worker/worker-local.def)"
rm -f "$image.new"
for d in "$FFP_REPO" "$work" "$FFP_IMAGES"; do install -d -m 755 "$NV_ROOT$d"; done  # the binds' mount points
in_root "$NV_ROOT" "$FFP_REPO" "$work" "$FFP_IMAGES" -- unshare --user --map-users=0:0:65536 --map-groups=0:0:65536 env -C "$FFP_REPO" APPTAINER_CACHEDIR="$work/cache" \
  APPTAINER_TMPDIR="$work" apptainer build --force --mksquashfs-args "-comp zstd -Xcompression-level 3" --build-arg base="$work/base" --build-arg python="$work/python" \
  --bind "$work/wheels:/mnt:ro" "$image.new" deploy/worker/worker-local.def >>"$log" 2>&1 ||
  die worker-image "apptainer build failed" "$log"
chown "root:$FFP_SSH_USER" "$image.new"
chmod 640 "$image.new"
mv "$image.new" "$image"
echo "$fingerprint" >"$work/fingerprint"
rm -rf "$work/wheels" "$work/python"
describe
say worker-image "built $image ($(( $(stat -c %s "$image") / 1048576 )) MB) in $(elapsed "$started")s"
