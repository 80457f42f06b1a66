#!/usr/bin/env bash
# A NEWER local Slurm cluster, in a Debian root of its own beside the host's Slurm 22.05:
#   newer.sh VERSION up     build its root if needed, start it (idempotent)
#   newer.sh VERSION down   cancel the service user's jobs on it and stop it
#   newer.sh VERSION exec CMD...      run CMD as root on it (scontrol, sacctmgr: what an admin does)
#   newer.sh VERSION kill-node 1|2    kill every process of that compute node at once (a power loss)
#   newer.sh VERSION gpu 1|2 0|1 ok|ecc=N|temperature=C|lost   break (or heal) one fake GPU of a node:
#                                     the GPU health check (deploy/slurm/gpu-health.sh) drains the node
#                                     within HealthCheckInterval, and resumes it once healed
#   newer.sh VERSION bmc              the nodes' stand-in power controller (started by `up`): powers a
#                                     node on (its slurmd, after FFP_NODE_BOOT_SECONDS) or off when
#                                     Slurm's ResumeProgram/SuspendProgram ask (power saving)
# VERSION: 24.11 (Debian 13 "trixie") or 26.05 (Debian unstable "sid", which also has Apptainer).
#
# What sites run, on one machine: its own munge key and munged, its own slurmdbd (its own database on
# the host's MariaDB), slurmctld, an sshd login node for the service user on 127.0.0.1, and TWO
# compute nodes that Slurm sees as separate machines: each slurmd runs in a network namespace of its
# own, with an address of its own on a bridge, and offers two fake GPUs of one type (h200 on the
# first node, a100 on the second). Every daemon runs with the root as its / (a mount namespace and
# pivot_root, not chroot: Apptainer needs user namespaces, which the kernel refuses to a chrooted
# process). The portal's code, its venv's Python, the cluster's work root, the cluster storage and
# the worker's container images (worker-image.sh) are bound in at the same paths, so a job there
# runs the same worker as on the host's cluster (or the same worker in its container).
#
# When it is up, $FFP_STATE/clusters/<name>.json says what the portal needs (seed_local seeds a
# cluster profile and a template from it). Needs root, mmdebstrap and network access to Debian's
# archive the first time (40-60 s a root; then reused).
set -euo pipefail
# shellcheck source=scripts/cluster/env.sh
. "$(dirname "$0")/env.sh"
# shellcheck source=scripts/cluster/lib.sh
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || die newer.sh "must run as root"
usage="usage: newer.sh 24.11|26.05 up|down|exec CMD...|kill-node 1|2|gpu 1|2 0|1 STATE|bmc"
[ $# -ge 2 ] || die newer.sh "$usage"
newer_env "$1"   # NV_* (lib.sh): suite, names, ports, addresses, folders of this version
action=$2
started=$EPOCHREALTIME
private_logs
R=$NV_ROOT

# in_root_of CMD...: CMD inside this cluster's root (lib.sh in_root, with this cluster's binds).
binds=("$FFP_REPO" "$NV_PYTHON_HOME" "$NV_WORK" "$FFP_STORAGE" "$FFP_IMAGES")
in_root_of() { in_root "$R" "${binds[@]}" -- "$@"; }
# slurm_accounting (lib.sh) runs sacctmgr: this cluster's, in its root.
sacctmgr() { in_root_of sacctmgr "$@"; }
daemon_pids() { root_pids "$R" "$1"; }
# node_pid I: node I's slurmd (its command line names the node).
node_pid() {
  local pid
  for pid in $(daemon_pids slurmd || true); do
    [[ " $(tr '\0' ' ' <"/proc/$pid/cmdline") " == *" -N $(nv_node "$1") "* ]] && { echo "$pid"; return 0; }
  done
  return 1
}
# in_node I CMD...: CMD in the root, in node I's network namespace.
in_node() {
  local i=$1
  shift
  ip netns exec "$NV_NETNS-n$i" bash -c "$(declare -f in_root); in_root \"\$@\"" in_node "$R" "${binds[@]}" -- "$@"
}

# The stand-in BMC (`bmc`): one a cluster, its pid here.
bmc_pidfile=$FFP_STATE/run/$NV_CLUSTER-bmc.pid
bmc_pid() { local pid; pid=$(cat "$bmc_pidfile" 2>/dev/null) && kill -0 "$pid" 2>/dev/null && echo "$pid"; }

stop_all() {
  local name
  # shellcheck disable=SC2046 # one word per pid
  stop_pid "bmc-$NV_CLUSTER" $(bmc_pid || true)
  for name in slurmd slurmctld sshd slurmdbd munged; do
    # shellcheck disable=SC2046 # one word per pid
    stop_pid "$name-$NV_CLUSTER" $(daemon_pids "$name" || true)
  done
  for i in 1 2; do ip netns del "$NV_NETNS-n$i" 2>/dev/null || true; done
  ip link del "$NV_BRIDGE" 2>/dev/null || true
}

case $action in
up) ;;
exec)
  # newer.sh VERSION exec CMD...: CMD as root on that cluster (its root; the controller's network).
  shift 2
  in_root_of "$@"
  exit ;;
