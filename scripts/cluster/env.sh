# shellcheck shell=bash
# Paths, ports and names of the local single-node cluster. Source it (from bash, any cwd):
#   . scripts/cluster/env.sh
# Every value can be overridden from the environment before sourcing; up.sh, check.sh, down.sh and
# the tests all read the same values from here, so a profile seeded by the portal matches what
# up.sh started.

FFP_REPO=${FFP_REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)}
# The venv's interpreter: compute-node jobs run `$FFP_PYTHON -m worker ...` as the service user.
FFP_PYTHON=${FFP_PYTHON:-${PY:-$FFP_REPO/.venv/bin/python}}

# Portal-side state: SSH client key + pinned known_hosts, redis data, logs, pid files, secrets.
FFP_STATE=${FFP_STATE:-/var/lib/ffportal}
# "Cluster storage": allowed target roots live here (read-only to the service user).
FFP_STORAGE=${FFP_STORAGE:-/srv/ffportal/storage}
# Remote work root: manifests, logs and outputs of jobs; owned by the service user.
FFP_WORK=${FFP_WORK:-/srv/ffportal/work}

# The SSH endpoint the portal logs in to (a cluster profile).
FFP_SSH_HOST=${FFP_SSH_HOST:-127.0.0.1}
FFP_SSH_PORT=${FFP_SSH_PORT:-2222}
FFP_SSH_USER=${FFP_SSH_USER:-ffportal}
FFP_SSH_KEY=${FFP_SSH_KEY:-$FFP_STATE/ssh/id_ed25519}
# Holds exactly one line: the pinned host key, `[127.0.0.1]:2222 ssh-ed25519 AAAA...`.
FFP_SSH_KNOWN_HOSTS=${FFP_SSH_KNOWN_HOSTS:-$FFP_STATE/ssh/known_hosts}

FFP_REDIS_PORT=${FFP_REDIS_PORT:-6379}
# Redis requires a login: the portal's Redis user and its password, generated once by up.sh into a
# file of mode 600. The URLs carry them (database 0 for `make up`; the tests use their own).
FFP_REDIS_USER=${FFP_REDIS_USER:-ffportal}
FFP_REDIS_PASSWORD_FILE=${FFP_REDIS_PASSWORD_FILE:-$FFP_STATE/secrets/redis-password}
if [ -r "$FFP_REDIS_PASSWORD_FILE" ]; then
  FFP_REDIS_BASE=${FFP_REDIS_BASE:-redis://$FFP_REDIS_USER:$(<"$FFP_REDIS_PASSWORD_FILE")@127.0.0.1:$FFP_REDIS_PORT}
else
  FFP_REDIS_BASE=${FFP_REDIS_BASE:-redis://127.0.0.1:$FFP_REDIS_PORT}  # before up.sh made the password
fi
FFP_REDIS_URL=${FFP_REDIS_URL:-$FFP_REDIS_BASE/0}
# The portal's processes (web, RQ worker, watcher) run as this user, never as root (scripts/up.sh).
FFP_WEB_USER=${FFP_WEB_USER:-ffpweb}
# Its home: a fixed private folder (scripts/web-user.sh), whatever PORTAL_VAR a run uses.
FFP_WEB_HOME=${FFP_WEB_HOME:-/var/lib/ffpweb}

# Slurm names: the cluster, the account the service user and root charge to, the partitions.
FFP_SLURM_CLUSTER=${FFP_SLURM_CLUSTER:-ffportal}
FFP_SLURM_ACCOUNT=${FFP_SLURM_ACCOUNT:-ffportal}
FFP_GPU_PARTITION=${FFP_GPU_PARTITION:-gpu}
FFP_CPU_PARTITION=${FFP_CPU_PARTITION:-cpu}
FFP_GPU_GRES=${FFP_GPU_GRES:-gpu:h200}   # two fake devices: --gres=gpu:h200:1 runs two at a time
FFP_SAMPLE_FACES=${FFP_SAMPLE_FACES:-$FFP_STORAGE/samples/faces}

# The SECOND local cluster (scripts/cluster/second.sh, started by up.sh): its own slurmctld and
# slurmd on this host (other ports, state and files, config in its own directory), two fake GPUs of
# another type, sharing munge and slurmdbd; reached through its own sshd, which sets SLURM_CONF for
# every login, so the portal sees it as just another cluster profile. FFP_SECOND=0: not started.
FFP_SECOND=${FFP_SECOND:-1}
FFP_SECOND_CLUSTER=${FFP_SECOND_CLUSTER:-ffportal2}
FFP_SECOND_SLURM_CONF=${FFP_SECOND_SLURM_CONF:-/etc/slurm-second/slurm.conf}
FFP_SECOND_CTLD_PORT=${FFP_SECOND_CTLD_PORT:-6827}
FFP_SECOND_SLURMD_PORT=${FFP_SECOND_SLURMD_PORT:-6828}
FFP_SECOND_GPU_GRES=${FFP_SECOND_GPU_GRES:-gpu:a100}
# Its node's memory comes out of the reserve (>= 1 GiB) up.sh leaves the OS on the first node.
FFP_SECOND_MEMORY_MB=${FFP_SECOND_MEMORY_MB:-1024}
FFP_SECOND_SSH_PORT=${FFP_SECOND_SSH_PORT:-2223}
FFP_SECOND_SSH_KNOWN_HOSTS=${FFP_SECOND_SSH_KNOWN_HOSTS:-$FFP_STATE/ssh/known_hosts-second}
FFP_SECOND_WORK=${FFP_SECOND_WORK:-/srv/ffportal/work-second}

# The worker's container images (scripts/cluster/worker-image.sh), where the clusters' nodes see them.
FFP_IMAGES=${FFP_IMAGES:-/srv/ffportal/images}

# Where debootstrap fetches the newer clusters' Debian roots (newer.sh).
FFP_DEBIAN_MIRROR=${FFP_DEBIAN_MIRROR:-http://deb.debian.org/debian}

export FFP_DEBIAN_MIRROR FFP_IMAGES FFP_REPO FFP_PYTHON FFP_STATE FFP_STORAGE FFP_WORK \
  FFP_SSH_HOST FFP_SSH_PORT FFP_SSH_USER FFP_SSH_KEY FFP_SSH_KNOWN_HOSTS \
  FFP_REDIS_PORT FFP_REDIS_USER FFP_REDIS_PASSWORD_FILE FFP_REDIS_BASE FFP_REDIS_URL FFP_WEB_USER FFP_WEB_HOME \
  FFP_SLURM_CLUSTER FFP_SLURM_ACCOUNT FFP_GPU_PARTITION FFP_CPU_PARTITION FFP_GPU_GRES \
  FFP_SAMPLE_FACES FFP_SECOND FFP_SECOND_CLUSTER FFP_SECOND_SLURM_CONF FFP_SECOND_CTLD_PORT \
  FFP_SECOND_SLURMD_PORT FFP_SECOND_GPU_GRES FFP_SECOND_MEMORY_MB FFP_SECOND_SSH_PORT \
  FFP_SECOND_SSH_KNOWN_HOSTS FFP_SECOND_WORK
