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

# pids_of NAME: live (non-zombie) processes named exactly NAME; fails when there are none.
pids_of() {
  local pid found=1
  for pid in $(pgrep -x "$1"); do
    if running "$pid"; then
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
