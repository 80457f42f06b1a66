#!/bin/bash
# The local newer clusters' ResumeProgram and SuspendProgram (newer.sh installs this file twice, as
# /usr/local/sbin/ffportal-node-resume and ffportal-node-suspend; the name says which). slurmctld runs
# it as SlurmUser with the nodes as a hostlist ("ffp2605-n[1-2]"). A real site's program asks the
# nodes' BMCs (ipmitool) or a cloud's API to power them on or off (docs/clusters.md); here it leaves
# one request a node in /var/lib/ffportal-power, which the stand-in BMC (newer.sh VERSION bmc, root
# on the host) carries out: start that node's slurmd after the boot delay, or stop it.
set -eu
PATH=/usr/sbin:/usr/bin:/sbin:/bin
spool=/var/lib/ffportal-power
case ${0##*/} in
  *resume) action=up ;;
  *suspend) action=down ;;
  *) echo "run as ffportal-node-resume or ffportal-node-suspend" >&2; exit 2 ;;
esac
echo "$(date -Is) $action $1" >>"$spool/power.log"
for node in $(scontrol show hostnames "$1"); do
  [[ $node =~ ^[A-Za-z0-9_-]+$ ]] || continue  # a node name only: it names a file
  # Written whole, then renamed: the BMC never reads half a request.
  tmp=$(mktemp "$spool/.request.XXXXXX")
  echo "$action $node" >"$tmp"
  mv "$tmp" "$spool/$node.$action.$(date +%s%N).request"
done
exit 0
