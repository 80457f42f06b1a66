#!/usr/bin/env bash
# Checks the local cluster that up.sh brings up, one line per component:
#   OK|FAIL  component  detail
# Every check runs even after a failure; the exit status is non-zero when any line is FAIL.
# The Slurm checks that matter to the portal run the way the portal does: over SSH as the service
# user with the pinned host key (a real sbatch, then sacct until the job is COMPLETED).
set -uo pipefail
# shellcheck source=scripts/cluster/env.sh
. "$(dirname "$0")/env.sh"
# shellcheck source=scripts/cluster/lib.sh
. "$(dirname "$0")/lib.sh"

failures=0
report() { # report OK|FAIL COMPONENT DETAIL
  printf '%-4s %-14s %s\n' "$1" "$2" "$3"
  [ "$1" = OK ] || failures=$((failures + 1))
}
check() { # check COMPONENT OK-DETAIL FAIL-DETAIL COMMAND...
  local component=$1 ok=$2 fail=$3
  shift 3
  if "$@" >/dev/null 2>&1; then report OK "$component" "$ok"; else report FAIL "$component" "$fail"; fi
}

check munge "credential round trip (munge -n | unmunge)" "munge -n | unmunge fails: is munged running?" \
  bash -c 'munge -n | unmunge'

check mariadb "slurm_acct_db present" "no answer or no slurm_acct_db (mysql as root over the socket)" \
  mysql --protocol=socket -N -e 'USE slurm_acct_db'

if cluster=$(sacctmgr -n -P list cluster format=cluster 2>/dev/null) && grep -qxF "$FFP_SLURM_CLUSTER" <<<"$cluster"; then
  report OK slurmdbd "answers sacctmgr; cluster $FFP_SLURM_CLUSTER registered"
else
  report FAIL slurmdbd "sacctmgr gets no answer or cluster $FFP_SLURM_CLUSTER is missing ($SLURM_LOG/slurmdbd.log)"
fi

if scontrol ping 2>/dev/null | grep -q 'is UP'; then
  report OK slurmctld "$(scontrol ping 2>/dev/null | head -n1)"
else
  report FAIL slurmctld "scontrol ping: not UP ($SLURM_LOG/slurmctld.log)"
fi

node=$(sinfo -h -N -n "$NODE_NAME" -o '%t %G' 2>/dev/null | head -n1)
if [[ $node =~ ^(idle|mix|alloc|comp)\  ]] && pids_of slurmd >/dev/null; then
  report OK slurmd "node $NODE_NAME ${node%% *}, ${node#* }"
else
  report FAIL slurmd "node $NODE_NAME is '${node:-unknown}' (want idle; $SLURM_LOG/slurmd.log)"
fi

# sshd first: the job check below goes through it.
if login=$(ffp_ssh sinfo -h -o %P 2>&1); then
  report OK sshd "$FFP_SSH_USER@$FFP_SSH_HOST:$FFP_SSH_PORT pinned-key login, sinfo partitions: ${login//$'\n'/ }"
  ssh_ok=1
else
  report FAIL sshd "pinned-key login failed: $(tail -n1 <<<"$login") ($FFP_LOG/sshd.log)"
  ssh_ok=0
fi

# A tiny real job through the whole chain: sbatch over SSH, gres scheduling, slurmd running it as
# the service user, accounting recording it.
if [ "$ssh_ok" = 1 ]; then
  if job=$(ffp_run sbatch --parsable --wrap hostname --time=1 --gres="$FFP_GPU_GRES:1" \
    -J ffp-check -o "$FFP_WORK/check-%j.out" 2>&1); then
    job=${job%%;*}
    state=
    deadline=$((SECONDS + 30))
    while [ "$SECONDS" -lt "$deadline" ]; do
      state=$(sacct_state "$job")
      [[ $state =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT|OUT_OF_MEMORY|NODE_FAIL)$ ]] && break
      sleep 0.5
    done
    out=$(ffp_ssh cat "$FFP_WORK/check-$job.out" 2>/dev/null)
    if [ "$state" = COMPLETED ] && [ "$out" = "$NODE_NAME" ]; then
      report OK sacct "job $job (--gres=$FFP_GPU_GRES:1) COMPLETED on $out, seen by sacct"
      ffp_ssh rm -f "$FFP_WORK/check-$job.out"
    else
      report FAIL sacct "job $job: sacct state '${state:-none}' after 30s, output '$out'"
    fi
  else
    report FAIL sacct "sbatch over ssh failed: $job"
  fi
else
  report FAIL sacct "skipped: no SSH login"
fi

redis_auth=$(cat "$FFP_REDIS_PASSWORD_FILE" 2>/dev/null || true)
if [ "$(redis-cli -h 127.0.0.1 -p "$FFP_REDIS_PORT" ping 2>/dev/null)" = PONG ]; then
  report FAIL redis "answers without a password on 127.0.0.1:$FFP_REDIS_PORT (run up.sh: it configures the login)"
elif [ "$(REDISCLI_AUTH=$redis_auth redis-cli --no-auth-warning --user "$FFP_REDIS_USER" -h 127.0.0.1 \
          -p "$FFP_REDIS_PORT" ping 2>/dev/null)" = PONG ]; then
  report OK redis "PONG on 127.0.0.1:$FFP_REDIS_PORT as $FFP_REDIS_USER (anonymous access refused)"
else
  report FAIL redis "no PONG on 127.0.0.1:$FFP_REDIS_PORT for $FFP_REDIS_USER"
fi

# The worker runs as the service user from the repo's venv: every directory on the way to the
# repo and to the interpreter the venv links to must be enterable by "others".
blocked=
for target in "$FFP_REPO/worker" "$(dirname "$FFP_PYTHON")" "$(realpath "$FFP_PYTHON" 2>/dev/null)"; do
  if dir=$(untraversable "$target"); then
    blocked="$dir is not traversable by $FFP_SSH_USER (mode $(stat -c %A "$dir"); needed for $target;"
    blocked+=" up.sh adds o+x unless FFP_FIX_PERMS=0)"
    break
  fi
done
if [ -n "$blocked" ]; then
  report FAIL worker-python "$blocked"
elif [ "$ssh_ok" = 1 ] && ffp_ssh "cd '$FFP_REPO' && '$FFP_PYTHON' -m worker --help" >/dev/null 2>&1; then
  report OK worker-python "$FFP_SSH_USER runs $FFP_PYTHON -m worker (cwd $FFP_REPO)"
else
  report FAIL worker-python "$FFP_SSH_USER cannot run '$FFP_PYTHON -m worker --help' in $FFP_REPO (unreadable repo files or broken venv?)"
fi

if [ "$failures" -gt 0 ]; then
  echo "cluster check: $failures component(s) FAILED (bring them up with scripts/cluster/up.sh)" >&2
  exit 1
fi
echo "cluster check: all OK"
