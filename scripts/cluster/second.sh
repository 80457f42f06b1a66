#!/usr/bin/env bash
# The SECOND local Slurm cluster, on the same host as the first (up.sh):
#   second.sh up     start it (idempotent; a config change restarts only its own daemons)
#   second.sh down   cancel the service user's jobs on it, stop its slurmctld, slurmd and sshd
# Its own ClusterName ($FFP_SECOND_CLUSTER), slurmctld/slurmd ports, state, spool, pid and log
# files, config directory (dirname $FFP_SECOND_SLURM_CONF) and two fake GPUs of another type
# ($FFP_SECOND_GPU_GRES). It shares munge and slurmdbd with the first cluster, so up.sh runs it
# last (FFP_SECOND=0 skips it). The portal reaches it as another cluster profile: a second sshd on
# 127.0.0.1:$FFP_SECOND_SSH_PORT, same service user and key, whose sessions get SLURM_CONF set, so
# every sbatch/squeue/sacct there talks to this cluster. Needs root.
set -euo pipefail
# shellcheck source=scripts/cluster/env.sh
. "$(dirname "$0")/env.sh"
# shellcheck source=scripts/cluster/lib.sh
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || die second.sh "must run as root"
started=$EPOCHREALTIME
conf=$FFP_SECOND_SLURM_CONF
conf_dir=$(dirname "$conf")
state_dir=/var/lib/slurm-second
gpu_type=${FFP_SECOND_GPU_GRES#*:}
node=$NODE_NAME-$gpu_type            # another NodeName on the same host (NodeHostname=$NODE_NAME)
ssh_dir=$FFP_STATE/ssh-second
sshd_pid=$FFP_RUN/sshd-second.pid
export SLURM_CONF=$conf              # every Slurm command below talks to this cluster

stop_all() {
  # shellcheck disable=SC2046 # one word per pid
  stop_pid slurmd $(slurm_pids slurmd "$conf")
  # shellcheck disable=SC2046
  stop_pid slurmctld $(slurm_pids slurmctld "$conf")
}

case ${1:-} in
up) ;;
down)
  if slurm_pids slurmctld "$conf" >/dev/null && scontrol ping 2>/dev/null | grep -q 'is UP'; then
    scancel -u "$FFP_SSH_USER" 2>/dev/null || true
    say second "cancelled $FFP_SSH_USER's jobs on $FFP_SECOND_CLUSTER"
  fi
  stop_all
  if pid_alive "$sshd_pid" sshd; then stop_pid sshd "$(<"$sshd_pid")"; fi
  say second "$FFP_SECOND_CLUSTER stopped"
  exit 0
  ;;
*) die second.sh "usage: second.sh up|down" ;;
esac

# --- configs ------------------------------------------------------------------------------------------
fake_gpu_dir=$FFP_STATE/fake-gpus-second
install -d -m 755 "$fake_gpu_dir" "$conf_dir"
touch "$fake_gpu_dir/nvidia0" "$fake_gpu_dir/nvidia1"
for d in "$SLURM_RUN" "$state_dir" "$state_dir/slurmctld" "$state_dir/slurmd" "$SLURM_LOG"; do
  install -d -o slurm -g slurm -m 755 "$d"
done
# Its work root: job folders hold people's faces, so the service user's alone (as $FFP_WORK).
[ -d "$FFP_SECOND_WORK" ] || install -d -m 700 "$FFP_SECOND_WORK"
chown "$FFP_SSH_USER:" "$FFP_SECOND_WORK"
chmod 700 "$FFP_SECOND_WORK"

changed=0
# The first cluster's templates, with this cluster's name, ports, files and node. Its node's memory
# comes out of the reserve (at least 1 GiB) up.sh leaves the OS on the first node, so the two nodes
# together never claim more than exists; both share the CPUs (CPUs=2: jobs here are tiny).
render "$FFP_REPO/deploy/slurm/slurm.conf.in" "$conf" 644 root:root \
  CLUSTER="$FFP_SECOND_CLUSTER" HOST="$NODE_NAME" SLURMD_TIMEOUT=300 CTLD_ADDR=127.0.0.1 CTLD_PORT="$FFP_SECOND_CTLD_PORT" \
  SLURMD_PORT="$FFP_SECOND_SLURMD_PORT" DBD_PORT=6819 STATE_DIR="$state_dir" SUFFIX=-second PER_NODE= NODES="$node" \
  DEF_MEM_PER_CPU=$((FFP_SECOND_MEMORY_MB / 2)) \
  NODE_LINES="$(node_line "$node" "$NODE_NAME" 127.0.0.1 "$FFP_SECOND_SLURMD_PORT" 2 "$FFP_SECOND_MEMORY_MB" "$gpu_type")" \
  NODE_CARE= \
  && changed=1
# slurmd reads gres.conf from the directory of its slurm.conf.
render "$FFP_REPO/deploy/slurm/gres.conf.in" "$conf_dir/gres.conf" 644 root:root \
  GRES_LINES="$(gres_line "$node" "$gpu_type" "$fake_gpu_dir")" && changed=1

# --- accounting (shared slurmdbd), then the daemons ----------------------------------------------------
slurm_accounting "$FFP_SECOND_CLUSTER"
if [ "$changed" = 1 ] && { slurm_pids slurmctld "$conf" || slurm_pids slurmd "$conf"; } >/dev/null; then
  say second "config changed: restarting its slurmctld and slurmd"
  stop_all
