#!/usr/bin/env bash
# Stops what up.sh started, leaving all state on disk (accounting database, keys, configs, redis
# data): the next up.sh brings the same cluster back. The service user's jobs are cancelled first.
# Slurm's daemons are always stopped (their configs are ours); munge, MariaDB, sshd and Redis only
# when up.sh started them (a marker in $FFP_STATE/run/owned), so daemons someone else runs stay.
set -euo pipefail
# shellcheck source=scripts/cluster/env.sh
. "$(dirname "$0")/env.sh"
# shellcheck source=scripts/cluster/lib.sh
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || die down.sh "must run as root"

if slurm_pids slurmctld >/dev/null && scontrol ping 2>/dev/null | grep -q 'is UP'; then
  scancel -u "$FFP_SSH_USER" 2>/dev/null || true
  deadline=$((SECONDS + 15))
  while [ -n "$(squeue -h -u "$FFP_SSH_USER" -t PD,R,CG -o %i 2>/dev/null)" ] && [ "$SECONDS" -lt "$deadline" ]; do
    sleep 0.5
  done
  say jobs "cancelled $FFP_SSH_USER's jobs"
fi

# The second cluster first: its daemons share names with the first's (second.sh).
bash "$(dirname "$0")/second.sh" down

# stop NAME PID...: stop and report.
stop() {
  local name=$1
  shift
  if [ $# -gt 0 ]; then
    stop_pid "$name" "$@"
    say "$name" stopped
  fi
}
# shellcheck disable=SC2046 # one word per pid
stop slurmd $(pids_of slurmd)
# shellcheck disable=SC2046
stop slurmctld $(pids_of slurmctld)
# shellcheck disable=SC2046
stop slurmdbd $(pids_of slurmdbd)

if [ -e "$FFP_OWNED/sshd" ]; then
  # The control master of check.sh / ffp_ssh would otherwise linger with a dead connection.
  for sock in "$FFP_RUN"/ssh-*; do
    if [ -S "$sock" ]; then ssh -o ControlPath="$sock" -O exit dummy 2>/dev/null || true; fi
  done
  if pid_alive "$FFP_RUN/sshd.pid" sshd; then stop sshd "$(<"$FFP_RUN/sshd.pid")"; fi
  rm -f "$FFP_OWNED/sshd"
fi

if [ -e "$FFP_OWNED/redis" ]; then
  if pid_alive "$FFP_STATE/redis/redis.pid" redis-server; then stop redis "$(<"$FFP_STATE/redis/redis.pid")"; fi
  rm -f "$FFP_OWNED/redis"
fi

if [ -e "$FFP_OWNED/mariadb" ]; then
  if mysqladmin --protocol=socket ping >/dev/null 2>&1; then
    mysqladmin --protocol=socket shutdown || die mariadb "mysqladmin shutdown failed"
    say mariadb stopped
  fi
  rm -f "$FFP_OWNED/mariadb"
fi

if [ -e "$FFP_OWNED/munge" ]; then
  if pid_alive /run/munge/munged.pid munged; then stop munge "$(</run/munge/munged.pid)"; fi
  rm -f "$FFP_OWNED/munge"
fi
say down "done (state kept in $FFP_STATE, /var/lib/mysql, /var/lib/slurm)"
