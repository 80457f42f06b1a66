# shellcheck shell=bash
# Helpers shared by up.sh, check.sh, down.sh and capture-samples.sh. Sourced after env.sh.
# shellcheck disable=SC2034 # the constants below are used by the scripts that source this file

SLURM_ETC=/etc/slurm          # where sinfo/sbatch look by default: no SLURM_CONF needed over SSH
SLURM_LOG=/var/log/slurm
SLURM_RUN=/run/slurm
FFP_LOG=$FFP_STATE/log
FFP_RUN=$FFP_STATE/run
FFP_OWNED=$FFP_STATE/run/owned   # one empty file per daemon up.sh started (down.sh stops only those)
FFP_TIMEOUT=${FFP_TIMEOUT:-30}   # seconds any one component may take to come up

NODE_NAME=$(hostname -s)

say() { printf '%-14s %s\n' "$1:" "$2"; }

# private_logs [FILE...]: the cluster's own log folder 711 (daemons that write as another user reach
# their file by name) and every file in it, and each FILE (created empty if missing), root's alone:
# they name users, jobs and addresses (sshd logs every login). Called before and after daemons start.
private_logs() {
  install -d -m 711 "$FFP_LOG"
  chmod 711 "$FFP_LOG"
  local f
  for f in "$@"; do [ -e "$f" ] || install -m 600 /dev/null "$f"; done
  find "$FFP_LOG" -maxdepth 1 -type f -exec chmod go-rwx {} +
}

# die COMPONENT MESSAGE [LOGFILE]: stop everything with a message naming the component, plus the
# tail of its log, so a CI failure says which daemon did not come up and why.
die() {
  printf '\nFAILED %s: %s\n' "$1" "$2" >&2
  if [ -n "${3:-}" ] && [ -r "$3" ]; then
    printf -- '--- last lines of %s ---\n' "$3" >&2
    tail -n 25 "$3" >&2
  fi
  exit 1
}

# wait_until SECONDS COMPONENT LOGFILE COMMAND...: poll COMMAND (quietly) every 0.2 s.
wait_until() {
  local limit=$1 component=$2 logfile=$3
  shift 3
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      die "$component" "not ready after ${limit}s (waited for: $*)" "$logfile"
    fi
    sleep 0.2
  done
}

# pid_alive PIDFILE [NAME]: the pid in PIDFILE is a live process (named NAME, if given).
pid_alive() {
  local pid
  [ -r "$1" ] || return 1
  pid=$(tr -dc '0-9' <"$1")
  [ -n "$pid" ] || return 1
  running "$pid" || return 1
  [ -z "${2:-}" ] || [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ]
}

# running PID: the process exists and is not a zombie. Daemons are reparented to PID 1, and a
# container's PID 1 may reap them late (here every ~2 s), while `kill -0` still succeeds on a zombie.
running() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

# pids_of NAME: live (non-zombie) processes named exactly NAME whose / is this host's; fails when
# there are none. A newer cluster's daemons (newer.sh) have the same names and another / (root_pids).
pids_of() { _pids_seeing "$1" "" "$(stat -Lc '%d:%i' /)"; }

# _pids_seeing NAME FILE ID: live processes named NAME for which FILE (under their own /) is the
# file whose device:inode is ID; fails when there are none.
_pids_seeing() {
  local pid found=1
  for pid in $(pgrep -x "$1"); do
    if running "$pid" && [ "$(stat -Lc '%d:%i' "/proc/$pid/root/$2" 2>/dev/null)" = "$3" ]; then
      echo "$pid"
      found=0
    fi
  done
  return $found
}