fi
if ! slurm_pids slurmctld "$conf" >/dev/null; then
  slurmctld -f "$conf" </dev/null >>"$FFP_LOG/slurmctld-second.out" 2>&1 ||
    die slurmctld-second "did not start" "$SLURM_LOG/slurmctld-second.log"
fi
wait_until "$FFP_TIMEOUT" slurmctld-second "$SLURM_LOG/slurmctld-second.log" bash -c 'scontrol ping | grep -q "is UP"'
if ! slurm_pids slurmd "$conf" >/dev/null; then
  slurmd -f "$conf" </dev/null >>"$FFP_LOG/slurmd-second.out" 2>&1 ||
    die slurmd-second "did not start" "$SLURM_LOG/slurmd-second.log"
fi
node_state() { sinfo -h -N -n "$node" -o %t 2>/dev/null | head -n1; }
if [[ $(node_state) =~ ^(down|drain|drng|fail) ]] && slurm_pids slurmd "$conf" >/dev/null; then
  sleep 1
  scontrol update nodename="$node" state=resume 2>/dev/null || true
fi
# "resv", "plnd", "maint": held by a GPU booking (a Slurm reservation) or planned for a waiting job, and up
node_usable() { [[ $(node_state) =~ ^(idle|mix|alloc|comp|resv|plnd|maint)$ ]]; }
wait_until "$FFP_TIMEOUT" slurmd-second "$SLURM_LOG/slurmd-second.log" node_usable

# --- its sshd: the first one's config plus SLURM_CONF for every session, its own host key ---------------
install -d -m 700 "$ssh_dir"
[ -s "$ssh_dir/ssh_host_ed25519_key" ] ||
  ssh-keygen -q -t ed25519 -N '' -C "ffportal-sshd-second@$NODE_NAME" -f "$ssh_dir/ssh_host_ed25519_key"
printf '%s\n' "[$FFP_SSH_HOST]:$FFP_SECOND_SSH_PORT $(cut -d' ' -f1,2 "$ssh_dir/ssh_host_ed25519_key.pub")" \
  >"$FFP_SECOND_SSH_KNOWN_HOSTS.tmp"
if cmp -s "$FFP_SECOND_SSH_KNOWN_HOSTS.tmp" "$FFP_SECOND_SSH_KNOWN_HOSTS"; then
  rm -f "$FFP_SECOND_SSH_KNOWN_HOSTS.tmp"
else
  mv -f "$FFP_SECOND_SSH_KNOWN_HOSTS.tmp" "$FFP_SECOND_SSH_KNOWN_HOSTS"
fi
chmod 644 "$FFP_SECOND_SSH_KNOWN_HOSTS"
template=$(mktemp)
trap 'rm -f "$template"' EXIT
{
  cat "$FFP_REPO/deploy/ssh/sshd_config.in"
  echo "# This sshd logs in to the second cluster: $FFP_SECOND_CLUSTER."
  echo 'SetEnv SLURM_CONF=@SLURM_CONF@'
} >"$template"
sshd_conf=$ssh_dir/sshd_config
sshd_changed=0
render "$template" "$sshd_conf" 600 root:root \
  LISTEN="$FFP_SSH_HOST:$FFP_SECOND_SSH_PORT" HOST_KEY="$ssh_dir/ssh_host_ed25519_key" PID_FILE="$sshd_pid" \
  USER="$FFP_SSH_USER" AUTHORIZED_KEYS="$(getent passwd "$FFP_SSH_USER" | cut -d: -f6)/.ssh/authorized_keys" \
  SLURM_CONF="$conf" && sshd_changed=1
/usr/sbin/sshd -t -f "$sshd_conf" 2>>"$FFP_LOG/sshd-second.log" ||
  die sshd-second "sshd -t rejects $sshd_conf" "$FFP_LOG/sshd-second.log"
if pid_alive "$sshd_pid" sshd && [ "$sshd_changed" = 1 ]; then stop_pid sshd "$(<"$sshd_pid")"; fi
if ! pid_alive "$sshd_pid" sshd; then
  /usr/sbin/sshd -f "$sshd_conf" -E "$FFP_LOG/sshd-second.log" </dev/null ||
    die sshd-second "did not start on $FFP_SSH_HOST:$FFP_SECOND_SSH_PORT" "$FFP_LOG/sshd-second.log"
  wait_until "$FFP_TIMEOUT" sshd-second "$FFP_LOG/sshd-second.log" ffp_ssh2 true
fi
# The proof: over that login, Slurm answers as the second cluster.
login=$(ffp_ssh2 'scontrol show config | grep -E "^ClusterName"' 2>&1) ||
  die sshd-second "pinned-key login to $FFP_SSH_HOST:$FFP_SECOND_SSH_PORT failed: $login" "$FFP_LOG/sshd-second.log"
[[ $login == *"= $FFP_SECOND_CLUSTER" ]] ||
  die sshd-second "a login on port $FFP_SECOND_SSH_PORT sees '$login', not $FFP_SECOND_CLUSTER"
what="node $node $(node_state), gpu:$gpu_type:2, ssh :$FFP_SECOND_SSH_PORT"
say second "cluster $FFP_SECOND_CLUSTER ready in $(elapsed "$started")s ($what)"
