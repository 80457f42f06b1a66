#!/bin/bash
# A GPU health check for Slurm's HealthCheckProgram: slurmd runs it as root on every node each
# HealthCheckInterval seconds. A node whose GPU reports a fault is drained, with the fault as the
# reason ("gpu health: GPU 1 too hot (97 C)"): running work finishes (or is requeued as Slurm
# decides), new work and bookings go elsewhere. When every GPU passes again, the node is resumed,
# but only if this check drained it: a node an admin drained for another reason stays drained.
#
# What counts as a fault, per GPU: fewer GPUs seen than Slurm's Gres says the node has ("fell off
# the bus"), uncorrected ECC errors since the driver loaded, a temperature at or above MAX_GPU_TEMP.
# On real nodes the readings come from nvidia-smi (docs/clusters.md shows the slurm.conf lines and
# how to add DCGM's diagnostics). The local clusters have no GPUs: /etc/slurm/gpu-health.conf
# names FAKE_GPU_DIR, where each node's fake GPU files are (scripts/cluster/newer.sh), and a file
# `nvidia<i>.state` beside one of them breaks it: "ecc=12", "temperature=97" or "lost".
#
# It always exits 0: slurmd runs a failing check again and again at start and does not register
# until it passes; a sick GPU should drain the node, not hide it.
set -u
PATH=/usr/sbin:/usr/bin:/sbin:/bin
MAX_GPU_TEMP=90
FAKE_GPU_DIR=
# shellcheck source=/dev/null
[ -r /etc/slurm/gpu-health.conf ] && . /etc/slurm/gpu-health.conf
node=${SLURMD_NODENAME:-$(hostname -s)}
TAG="gpu health:"

# gpu_readings: one line per GPU seen, "index, temperature C, uncorrected ECC errors".
gpu_readings() {
  if [ -z "$FAKE_GPU_DIR" ]; then
    timeout 30 nvidia-smi --query-gpu=index,temperature.gpu,ecc.errors.uncorrected.volatile.total \
      --format=csv,noheader,nounits
    return
  fi
  local dev i state temp ecc
  for dev in "$FAKE_GPU_DIR/$node"/nvidia[0-9]; do
    [ -e "$dev" ] || continue
    i=${dev##*nvidia} state=$(cat "$dev.state" 2>/dev/null) temp=40 ecc=0
    [ "$state" = lost ] && continue
    [[ $state =~ temperature=([0-9]+) ]] && temp=${BASH_REMATCH[1]}
    [[ $state =~ ecc=([0-9]+) ]] && ecc=${BASH_REMATCH[1]}
    echo "$i, $temp, $ecc"
  done
}

# The node as Slurm sees it; no answer (the controller restarting): decide nothing this time.
line=$(timeout 20 scontrol -o show node "$node" 2>/dev/null) || exit 0
# Gres=gpu:h200:2(S:0) or gpu:2,gpu:a100:1: the GPUs Slurm expects here
expected=0
gres=$(sed -n 's/.* Gres=\([^ ]*\).*/\1/p' <<<"$line")
for entry in ${gres//,/ }; do
  entry=${entry%%(*}
  [[ $entry == gpu:* ]] && [[ ${entry##*:} =~ ^[0-9]+$ ]] && expected=$((expected + ${entry##*:}))
done
[ "$expected" -gt 0 ] || exit 0  # a node without GPUs: nothing to check

problem=""
if ! readings=$(gpu_readings 2>&1); then
  problem="the GPUs could not be read (${readings:0:80})"
else
  seen=0
  while IFS=', ' read -r index temp ecc; do
    [ -n "$index" ] || continue
    seen=$((seen + 1))
    [[ $ecc =~ ^[0-9]+$ ]] || ecc=0  # "[N/A]": ECC off on this card
    [[ $temp =~ ^[0-9]+$ ]] || temp=0
    if [ "$ecc" -gt 0 ]; then
      problem="GPU $index ECC errors ($ecc uncorrected)"
      break
    fi
    if [ "$temp" -ge "$MAX_GPU_TEMP" ]; then
      problem="GPU $index too hot ($temp C)"
      break
    fi
  done <<<"$readings"
  if [ -z "$problem" ] && [ "$seen" -lt "$expected" ]; then
    problem="a GPU fell off the bus ($seen of $expected seen)"
  fi
fi

state=$(sed -n 's/.* State=\([^ ]*\).*/\1/p' <<<"$line")
reason=$(sed -n 's/.* Reason=\([^[]*\) \[.*/\1/p' <<<"$line")  # "Reason=... [root@2026-12-03T05:00:01]"
if [ -n "$problem" ]; then
  # Drain with this fault, unless an admin's drain (another reason) is already there.
  if [[ $state != *DRAIN* ]] || [[ $reason == "$TAG"* && $reason != "$TAG $problem" ]]; then
    scontrol update nodename="$node" state=drain reason="$TAG $problem"
  fi
elif [[ $state == *DRAIN* ]] && [[ $reason == "$TAG"* ]]; then
  scontrol update nodename="$node" state=resume
fi
exit 0