kill-node)
  # newer.sh VERSION kill-node I: node I loses power: every process in its network namespace
  # (slurmd, slurmstepd, the tasks) is killed at once. `up` starts its slurmd again.
  [ $# -eq 3 ] && [[ $3 =~ ^[12]$ ]] || die newer.sh "usage: newer.sh VERSION kill-node 1|2"
  # shellcheck disable=SC2046 # one word per pid
  kill -KILL $(ip netns pids "$NV_NETNS-n$3") 2>/dev/null || true
  say "$(nv_node "$3")" "killed (every process of the node)"
  exit 0 ;;
gpu)
  # newer.sh VERSION gpu I J STATE: node I's fake GPU J reports STATE to the health check.
  [ $# -eq 5 ] && [[ $3 =~ ^[12]$ ]] && [[ $4 =~ ^[01]$ ]] && [[ $5 =~ ^(ok|ecc=[0-9]+|temperature=[0-9]+|lost)$ ]] ||
    die newer.sh "usage: newer.sh VERSION gpu 1|2 0|1 ok|ecc=N|temperature=C|lost"
  state_file=$R/var/lib/ffportal-fake-gpus/$(nv_node "$3")/nvidia$4.state
  if [ "$5" = ok ]; then rm -f "$state_file"; else echo "$5" >"$state_file"; fi
  say "$(nv_node "$3")" "GPU $4: $5"
  exit 0 ;;
bmc)
  # The nodes' power controller, standing in for each node's BMC (IPMI) or a cloud's API: carries out
  # what the power programs (node-power.sh, run by slurmctld) leave in the spool. Power on: the node's
  # slurmd starts after the boot delay, with -b (it reports a fresh boot, which Slurm waits for);
  # power off: the node's processes stop. Runs until the cluster's slurmctld stops.
  spool=$R/var/lib/ffportal-power boot=${FFP_NODE_BOOT_SECONDS:-10} checks=0
  say "bmc-$NV_CLUSTER" "started (boot delay ${boot}s)"
  while true; do
    if [ $((checks++ % 10)) = 0 ] && ! daemon_pids slurmctld >/dev/null; then
      say "bmc-$NV_CLUSTER" "slurmctld stopped: stopping"
      exit 0
    fi
    for req in "$spool"/*.request; do
      [ -e "$req" ] || continue
      read -r what node <"$req" || true
      rm -f "$req"
      for i in 1 2; do
        [ "$node" = "$(nv_node "$i")" ] || continue
        say "bmc-$NV_CLUSTER" "$(date -Is) power $what $node"
        if [ "$what" = up ]; then
          (sleep "$boot"
           node_pid "$i" >/dev/null || in_node "$i" slurmd -b -N "$node" </dev/null \
             >>"$FFP_LOG/$NV_CLUSTER-slurmd-$node.out" 2>&1
           say "bmc-$NV_CLUSTER" "$(date -Is) $node booted") &
        elif [ "$what" = down ]; then
          # shellcheck disable=SC2046 # one word per pid
          kill -TERM $(ip netns pids "$NV_NETNS-n$i") 2>/dev/null || true
        fi
      done
    done
    sleep 0.5
  done ;;
down)
  if daemon_pids slurmctld >/dev/null; then
    in_root_of scancel -u "$FFP_SSH_USER" 2>/dev/null || true
  fi
  stop_all
  rm -f "$NV_INFO"
  say "$NV_CLUSTER" "stopped"
  exit 0 ;;
*) die newer.sh "$usage" ;;
esac

# --- the root -----------------------------------------------------------------------------------------
# The daemons, and the shared libraries the portal's venv Python loads (it runs the worker on the
# nodes, bound in from the host: ctypes' libffi, bz2, lzma, sqlite3, ssl; onnxruntime's libgomp).
packages="slurmctld,slurmd,slurmdbd,slurm-client,munge,openssh-server,iproute2,procps"
packages+=",libffi8,libbz2-1.0,liblzma5,libsqlite3-0,libexpat1,zlib1g,libuuid1,libgomp1,libssl3t64"
packages+="${NV_EXTRA_PACKAGES:+,$NV_EXTRA_PACKAGES}"
stamp="$NV_SUITE mmdebstrap $packages"
if [ "$(cat "$R/.ffp-root" 2>/dev/null)" != "$stamp" ]; then
  command -v mmdebstrap >/dev/null || die "$NV_CLUSTER" "mmdebstrap is not installed (scripts/install-system.sh)"
  say "$NV_CLUSTER" "building its root: Debian $NV_SUITE with Slurm $1 (mmdebstrap, about a minute)"
  stop_all
  rm -rf "$R.new"
  install -d -m 755 "$(dirname "$R")"
  # mmdebstrap, not debootstrap: 40-60 s and 200-280 MB a root instead of 70-80 s and 310-480 MB
  # (apt downloads in parallel; no documentation, manual pages or translations are unpacked).
  # Check-Valid-Until off: a mirror's unstable may be a snapshot older than its Release file's
  # validity (seen: "expired (invalid since 25d)"); the packages are still checked by their signatures.
  mmdebstrap --variant=minbase --include="$packages" --aptopt='Acquire::Check-Valid-Until "false"' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' "$NV_SUITE" "$R.new" "$FFP_DEBIAN_MIRROR" \
    >"$FFP_LOG/mmdebstrap-$NV_SUITE.log" 2>&1 || die "$NV_CLUSTER" "mmdebstrap $NV_SUITE failed" "$FFP_LOG/mmdebstrap-$NV_SUITE.log"
  rm -rf "$R"
  mv "$R.new" "$R"
  echo "$stamp" >"$R/.ffp-root"
fi
version=$(chroot "$R" slurmctld -V | awk '{print $2}')
[ "${version%.*}" = "$1" ] || die "$NV_CLUSTER" "its root has Slurm $version, not $1"
printf '127.0.0.1 localhost\n%s %s\n' "$NV_CTLD_ADDR" "$NV_CTLD_HOST" >"$R/etc/hosts"
for i in 1 2; do printf '%s %s\n' "$(nv_node_addr "$i")" "$(nv_node "$i")" >>"$R/etc/hosts"; done
# The service user, with the host's uid and gid: job folders on the bound work root are its files.
uid=$(id -u "$FFP_SSH_USER") gid=$(id -g "$FFP_SSH_USER")
chroot "$R" getent group "$FFP_SSH_USER" >/dev/null || chroot "$R" groupadd -g "$gid" "$FFP_SSH_USER"
chroot "$R" id "$FFP_SSH_USER" >/dev/null 2>&1 ||
  chroot "$R" useradd -u "$uid" -g "$gid" -m -s /bin/bash "$FFP_SSH_USER"
chroot "$R" usermod -p '*' "$FFP_SSH_USER"  # unlocked for key logins (UsePAM no), no password
# Mount points of the binds (in_root), each folder on their way traversable (the service user runs
# the venv's Python under /root/.pyenv, say: the host's /root is 701, Debian's root has 700), and
# the folders the daemons write.
for d in "${binds[@]}" /run/mysqld /run/mariadbd /run/sshd /run/munge; do
  install -d -m 755 "$R$d"
  while [ "$d" != / ]; do d=$(dirname "$d"); chmod o+x "$R$d"; done
done
for d in /run/slurm /var/lib/slurm /var/lib/slurm/slurmctld /var/log/slurm; do
  install -d -o "$(chroot "$R" id -u slurm)" -g "$(chroot "$R" id -g slurm)" -m 755 "$R$d"
done
[ -d "$NV_WORK" ] || install -d -m 700 "$NV_WORK"
# The worker's container images (worker-image.sh): root's, readable by the service user only.
[ -d "$FFP_IMAGES" ] || install -d -m 750 -g "$FFP_SSH_USER" "$FFP_IMAGES"
chown "$FFP_SSH_USER:" "$NV_WORK"
chmod 700 "$NV_WORK"
# Apptainer (26.05's root) mounts a SIF image with squashfuse, unprivileged: /dev/fuse must be open to
# every user, as Debian's udev rule makes it on a real machine (this container has it root's alone).
if [[ ,$NV_EXTRA_PACKAGES, == *,squashfuse,* ]] && [ "$(stat -c %a /dev/fuse 2>/dev/null)" != 666 ]; then
  [ -c /dev/fuse ] || die "$NV_CLUSTER" "no /dev/fuse: Apptainer cannot mount its images"
  chmod 666 /dev/fuse
fi
# munge: a key of this cluster's own (its daemons and no other cluster's trust it).
if [ ! -s "$R/etc/munge/munge.key" ]; then
  dd if=/dev/urandom of="$R/etc/munge/munge.key" bs=1024 count=1 status=none
fi
chroot "$R" chown munge:munge /etc/munge/munge.key /run/munge
chmod 400 "$R/etc/munge/munge.key"

# --- configs -------------------------------------------------------------------------------------------
install -d -m 700 "$FFP_STATE/secrets"
pw_file=$FFP_STATE/secrets/slurmdbd-$NV_CLUSTER-db-password
[ -s "$pw_file" ] || (umask 077 && head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$pw_file")
db_password=$(<"$pw_file")
mysql --protocol=socket <<SQL || die mariadb "could not create database $NV_DB / user $NV_DB_USER"
CREATE DATABASE IF NOT EXISTS $NV_DB;
CREATE USER IF NOT EXISTS '$NV_DB_USER'@'localhost' IDENTIFIED BY '$db_password';
ALTER USER '$NV_DB_USER'@'localhost' IDENTIFIED BY '$db_password';
GRANT ALL PRIVILEGES ON $NV_DB.* TO '$NV_DB_USER'@'localhost';
SQL
# The GPU health check (HealthCheckProgram, run as root by each slurmd) and the power programs
# (ResumeProgram/SuspendProgram, run as slurm by slurmctld), root's, in the root: what Slurm runs as
# root is never a file of the checkout. The spool is where the power programs leave requests for `bmc`.
install -m 755 "$FFP_REPO/deploy/slurm/gpu-health.sh" "$R/usr/local/sbin/ffportal-gpu-health"
printf '# Written by scripts/cluster/newer.sh: no GPUs here, the fake ones are read.\nFAKE_GPU_DIR=%s\n' \
  /var/lib/ffportal-fake-gpus >"$R/etc/slurm/gpu-health.conf"
for program in resume suspend; do
  install -m 755 "$FFP_REPO/scripts/cluster/node-power.sh" "$R/usr/local/sbin/ffportal-node-$program"
done
install -d -m 700 -o "$(chroot "$R" id -u slurm)" -g "$(chroot "$R" id -g slurm)" "$R/var/lib/ffportal-power"
changed=0
node_lines="" gres_lines="" nodes=""
for i in 1 2; do
  node=$(nv_node "$i") gpu=$(nv_gpu "$i")
  install -d -m 755 "$R/var/lib/ffportal-fake-gpus/$node"
  touch "$R/var/lib/ffportal-fake-gpus/$node/nvidia0" "$R/var/lib/ffportal-fake-gpus/$node/nvidia1"
  node_lines+="$(node_line "$node" "$node" "$(nv_node_addr "$i")" "$NV_SLURMD_PORT" 2 "$NV_NODE_MEMORY_MB" "$gpu")"$'\n'
  gres_lines+="$(gres_line "$node" "$gpu" "/var/lib/ffportal-fake-gpus/$node")"$'\n'
  nodes+="${nodes:+,}$node"
done
render "$FFP_REPO/deploy/slurm/slurm.conf.in" "$R/etc/slurm/slurm.conf" 644 root:root \
  CLUSTER="$NV_CLUSTER" HOST="$NV_CTLD_HOST" SLURMD_TIMEOUT=30 CTLD_ADDR="$NV_CTLD_ADDR" CTLD_PORT="$NV_CTLD_PORT" \
  SLURMD_PORT="$NV_SLURMD_PORT" DBD_PORT="$NV_DBD_PORT" STATE_DIR=/var/lib/slurm SUFFIX= PER_NODE=-%n \
  NODES="$nodes" DEF_MEM_PER_CPU=$((NV_NODE_MEMORY_MB / 2)) NODE_LINES="${node_lines%$'\n'}" \
  NODE_CARE="$(node_care "$nodes")" && changed=1
render "$FFP_REPO/deploy/slurm/gres.conf.in" "$R/etc/slurm/gres.conf" 644 root:root \
  GRES_LINES="${gres_lines%$'\n'}" && changed=1
# No cgroups: like the host's cluster, processes are tracked through /proc (ProctrackType) and memory
# through jobacct_gather (OverMemoryKill); slurmd >= 24.05 otherwise insists on a cgroup mount,
# which `ip netns exec` hides (it mounts a /sys of the namespace's own).
printf '# Written by scripts/cluster/newer.sh.\nCgroupPlugin=disabled\n' >"$R/etc/slurm/cgroup.conf.new"
if ! cmp -s "$R/etc/slurm/cgroup.conf.new" "$R/etc/slurm/cgroup.conf"; then
  mv "$R/etc/slurm/cgroup.conf.new" "$R/etc/slurm/cgroup.conf"
  changed=1
else
  rm -f "$R/etc/slurm/cgroup.conf.new"
fi
# The folders the daemons see through their binds (this checkout, its Python, the work, storage and
# image folders). Daemons started from another checkout run jobs with paths this one's portal does not
# have: every task fails at once (exit 127, "No such file or directory"), so a change restarts them.
binds_file=$R/etc/slurm/ffportal-binds
if [ "$(cat "$binds_file" 2>/dev/null)" != "$(printf '%s\n' "${binds[@]}")" ]; then
  printf '%s\n' "${binds[@]}" >"$binds_file"
  changed=1
fi
dbd_changed=0
# Owned by the root's slurm user, named as this host names its uid and gid (what render compares).
host_name() { getent "$1" "$2" | cut -d: -f1 | grep . || echo UNKNOWN; }
dbd_owner="$(host_name passwd "$(chroot "$R" id -u slurm)"):$(host_name group "$(chroot "$R" id -g slurm)")"
render "$FFP_REPO/deploy/slurm/slurmdbd.conf.in" "$R/etc/slurm/slurmdbd.conf" 600 "$dbd_owner" \
  NODE="$NV_CTLD_HOST" DBD_PORT="$NV_DBD_PORT" DB_NAME="$NV_DB" DB_USER="$NV_DB_USER" DB_PASSWORD="$db_password" \
  && dbd_changed=1
if [ "$changed" = 1 ] || [ "$dbd_changed" = 1 ]; then
  say "$NV_CLUSTER" "config changed: (re)starting its daemons"
  stop_all
fi

# --- the daemons ---------------------------------------------------------------------------------------
if ! daemon_pids munged >/dev/null; then
  in_root_of runuser -u munge -- /usr/sbin/munged --force >>"$FFP_LOG/$NV_CLUSTER-munged.out" 2>&1 ||
    die "munged-$NV_CLUSTER" "did not start" "$FFP_LOG/$NV_CLUSTER-munged.out"
fi
wait_until "$FFP_TIMEOUT" "munged-$NV_CLUSTER" "$R/var/log/munge/munged.log" in_root_of bash -c 'munge -n | unmunge'
if ! daemon_pids slurmdbd >/dev/null; then
  in_root_of slurmdbd </dev/null >>"$FFP_LOG/$NV_CLUSTER-slurmdbd.out" 2>&1 ||
    die "slurmdbd-$NV_CLUSTER" "did not start" "$R/var/log/slurm/slurmdbd.log"
fi
wait_until $((FFP_TIMEOUT * 2)) "slurmdbd-$NV_CLUSTER" "$R/var/log/slurm/slurmdbd.log" sacctmgr -n -P list cluster
slurm_accounting "$NV_CLUSTER"

# The network: a bridge on the host ($NV_CTLD_ADDR, where slurmctld answers) and one namespace a node.
if ! ip link show "$NV_BRIDGE" >/dev/null 2>&1; then
  ip link add "$NV_BRIDGE" type bridge
  ip addr add "$NV_CTLD_ADDR/24" dev "$NV_BRIDGE"
fi
ip link set "$NV_BRIDGE" up
for i in 1 2; do
  ns=$NV_NETNS-n$i veth=${NV_BRIDGE}n$i
  if ! ip netns list | grep -qw "$ns"; then
    ip netns add "$ns"
    ip link add "$veth" type veth peer name eth0 netns "$ns"
    ip link set "$veth" master "$NV_BRIDGE" up
    ip -n "$ns" addr add "$(nv_node_addr "$i")/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" route add default via "$NV_CTLD_ADDR"
  fi
done

if ! daemon_pids slurmctld >/dev/null; then
  in_root_of slurmctld </dev/null >>"$FFP_LOG/$NV_CLUSTER-slurmctld.out" 2>&1 ||
    die "slurmctld-$NV_CLUSTER" "did not start" "$R/var/log/slurm/slurmctld.log"
fi
ctld_up() { in_root_of scontrol ping | grep -q 'is UP'; }
wait_until "$FFP_TIMEOUT" "slurmctld-$NV_CLUSTER" "$R/var/log/slurm/slurmctld.log" ctld_up
if ! bmc_pid >/dev/null; then
  install -d -m 755 "$(dirname "$bmc_pidfile")"
  setsid bash "$FFP_REPO/scripts/cluster/newer.sh" "$1" bmc </dev/null >>"$FFP_LOG/$NV_CLUSTER-bmc.log" 2>&1 &
  echo $! >"$bmc_pidfile"
fi
for i in 1 2; do
  node=$(nv_node "$i")
  install -d -m 755 "$R/var/lib/slurm/slurmd-$node"
  # A node asleep (power saving: "idle~") stays off until Slurm wakes it through the BMC.
  asleep=$(in_root_of sinfo -h -N -n "$node" -o '%t' | grep -c '[~%]$' || true)
  if [ "$asleep" = 0 ] && ! node_pid "$i" >/dev/null; then
    in_node "$i" slurmd -N "$node" </dev/null >>"$FFP_LOG/$NV_CLUSTER-slurmd-$node.out" 2>&1 ||
      die "slurmd-$node" "did not start" "$R/var/log/slurm/slurmd-$node.log"
  fi
done
# Both nodes answering and usable (a node is listed once per partition; "idle*" is not answering).
# An asleep node ("idle~") counts: Slurm wakes it when work comes.
nodes_up() { [ "$(in_root_of sinfo -h -N -o '%N %t' | awk '$2 ~ /^(idle|mix|alloc|comp|resv|plnd|maint)~?$/ {print $1}' | sort -u | wc -l)" -eq 2 ]; }
wait_until $((FFP_TIMEOUT * 2)) "$NV_CLUSTER" "$R/var/log/slurm/slurmctld.log" nodes_up

# --- the login node: an sshd for the service user, in the root, on 127.0.0.1 ------------------------------
ssh_dir=$R/etc/ssh/ffportal
install -d -m 700 "$ssh_dir"
[ -s "$ssh_dir/ssh_host_ed25519_key" ] ||
  ssh-keygen -q -t ed25519 -N '' -C "ffportal-sshd@$NV_CLUSTER" -f "$ssh_dir/ssh_host_ed25519_key"
home=$(chroot "$R" getent passwd "$FFP_SSH_USER" | cut -d: -f6)
install -d -o "$uid" -g "$gid" -m 700 "$R$home/.ssh"
install -o "$uid" -g "$gid" -m 600 "$FFP_SSH_KEY.pub" "$R$home/.ssh/authorized_keys"
sshd_changed=0
render "$FFP_REPO/deploy/ssh/sshd_config.in" "$ssh_dir/sshd_config" 600 root:root \
  LISTEN="127.0.0.1:$NV_SSH_PORT" HOST_KEY=/etc/ssh/ffportal/ssh_host_ed25519_key PID_FILE=/run/sshd-ffportal.pid \
  USER="$FFP_SSH_USER" AUTHORIZED_KEYS=.ssh/authorized_keys && sshd_changed=1
if [ "$sshd_changed" = 1 ]; then
  # shellcheck disable=SC2046
  stop_pid "sshd-$NV_CLUSTER" $(daemon_pids sshd || true)
fi
if ! daemon_pids sshd >/dev/null; then
  in_root_of /usr/sbin/sshd -f /etc/ssh/ffportal/sshd_config -E "/var/log/sshd-ffportal.log" </dev/null ||
    die "sshd-$NV_CLUSTER" "did not start on 127.0.0.1:$NV_SSH_PORT" "$R/var/log/sshd-ffportal.log"
fi
echo "[127.0.0.1]:$NV_SSH_PORT $(cut -d' ' -f1-2 "$ssh_dir/ssh_host_ed25519_key.pub")" >"$NV_KNOWN_HOSTS"
login_works() { FFP_SSH_PORT=$NV_SSH_PORT FFP_SSH_KNOWN_HOSTS=$NV_KNOWN_HOSTS ffp_ssh sinfo -h; }
wait_until "$FFP_TIMEOUT" "sshd-$NV_CLUSTER" "$R/var/log/sshd-ffportal.log" login_works

# --- what the portal needs to know (seed_local) --------------------------------------------------------------
install -d -m 755 "$(dirname "$NV_INFO")"
# Written whole, then renamed: seed_local may read it at any moment (a test run starting beside this).
cat >"$NV_INFO.new" <<JSON
{"version": "$1", "slurm": "$version", "cluster": "$NV_CLUSTER", "slug": "$NV_SLUG",
 "ssh_port": $NV_SSH_PORT, "known_hosts": "$NV_KNOWN_HOSTS", "work_root": "$NV_WORK",
 "gpu_types": ["$(nv_gpu 1)", "$(nv_gpu 2)"], "nodes": ["$(nv_node 1)", "$(nv_node 2)"],
 "boot_seconds": $(( ${FFP_NODE_BOOT_SECONDS:-10} + 25 )),
 "apptainer": $( [ -x "$R/usr/bin/apptainer" ] && echo true || echo false )}
JSON
mv "$NV_INFO.new" "$NV_INFO"
private_logs
say "$NV_CLUSTER" "Slurm $version ready in $(elapsed "$started")s (nodes $nodes; ssh $FFP_SSH_USER@127.0.0.1:$NV_SSH_PORT)"
