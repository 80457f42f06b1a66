#!/usr/bin/env bash
# Captures raw Slurm outputs from a local cluster into tests/cluster/samples/<version>/ for the parsers
# of the `cluster` package:
#   capture-samples.sh [VERSION [DIR]]   VERSION 22.05 (the host's cluster, the default), 24.11 or 26.05
#                                        (a newer cluster: scripts/cluster/newer.sh VERSION up first) Everything runs as the service user over SSH, the way the portal runs it.
# Needs the cluster up (scripts/cluster/up.sh) and no pending or running jobs; takes about 3 minutes
# (a job has to hit its 1-minute time limit, and squeue --json only empties MinJobAge (60 s) after the
# last job ended). Outputs are saved exactly as Slurm printed them. For each sacct JSON sample a
# text twin (*.txt, `sacct -P`) is saved too: 22.05's JSON loses exit codes (see docs/local-cluster.md).
set -euo pipefail
# shellcheck source=scripts/cluster/env.sh
. "$(dirname "$0")/env.sh"
# shellcheck source=scripts/cluster/lib.sh
. "$(dirname "$0")/lib.sh"

version=${1:-22.05}
out=${2:-$FFP_REPO/tests/cluster/samples/$version}
if [ "$version" != 22.05 ]; then
  newer_env "$version"   # its login node, pinned key and work root
  FFP_SSH_PORT=$NV_SSH_PORT FFP_SSH_KNOWN_HOSTS=$NV_KNOWN_HOSTS FFP_WORK=$NV_WORK
fi
mkdir -p "$out"
remote=$FFP_WORK/samples
ffp_ssh mkdir -p "$remote"

[ -z "$(ffp_ssh squeue -h -t PD,R,CG -o %i)" ] || die samples "jobs are pending or running: samples need a quiet cluster"

