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
if [[ $node =~ ^(idle|mix|alloc|comp|resv|plnd|maint)\  ]] && slurm_pids slurmd >/dev/null; then
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

# job_check COMPONENT SSH-FUNCTION GRES WORKDIR NODE: a tiny real job through the whole chain:
# sbatch over SSH, gres scheduling, slurmd running it as the service user, accounting recording it.
job_check() {
  local component=$1 ssh=$2 gres=$3 work=$4 want=$5 job state out deadline
  if job=$($ssh "$(printf '%q ' sbatch --parsable --wrap 'echo $SLURMD_NODENAME' --time=1 --gres="$gres:1" \
    -J ffp-check -o "$work/check-%j.out")" 2>&1); then
    job=${job%%;*}
    state=
    deadline=$((SECONDS + 30))
    while [ "$SECONDS" -lt "$deadline" ]; do
      state=$($ssh sacct -n -X -P -j "$job" -o State 2>/dev/null | head -n1 | cut -d' ' -f1)
      [[ $state =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT|OUT_OF_MEMORY|NODE_FAIL)$ ]] && break
      sleep 0.5
    done
    out=$($ssh cat "$work/check-$job.out" 2>/dev/null)
    if [ "$state" = COMPLETED ] && [ "$out" = "$want" ]; then
      report OK "$component" "job $job (--gres=$gres:1) COMPLETED on $out, seen by sacct"
      $ssh rm -f "$work/check-$job.out"
    else
      report FAIL "$component" "job $job: sacct state '${state:-none}' after 30s, output '$out'"
    fi
  else
    report FAIL "$component" "sbatch over ssh failed: $job"
  fi
}
if [ "$ssh_ok" = 1 ]; then
  job_check sacct ffp_ssh "$FFP_GPU_GRES" "$FFP_WORK" "$NODE_NAME"
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

# The second cluster (second.sh): its controller and node, then a job through its own sshd.
if [ "$FFP_SECOND" != 0 ]; then
  node2=$NODE_NAME-${FFP_SECOND_GPU_GRES#*:}
  if SLURM_CONF=$FFP_SECOND_SLURM_CONF scontrol ping 2>/dev/null | grep -q 'is UP'; then
    report OK slurmctld-2 "$FFP_SECOND_CLUSTER: $(SLURM_CONF=$FFP_SECOND_SLURM_CONF scontrol ping 2>/dev/null | head -n1)"
  else
    report FAIL slurmctld-2 "$FFP_SECOND_CLUSTER: scontrol ping not UP ($SLURM_LOG/slurmctld-second.log)"
  fi
  node=$(SLURM_CONF=$FFP_SECOND_SLURM_CONF sinfo -h -N -n "$node2" -o '%t %G' 2>/dev/null | head -n1)
  if [[ $node =~ ^(idle|mix|alloc|comp|resv|plnd|maint)\  ]] && slurm_pids slurmd "$FFP_SECOND_SLURM_CONF" >/dev/null; then
    report OK slurmd-2 "node $node2 ${node%% *}, ${node#* }"
  else
    report FAIL slurmd-2 "node $node2 is '${node:-unknown}' (want idle; $SLURM_LOG/slurmd-second.log)"
  fi
  cluster2=$(ffp_ssh2 'scontrol show config | grep -E "^ClusterName"' 2>&1)
  if [[ $cluster2 == *"= $FFP_SECOND_CLUSTER" ]]; then
    report OK sshd-2 "$FFP_SSH_USER@$FFP_SSH_HOST:$FFP_SECOND_SSH_PORT pinned-key login sees $FFP_SECOND_CLUSTER"
    job_check sacct-2 ffp_ssh2 "$FFP_SECOND_GPU_GRES" "$FFP_SECOND_WORK" "$node2"
  else
    report FAIL sshd-2 "login on port $FFP_SECOND_SSH_PORT: '$(tail -n1 <<<"$cluster2")' ($FFP_LOG/sshd-second.log)"
    report FAIL sacct-2 "skipped: no SSH login"
  fi
fi

if [ "$failures" -gt 0 ]; then
  echo "cluster check: $failures component(s) FAILED (bring them up with scripts/cluster/up.sh)" >&2
  exit 1
fi
echo "cluster check: all OK"