# stop_pid COMPONENT PID...: SIGTERM, then wait up to 20 s for the processes to go.
stop_pid() {
  local component=$1
  shift
  [ $# -gt 0 ] || return 0
  kill "$@" 2>/dev/null || true
  local deadline=$((SECONDS + 20)) pid
  for pid in "$@"; do
    while running "$pid"; do
      [ "$SECONDS" -lt "$deadline" ] || die "$component" "pid $pid ignored SIGTERM for 20s"
      sleep 0.2
    done
  done
}

# render TEMPLATE DEST MODE OWNER:GROUP KEY=VALUE...: replace @KEY@ placeholders and install the
# result only when its content, mode or owner differ. Returns 0 when DEST changed, 1 when not,
# so callers restart a daemon only after a real change.
render() {
  local tpl=$1 dest=$2 mode=$3 owner=$4 kv text tmp
  shift 4
  text=$(<"$tpl")
  for kv in "$@"; do
    # Quoted replacement: bash 5.2 would otherwise expand '&' in values to the matched text.
    text=${text//"@${kv%%=*}@"/"${kv#*=}"}
  done
  if [[ $text =~ @[A-Z_]+@ ]]; then
    die render "$tpl: placeholder ${BASH_REMATCH[0]} has no value"
  fi
  if [ -f "$dest" ] && [ "$(cat "$dest")" = "$text" ] &&
    [ "$(stat -c '%a %U:%G' "$dest")" = "$mode $owner" ]; then
    return 1
  fi
  tmp=$(mktemp "$dest.XXXXXX")
  printf '%s\n' "$text" >"$tmp"
  chown "$owner" "$tmp"
  chmod "$mode" "$tmp"
  mv -f "$tmp" "$dest"
  return 0
}

# node_line NAME HOSTNAME ADDR PORT CPUS MEMORY_MB GPU_TYPE: one NodeName line of slurm.conf, with two GPUs.
node_line() {
  echo "NodeName=$1 NodeHostname=$2 NodeAddr=$3 Port=$4 CPUs=$5 RealMemory=$6 Gres=gpu:$7:2 State=UNKNOWN"
}

# node_care NODES: the newer clusters' slurm.conf lines for GPU health and power saving (the host's
# one-node clusters have neither: draining or powering down their only node would stop everything).
node_care() {
  cat <<EOF
# GPU health: every slurmd runs the check every 10 s (also on idle and busy nodes); a fault drains the
# node with the fault as its reason, and the check resumes the node once it passes (docs/clusters.md).
HealthCheckProgram=/usr/local/sbin/ffportal-gpu-health
HealthCheckInterval=10
HealthCheckNodeState=ANY
# Power saving: a node idle for SuspendTime is powered off (SuspendProgram), and powered on
# (ResumeProgram) when work or a booking needs it; it must answer within ResumeTimeout. Here the
# programs ask a stand-in BMC (newer.sh bmc) to stop or start the node's slurmd. Every node is in
# SuspendExcNodes, so none sleeps by itself until an admin (make up; a test) lets it:
# scontrol update SuspendExcNodes=<the nodes to keep awake>. KeepPowerSaveSettings: a reconfigure keeps that.
ResumeProgram=/usr/local/sbin/ffportal-node-resume
SuspendProgram=/usr/local/sbin/ffportal-node-suspend
SuspendTime=60
SuspendExcNodes=$1
ResumeTimeout=90
SuspendTimeout=15
SuspendExcStates=RESERVED
ReconfigFlags=KeepPowerSaveSettings
EOF
}

# gres_line NODE GPU_TYPE DIR: the node's two fake GPUs in gres.conf (DIR/nvidia0 and DIR/nvidia1).
gres_line() {
  echo "NodeName=$1 Name=gpu Type=$2 File=$3/nvidia[0-1]"
}

# ffp_ssh 'SHELL COMMAND': run a command line on the cluster exactly as the portal does: the service user's
# key, the pinned host key, no prompts. A control socket makes repeated calls cheap.
ffp_ssh() {
  ssh -i "$FFP_SSH_KEY" -p "$FFP_SSH_PORT" \
    -o IdentitiesOnly=yes -o BatchMode=yes -o ConnectTimeout=5 \
    -o UserKnownHostsFile="$FFP_SSH_KNOWN_HOSTS" -o GlobalKnownHostsFile=/dev/null \
    -o StrictHostKeyChecking=yes \
    -o ControlMaster=auto -o ControlPersist=20s -o ControlPath="$FFP_RUN/ssh-%C" \
    "$FFP_SSH_USER@$FFP_SSH_HOST" "$@"
}

# ffp_run ARG...: like ffp_ssh, but each argument arrives as one word (ssh itself joins its
# arguments with spaces for the remote shell, so `--wrap 'sleep 60'` would split).
ffp_run() {
  ffp_ssh "$(printf '%q ' "$@")"
}

# sacct_state JOBID: the job's state as accounting has it (first word: "CANCELLED by 0" -> CANCELLED).
sacct_state() {
  ffp_ssh sacct -n -X -P -j "$1" -o State 2>/dev/null | head -n1 | cut -d' ' -f1
}

# untraversable PATH: print the first directory on the way to PATH that others cannot enter
# (the service user is "others" for root-owned trees like /root/.pyenv or a clone under /root).
untraversable() {
  local d=/ part
  local IFS=/
  for part in $1; do
    [ -n "$part" ] || continue
    d=${d%/}/$part
    [ -d "$d" ] || break
    if [ $((8#$(stat -c %a "$d") & 1)) -eq 0 ]; then
      echo "$d"
      return 0
    fi
  done
  return 1
}

# elapsed START: seconds since START (an $EPOCHREALTIME value), one decimal.
elapsed() {
  awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'
}

# The QOS levels the portal submits with (jobs.job.priority maps templates and groups to them):
# NAME|PRIORITY|QOS IT PREEMPTS, as `sacctmgr -P show qos format=name,priority,preempt` prints them.
FFP_QOS_LEVELS=("normal|0|" "high|100|normal" "urgent|1000|high,normal")
FFP_QOS_NAMES=normal,high,urgent

# slurm_accounting CLUSTER: make slurmdbd know CLUSTER, the account, the service user and root
# (allowed every QOS of FFP_QOS_LEVELS, default normal), the QOS levels themselves (global to the
# database) and the service user's AdminLevel. Only what differs is changed, so a warm run is two
# sacctmgr reads. Run it before that cluster's slurmctld starts: it registers with a cluster the
# database already knows, and with AccountingStorageEnforce=qos a job needs its QOS granted.
slurm_accounting() {
  local cluster=$1 assocs qos_now level u name prio preempt
  assocs=$(sacctmgr -n -P list assoc format=cluster,account,user,qos,defaultqos) ||
    die sacctmgr "no answer from slurmdbd"
  qos_now=$(sacctmgr -n -P show qos format=name,priority,preempt) || die sacctmgr "show qos failed"
  grep -q "^$cluster|root||" <<<"$assocs" ||
    sacctmgr -i add cluster "$cluster" >/dev/null || die sacctmgr "add cluster $cluster failed"
  grep -q "^$cluster|$FFP_SLURM_ACCOUNT||" <<<"$assocs" ||
    sacctmgr -i add account "$FFP_SLURM_ACCOUNT" cluster="$cluster" \
      description="FaceFusion Portal" organization=ffportal >/dev/null ||
    die sacctmgr "add account $FFP_SLURM_ACCOUNT on $cluster failed"
  for level in "${FFP_QOS_LEVELS[@]}"; do
    grep -qxF "$level" <<<"$qos_now" && continue
    IFS='|' read -r name prio preempt <<<"$level"
    grep -q "^$name|" <<<"$qos_now" || sacctmgr -i add qos "$name" >/dev/null || die sacctmgr "add qos $name failed"
    sacctmgr -i modify qos where name="$name" set priority="$prio" ${preempt:+preempt="$preempt"} >/dev/null ||
      die sacctmgr "modify qos $name failed"
    say qos "$name: priority $prio${preempt:+, preempts $preempt}"
  done
  for u in "$FFP_SSH_USER" root; do
    grep -q "^$cluster|$FFP_SLURM_ACCOUNT|$u|" <<<"$assocs" ||
      sacctmgr -i add user "$u" account="$FFP_SLURM_ACCOUNT" cluster="$cluster" >/dev/null ||
      die sacctmgr "add user $u on $cluster failed"
    # sacctmgr lists a QOS set sorted by name.
    grep -qxF "$cluster|$FFP_SLURM_ACCOUNT|$u|high,normal,urgent|normal" <<<"$assocs" ||
      sacctmgr -i modify user where name="$u" cluster="$cluster" account="$FFP_SLURM_ACCOUNT" \
        set qos="$FFP_QOS_NAMES" defaultqos=normal >/dev/null ||
      die sacctmgr "granting QOS $FFP_QOS_NAMES to $u on $cluster failed"
  done
  # Bookings become Slurm reservations (scontrol create reservation), which Slurm allows only to
  # root, SlurmUser or a user with AdminLevel Operator or Admin; an account coordinator may not.
  # Operator is the smaller grant, yet it also lets the service user cancel, hold and update other
  # users' jobs and add accounts (docs/local-cluster.md, "Reservation rights": what a real site
  # grants and why).
  [ "$(sacctmgr -n -P show user "$FFP_SSH_USER" format=adminlevel)" = Operator ] ||
    sacctmgr -i modify user "$FFP_SSH_USER" set adminlevel=Operator >/dev/null ||
    die sacctmgr "setting AdminLevel=Operator for $FFP_SSH_USER failed"
}

# slurm_pids NAME [CONF]: live processes named NAME started with `-f CONF`; without CONF, those
# started without -f (the first cluster, /etc/slurm). The second cluster's daemons (second.sh) run
# on this host under the same names, so pids_of alone would mix the two clusters up.
slurm_pids() {
  local pid args found=1
  for pid in $(pids_of "$1"); do
    args=" $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) " || continue
    if [ -n "${2:-}" ]; then
      [[ $args == *" -f $2 "* ]] || continue
    else
      [[ $args != *" -f "* ]] || continue
    fi
    echo "$pid"
    found=0
  done
  return $found
}

# ffp_ssh2 / ffp_run2: ffp_ssh / ffp_run against the second cluster's sshd (its own port and pinned key).
ffp_ssh2() { FFP_SSH_PORT=$FFP_SECOND_SSH_PORT FFP_SSH_KNOWN_HOSTS=$FFP_SECOND_SSH_KNOWN_HOSTS ffp_ssh "$@"; }
ffp_run2() { ffp_ssh2 "$(printf '%q ' "$@")"; }

# --- newer clusters (newer.sh): Slurm 24.11 and 26.05, each in a Debian root of its own --------------------

# newer_env VERSION: the NV_* names, ports, addresses and folders of that newer cluster.
newer_env() {
  case $1 in
    24.11) NV_SUITE=trixie NV_CLUSTER=ffp2411 NV_SLUG=slurm-24-11 NV_BASE_PORT=6910 NV_SSH_PORT=2224 NV_NET=10.24.11
           NV_EXTRA_PACKAGES= ;;
    26.05) NV_SUITE=sid NV_CLUSTER=ffp2605 NV_SLUG=slurm-26-05 NV_BASE_PORT=6920 NV_SSH_PORT=2225 NV_NET=10.26.5
           NV_EXTRA_PACKAGES=apptainer,squashfuse,fuse3 ;;
    *) die newer "no newer cluster for Slurm $1 (24.11 or 26.05)" ;;
  esac
  NV_CTLD_PORT=$((NV_BASE_PORT + 7)) NV_SLURMD_PORT=$((NV_BASE_PORT + 8)) NV_DBD_PORT=$((NV_BASE_PORT + 9))
  NV_ROOT=$FFP_STATE/roots/$NV_SUITE
  NV_WORK=/srv/ffportal/work-$NV_CLUSTER
  NV_KNOWN_HOSTS=$FFP_STATE/ssh/known_hosts-$NV_CLUSTER
  NV_INFO=$FFP_STATE/clusters/$NV_CLUSTER.json
  NV_DB=slurm_acct_db_$NV_CLUSTER NV_DB_USER=slurm_$NV_CLUSTER
  NV_BRIDGE=ffpbr${NV_CLUSTER#ffp} NV_NETNS=$NV_CLUSTER
  # slurmctld and slurmdbd run in the host's network namespace and accept only their own host name.
  NV_CTLD_ADDR=$NV_NET.1 NV_CTLD_HOST=$NODE_NAME
  NV_NODE_MEMORY_MB=${FFP_NEWER_NODE_MEMORY_MB:-2048}
  # The venv's Python lives outside the venv (pyenv, or /usr): its installation is bound in too.
  NV_PYTHON_HOME=$(dirname "$(dirname "$(realpath -m "$FFP_PYTHON")")")
}
nv_node() { echo "$NV_CLUSTER-n$1"; }
nv_node_addr() { echo "$NV_NET.1$1"; }
nv_gpu() { [ "$1" = 1 ] && echo h200 || echo a100; }

# in_root ROOT [BIND...] -- CMD...: run CMD with ROOT as its / : a mount namespace of its own, ROOT
# bound onto itself, /proc, /dev, /sys, /run/mysqld and each BIND (a host path, bound at the same
# path inside), then pivot_root. Not chroot: the kernel refuses user namespaces (Apptainer's) to a
# chrooted process. A daemon started this way keeps that namespace; the files are the same ones.
in_root() {
  local root=$1 binds=()
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do binds+=("$1"); shift; done
  shift
  unshare --mount --propagation private --fork bash -c '
    set -e
    root=$1; n=$2; shift 2
    mount --rbind "$root" "$root"
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    mount --rbind /sys "$root/sys"
    # The host'"'"'s MariaDB socket, where each Debian'"'"'s client library looks for it (sid: /run/mariadbd).
    for d in /run/mysqld /run/mariadbd; do
      [ ! -d /run/mysqld ] || [ ! -d "$root$d" ] || mount --bind /run/mysqld "$root$d"
    done
    for _ in $(seq 1 "$n"); do mount --rbind "$1" "$root$1"; shift; done
    mkdir -p "$root/.oldroot"
    cd "$root"
    pivot_root . .oldroot
    umount -l /.oldroot
    cd /
    exec "$@"' in_root "$root" "${#binds[@]}" "${binds[@]}" "$@"
}

# root_pids ROOT NAME: live processes named NAME whose / is ROOT (started by in_root).
root_pids() {
  local want
  want=$(stat -c '%d:%i' "$1/.ffp-root" 2>/dev/null) || return 1
  _pids_seeing "$2" .ffp-root "$want"
}