uuid() { cat /proc/sys/kernel/random/uuid; }
# portal_cmd 'PYTHON EXPRESSION': the shell line of an argv that `cluster.slurm` builds (the portal's
# own commands, exactly), e.g. portal_cmd "squeue_tasks_argv(['12'])".
portal_cmd() {
  (cd "$FFP_REPO" && "$FFP_PYTHON" -c "import shlex; from datetime import datetime, timedelta, timezone
from cluster.slurm import *
print(shlex.join($1))")
}
# submit ARGS...: sbatch --parsable as the service user; prints the job id.
submit() { ffp_run sbatch --parsable "$@" | cut -d';' -f1; }
# wait_for JOBID CONDITION-COMMAND: poll a remote shell condition (at most 150 s).
wait_for() {
  local deadline=$((SECONDS + 150))
  until ffp_ssh "$2" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || die samples "job $1: gave up waiting for: $2"
    sleep 0.5
  done
}
# wait_done JOBID: every task of the job is finished according to sacct.
wait_done() {
  wait_for "$1" "[ -n \"\$(sacct -n -X -P -j $1 -o State)\" ] && ! sacct -n -X -P -j $1 -o State | grep -Eq '^(PENDING|RUNNING|REQUEUED|SUSPENDED|COMPLETING)'"
}
# wait_settled JOBID: finished, and accounting has caught up. slurmdbd lags slurmctld by seconds:
# right after the end sacct may still lack array tasks or show JobName "allocation". Settled means
# terminal, no placeholder name, and the same answer twice, 2 s apart.
wait_settled() {
  local deadline=$((SECONDS + 150)) q="sacct -P -j $1 -o JobID,JobName,State,ExitCode,NodeList" a b
  wait_done "$1"
  while :; do
    a=$(ffp_ssh "$q")
    sleep 2
    b=$(ffp_ssh "$q")
    [ "$a" != "$b" ] || grep -q '|allocation|' <<<"$a" || break
    [ "$SECONDS" -lt "$deadline" ] || die samples "job $1: accounting did not settle"
  done
}
save() { printf '%s\n' "$(cat)" >"$out/$1"; echo "saved $1"; }
# sacct_both JOBID NAME: NAME.json (sacct --json) and NAME.txt (sacct -P with the useful fields).
sacct_both() {
  ffp_ssh sacct --json -j "$1" | save "$2.json"
  ffp_ssh sacct -P -j "$1" -o "$SACCT_FIELDS" | save "$2.txt"
}
SACCT_FIELDS=JobID,JobIDRaw,JobName,State,ExitCode,DerivedExitCode,Reason,NodeList,AllocTRES,Elapsed,Start,End,Comment

if ffp_ssh sinfo --json >/dev/null 2>&1; then
  ffp_ssh sinfo --json | save sinfo.json
else
  ffp_run sinfo -N -o '%N %P %t %c %m %G' | save sinfo.txt
fi

# 0. The cluster's settings and partitions, and no reservation yet (the portal's own commands).
ffp_ssh "$(portal_cmd "scontrol_config_argv()")" | save scontrol_config.txt
ffp_ssh "$(portal_cmd "scontrol_partitions_argv()")" | save scontrol_partitions.txt
ffp_ssh "$(portal_cmd "reservations_show_argv()")" | save scontrol_show_res_none.txt

# 1. An array job, two tasks running on the two fake GPUs and two pending with reason Resources;
#    then cancelled while running.
name=ffp-$(uuid)
arr=$(submit --array=0-3 --gres="$FFP_GPU_GRES:1" --time=5 --mem=200M -J "$name" --comment="$name" \
  -o "$remote/run_%A_%a.out" --wrap 'sleep 60')
wait_for "$arr" "[ \$(squeue -h -j $arr -t R | wc -l) = 2 ] && squeue -h -j $arr -t PD -o %r | grep -qx Resources"
ffp_ssh squeue --json | save squeue_array_running.json
ffp_ssh "$(portal_cmd "squeue_tasks_argv(['$arr'])")" | save squeue_tasks_running.txt
# Accounting learns of the starts seconds after squeue does.
wait_for "$arr" "[ \$(sacct -n -X -P -j $arr -o State | grep -c RUNNING) = 2 ]"
sacct_both "$arr" sacct_array_running
ffp_ssh sacct --json --name "$name" | save sacct_by_name.json
ffp_ssh scancel "$arr"
wait_settled "$arr"
sacct_both "$arr" sacct_cancelled

# 2. A job that hits its time limit (Slurm's minimum is one minute): left running meanwhile.
tmo=$(submit -p "$FFP_CPU_PARTITION" --time=1 --mem=100M -J "ffp-$(uuid)" -o "$remote/timeout_%j.out" \
  --wrap 'echo started; sleep 120')

# 3. An array whose tasks exit 0, except task 2 which exits 3.
# shellcheck disable=SC2016 # $SLURM_ARRAY_TASK_ID is expanded by the job's shell, not here
mix=$(submit --array=0-3 --gres="$FFP_GPU_GRES:1" --time=2 --mem=100M -J "ffp-$(uuid)" \
  -o "$remote/mixed_%A_%a.out" --wrap 'echo task $SLURM_ARRAY_TASK_ID; sleep 1; [ "$SLURM_ARRAY_TASK_ID" != 2 ] || exit 3')
wait_settled "$mix"
sacct_both "$mix" sacct_array_mixed
# The watcher's text squeue of a job that ended (kept until MinJobAge), and its GPU-use history.
ffp_ssh "$(portal_cmd "squeue_tasks_argv(['$mix'])")" | save squeue_tasks_ended.txt
ffp_ssh "$(portal_cmd "gpu_history_argv(datetime.now(timezone.utc) - timedelta(hours=1), datetime.now(timezone.utc))")" |
  save sacct_gpu_history.txt

# 3b. A single-task array (`--array=1`: what a retry of one chunk submits), while its task runs:
# sacct lists it without its array (array id 0, no task id) and as PENDING until the task ends.
one=$(submit --array=1 --gres="$FFP_GPU_GRES:1" --time=2 --mem=100M -J "ffp-$(uuid)" -o /dev/null --wrap 'sleep 8')
wait_for "$one" "squeue -h -j $one -t R -o %i | grep -q ."
ffp_ssh sacct --json -j "$one" | save sacct_single_task_array_running.json
wait_settled "$one"
ffp_ssh sacct --json -j "$one" | save sacct_single_task_array_ended.json

# 4. A job above its --mem: jobacct_gather/linux + OverMemoryKill kills it (no cgroups here).
mem=$(submit --time=2 --mem=50M -J "ffp-$(uuid)" -o "$remote/memkill_%j.out" \
  --wrap "$FFP_PYTHON -c 'import time; b = bytearray(200 * 1024 * 1024); time.sleep(30)'")
wait_settled "$mem"
sacct_both "$mem" sacct_memkill
ffp_ssh cat "$remote/memkill_$mem.out" | save memkill_output.txt

# 5. A plain submission: what --parsable prints; then a lookup by name, and one for a name unknown.
name=ffp-$(uuid)
ffp_run sbatch --parsable --time=1 --mem=100M -J "$name" --comment="$name" -o "$remote/plain_%j.out" \
  --wrap 'echo hello' | save sbatch_parsable.txt
plain=$(cut -d';' -f1 "$out/sbatch_parsable.txt")
# Right after sbatch, accounting does not know the name yet (it lags by seconds).
ffp_ssh sacct --json --name "$name" | save sacct_by_name_just_submitted.json
wait_done "$plain"
wait_for "$plain" "sacct -n -X -P --name $name -o JobID | grep -qx $plain"
ffp_ssh sacct --json --name "$name" | save sacct_by_name_completed.json
ffp_ssh sacct --json --name "ffp-$(uuid)" | save sacct_by_name_none.json
# A request the cluster can never satisfy: sbatch's error text and exit status.
{ ffp_run sbatch --parsable --time=1 --gres="$FFP_GPU_GRES:3" --wrap true 2>&1 || echo "exit status: $?"; } |
  save sbatch_error_gres.txt

wait_settled "$tmo"
sacct_both "$tmo" sacct_timeout
ffp_ssh cat "$remote/timeout_$tmo.out" | save timeout_output.txt

# Finished jobs stay in squeue --json (not in plain squeue) until MinJobAge has passed.
ffp_ssh squeue --json | save squeue_finished.json
# ... then the list empties.
wait_for empty "[ -z \"\$(squeue -h -t all -o %i)\" ]"
ffp_ssh squeue --json | save squeue_empty.json
{ ffp_ssh "$(portal_cmd "squeue_tasks_argv(['$tmo'])")" 2>&1 || true; } | save squeue_tasks_unknown_job.stderr
echo "samples: jobs $arr (cancelled) $tmo (timeout) $mix (mixed) $mem (memkill) $plain (plain) in $out"
