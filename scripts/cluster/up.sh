#!/usr/bin/env bash
# Brings up a real single-node Slurm cluster reached over real SSH, plus Redis, on this machine:
#   munge -> MariaDB -> slurmdbd -> accounting (cluster/account/users) -> slurmctld -> slurmd
#   -> sshd for the service user with a pinned host key -> Redis -> cluster storage and samples
#   -> the second cluster (scripts/cluster/second.sh).
# Idempotent: what runs is left running, configs are rewritten (and their daemon restarted) only
# when their content changed, keys and the accounting database are never recreated. A warm run
# takes well under 2 s. Any component that is not up within $FFP_TIMEOUT s stops the script with
# a message naming it and the tail of its log. Needs root and the Debian packages of
# scripts/install-system.sh; no systemd (daemons are started directly).
set -euo pipefail
# shellcheck source=scripts/cluster/env.sh
. "$(dirname "$0")/env.sh"
# shellcheck source=scripts/cluster/lib.sh
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || die up.sh "must run as root (it starts system daemons)"
started=$EPOCHREALTIME
DEPLOY=$FFP_REPO/deploy

install -d -m 755 "$FFP_STATE" "$FFP_RUN"
private_logs "$FFP_LOG/sshd.log" "$FFP_LOG/sshd-second.log"
install -d -m 700 "$FFP_STATE/secrets" "$FFP_OWNED"

# --- service user -------------------------------------------------------------------------------
if ! id "$FFP_SSH_USER" >/dev/null 2>&1; then
  useradd --create-home --shell /bin/bash --comment "FaceFusion Portal service" "$FFP_SSH_USER"
  say user "created $FFP_SSH_USER"
fi
# useradd leaves the password field '!' (locked). With UsePAM no, sshd refuses even key logins to
# a locked account ("account is locked"); '*' means "no password" without locking.
if [[ $(getent shadow "$FFP_SSH_USER" | cut -d: -f2) == '!'* ]]; then
  usermod -p '*' "$FFP_SSH_USER"
fi
FFP_HOME=$(getent passwd "$FFP_SSH_USER" | cut -d: -f6)
[ -d "$FFP_HOME" ] || install -d -o "$FFP_SSH_USER" -g "$FFP_SSH_USER" -m 755 "$FFP_HOME"

# --- cluster storage and work root ----------------------------------------------------------------
install -d -m 755 "$FFP_STORAGE" "$FFP_STORAGE/samples" "$FFP_SAMPLE_FACES"
# Team folders (docs/teams.md) live under teams/: the service user's, where `seed_local` makes the
# demo teams' folders as the portal makes every folder on the cluster (over SSH: 700, files 600).
install -d -o "$FFP_SSH_USER" -g "$FFP_SSH_USER" -m 700 "$FFP_STORAGE/teams"
# The work root holds every job's inputs (people's faces) and outputs: the service user's alone,
# so other local users cannot even list the jobs.
[ -d "$FFP_WORK" ] || install -d -m 700 "$FFP_WORK"
chown "$FFP_SSH_USER:" "$FFP_WORK"
chmod 700 "$FFP_WORK"

# --- the worker's interpreter and the repo must be reachable by the service user ---------------
# Jobs run `$FFP_PYTHON -m worker` as the service user. A clone or a pyenv under /root (mode 700)
# is not: add the search bit (o+x: enter, not list) on each such directory on the way, plus o+rx
# on the repo itself. FFP_FIX_PERMS=0 leaves modes alone (check.sh then names the directory).
[ -x "$FFP_PYTHON" ] || die worker-python "$FFP_PYTHON not found: build the venv first (make venv)"
if [ "${FFP_FIX_PERMS:-1}" = 1 ]; then
  for target in "$FFP_REPO/worker" "$(dirname "$FFP_PYTHON")" "$(realpath "$FFP_PYTHON")"; do
    while blocked=$(untraversable "$target"); do
      chmod o+x "$blocked"
      say permissions "chmod o+x $blocked (so $FFP_SSH_USER can reach $target)"
    done
  done
  chmod o+rx "$FFP_REPO"
fi
if ! runuser -u "$FFP_SSH_USER" -- "$FFP_PYTHON" -c pass 2>/dev/null; then
  blocked=$(untraversable "$(realpath "$FFP_PYTHON")" || untraversable "$(dirname "$FFP_PYTHON")") || blocked=
  die worker-python "$FFP_SSH_USER cannot run $FFP_PYTHON${blocked:+ ($blocked has no o+x; FFP_FIX_PERMS=0 left it)}"
fi

# --- munge ------------------------------------------------------------------------------------------
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  if [ ! -s /etc/munge/munge.key ]; then
    mungekey --create --keyfile=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
  fi
  install -d -o munge -g munge -m 755 /run/munge
  install -d -o munge -g munge -m 700 /var/log/munge
  # --force: a munged killed with the machine leaves a socket lock behind.
  force=()
  pids_of munged >/dev/null || force=(--force)
  runuser -u munge -- /usr/sbin/munged "${force[@]}" </dev/null >>"$FFP_LOG/munged.out" 2>&1 ||
    die munge "munged did not start" /var/log/munge/munged.log
  touch "$FFP_OWNED/munge"
  wait_until "$FFP_TIMEOUT" munge /var/log/munge/munged.log bash -c 'munge -n | unmunge'
  say munge "started"
else
  say munge "running"
fi

# --- MariaDB (accounting storage) ------------------------------------------------------------------
if ! mysqladmin --protocol=socket ping >/dev/null 2>&1; then
  install -d -o mysql -g mysql -m 755 /run/mysqld
  if [ ! -d /var/lib/mysql/mysql ]; then
    mariadb-install-db --user=mysql --datadir=/var/lib/mysql >>"$FFP_LOG/mariadb.log" 2>&1 ||
      die mariadb "mariadb-install-db failed" "$FFP_LOG/mariadb.log"
  fi
  # mariadbd (as mysql) appends to the error log itself.
  touch "$FFP_LOG/mariadb.log"
  chown mysql:mysql "$FFP_LOG/mariadb.log"
  # mysqld_safe stays in the foreground: detach it, and keep make's stdout out of it so that
  # `make up` returns and a CI log does not wait for it.
  # The two innodb values are the ones slurmdbd asks for ("Database settings not recommended").
  setsid mysqld_safe --user=mysql --log-error="$FFP_LOG/mariadb.log" \
    --innodb-buffer-pool-size=512M --innodb-lock-wait-timeout=900 \
    </dev/null >>"$FFP_LOG/mysqld_safe.out" 2>&1 &
  touch "$FFP_OWNED/mariadb"
  wait_until 60 mariadb "$FFP_LOG/mariadb.log" mysqladmin --protocol=socket ping
  say mariadb "started"
else
  say mariadb "running"
fi
# The password slurmdbd uses; made once, then reused (never rotated behind slurmdbd's back).
pw_file=$FFP_STATE/secrets/slurmdbd-db-password
[ -s "$pw_file" ] || (umask 077 && head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$pw_file")
db_password=$(<"$pw_file")
mysql --protocol=socket <<SQL || die mariadb "could not create database slurm_acct_db / user slurm"
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$db_password';
ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$db_password';
GRANT ALL PRIVILEGES ON slurm_acct_db.* TO 'slurm'@'localhost';
SQL

# --- Slurm configuration --------------------------------------------------------------------------
cpus=$(nproc)
mem_mb=$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)
# A container may be capped below the host's MemTotal (cgroup v2, then v1).
for f in /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes; do
  if [ -r "$f" ] && limit=$(<"$f") && [[ $limit =~ ^[0-9]+$ ]] && [ $((limit / 1048576)) -lt "$mem_mb" ]; then
    mem_mb=$((limit / 1048576))
  fi
done
# Leave the OS, MariaDB and the portal room: 10 %, at least 1 GiB (a quarter on tiny machines).
margin=$((mem_mb / 10 > 1024 ? mem_mb / 10 : 1024))
[ "$margin" -lt $((mem_mb / 4)) ] || margin=$((mem_mb / 4))
real_memory=$((mem_mb - margin))
def_mem_per_cpu=$((real_memory / cpus))

fake_gpu_dir=$FFP_STATE/fake-gpus
install -d -m 755 "$fake_gpu_dir" /etc/slurm
touch "$fake_gpu_dir/nvidia0" "$fake_gpu_dir/nvidia1"
for d in "$SLURM_RUN" /var/lib/slurm /var/lib/slurm/slurmctld /var/lib/slurm/slurmd "$SLURM_LOG"; do
  install -d -o slurm -g slurm -m 755 "$d"
done

slurm_changed=0
dbd_changed=0
render "$DEPLOY/slurm/slurm.conf.in" "$SLURM_ETC/slurm.conf" 644 root:root \
  CLUSTER="$FFP_SLURM_CLUSTER" HOST="$NODE_NAME" SLURMD_TIMEOUT=300 CTLD_ADDR=127.0.0.1 CTLD_PORT=6817 SLURMD_PORT=6818 DBD_PORT=6819 \
  STATE_DIR=/var/lib/slurm SUFFIX= PER_NODE= NODES="$NODE_NAME" DEF_MEM_PER_CPU="$def_mem_per_cpu" \
  NODE_LINES="$(node_line "$NODE_NAME" "$NODE_NAME" 127.0.0.1 6818 "$cpus" "$real_memory" "${FFP_GPU_GRES#*:}")" \
  NODE_CARE= \
  && slurm_changed=1
render "$DEPLOY/slurm/gres.conf.in" "$SLURM_ETC/gres.conf" 644 root:root \
  GRES_LINES="$(gres_line "$NODE_NAME" "${FFP_GPU_GRES#*:}" "$fake_gpu_dir")" && slurm_changed=1
render "$DEPLOY/slurm/slurmdbd.conf.in" "$SLURM_ETC/slurmdbd.conf" 600 slurm:slurm \
  NODE="$NODE_NAME" DBD_PORT=6819 DB_NAME=slurm_acct_db DB_USER=slurm DB_PASSWORD="$db_password" && dbd_changed=1
[ "$slurm_changed" = 0 ] || say slurm.conf "written (node $NODE_NAME: $cpus CPUs, ${real_memory} MB, gpu:h200:2)"

# --- slurmdbd ---------------------------------------------------------------------------------------
# The readiness probe: one sacctmgr call (~0.2 s) proves slurmdbd answers.
list_assocs() { sacctmgr -n -P list assoc format=cluster,account,user; }
if pids_of slurmdbd >/dev/null && [ "$dbd_changed" = 1 ]; then
  say slurmdbd "config changed: restarting"
  # shellcheck disable=SC2046 # one word per pid
  stop_pid slurmdbd $(pids_of slurmdbd)
fi
if ! pids_of slurmdbd >/dev/null; then
  slurmdbd </dev/null >>"$FFP_LOG/slurmdbd.out" 2>&1 || die slurmdbd "did not start" "$SLURM_LOG/slurmdbd.log"
  # The first start creates the accounting tables: give it twice the usual time.
  wait_until $((FFP_TIMEOUT * 2)) slurmdbd "$SLURM_LOG/slurmdbd.log" list_assocs
  say slurmdbd "started"
else
  wait_until "$FFP_TIMEOUT" slurmdbd "$SLURM_LOG/slurmdbd.log" list_assocs
  say slurmdbd "running"
fi

# --- accounting: the cluster, the account, the service user and root, QOS levels, AdminLevel ------
# Added before slurmctld starts, so it registers with a cluster the database already knows.
slurm_accounting "$FFP_SLURM_CLUSTER"

# --- slurmctld and slurmd ---------------------------------------------------------------------------
if [ "$slurm_changed" = 1 ] && { slurm_pids slurmctld || slurm_pids slurmd; } >/dev/null; then
  # Node definitions (CPUs, memory, gres) only take effect on a restart of both daemons.
  say slurm "config changed: restarting slurmctld and slurmd"
  # shellcheck disable=SC2046 # one word per pid
  stop_pid slurmd $(slurm_pids slurmd)
  # shellcheck disable=SC2046
  stop_pid slurmctld $(slurm_pids slurmctld)
fi
if ! slurm_pids slurmctld >/dev/null; then
  slurmctld </dev/null >>"$FFP_LOG/slurmctld.out" 2>&1 || die slurmctld "did not start" "$SLURM_LOG/slurmctld.log"
  say slurmctld "started"
else
  say slurmctld "running"
fi
wait_until "$FFP_TIMEOUT" slurmctld "$SLURM_LOG/slurmctld.log" bash -c 'scontrol ping | grep -q "is UP"'

if ! slurm_pids slurmd >/dev/null; then
  slurmd </dev/null >>"$FFP_LOG/slurmd.out" 2>&1 || die slurmd "did not start" "$SLURM_LOG/slurmd.log"
  say slurmd "started"
else
  say slurmd "running"
fi
node_state() { sinfo -h -N -n "$NODE_NAME" -o %t 2>/dev/null | head -n1; }
# "resv", "plnd", "maint": held by a GPU booking (a Slurm reservation) or planned for a waiting job, and up
node_usable() { [[ $(node_state) =~ ^(idle|mix|alloc|comp|resv|plnd|maint)$ ]]; }
# A node left drained/down by an earlier crash stays so across restarts: resume it once.
if [[ $(node_state) =~ ^(down|drain|drng|fail) ]] && slurm_pids slurmd >/dev/null; then
  sleep 1
  scontrol update nodename="$NODE_NAME" state=resume 2>/dev/null || true
fi
wait_until "$FFP_TIMEOUT" slurmd "$SLURM_LOG/slurmd.log" node_usable
say node "$NODE_NAME $(node_state)"

# --- sshd for the service user ------------------------------------------------------------------------
ssh_dir=$FFP_STATE/ssh
install -d -m 755 "$ssh_dir"
install -d -m 700 "$ssh_dir/host"
[ -s "$ssh_dir/host/ssh_host_ed25519_key" ] ||
  ssh-keygen -q -t ed25519 -N '' -C "ffportal-sshd@$NODE_NAME" -f "$ssh_dir/host/ssh_host_ed25519_key"
[ -s "$FFP_SSH_KEY" ] || ssh-keygen -q -t ed25519 -N '' -C "ffportal-portal" -f "$FFP_SSH_KEY"
install -d -o "$FFP_SSH_USER" -g "$FFP_SSH_USER" -m 700 "$FFP_HOME/.ssh"
authorized_keys=$FFP_HOME/.ssh/authorized_keys
pubkey=$(<"$FFP_SSH_KEY.pub")
if ! grep -qxF "$pubkey" "$authorized_keys" 2>/dev/null; then
  printf '%s\n' "$pubkey" >>"$authorized_keys"
fi
chown "$FFP_SSH_USER:" "$authorized_keys"
chmod 600 "$authorized_keys"
# The pinned line, in the form OpenSSH and paramiko write for a non-default port.
if [ "$FFP_SSH_PORT" = 22 ]; then known_host=$FFP_SSH_HOST; else known_host="[$FFP_SSH_HOST]:$FFP_SSH_PORT"; fi
printf '%s\n' "$known_host $(cut -d' ' -f1,2 "$ssh_dir/host/ssh_host_ed25519_key.pub")" >"$FFP_SSH_KNOWN_HOSTS.tmp"
if cmp -s "$FFP_SSH_KNOWN_HOSTS.tmp" "$FFP_SSH_KNOWN_HOSTS"; then rm -f "$FFP_SSH_KNOWN_HOSTS.tmp"; else mv -f "$FFP_SSH_KNOWN_HOSTS.tmp" "$FFP_SSH_KNOWN_HOSTS"; fi
chmod 644 "$FFP_SSH_KNOWN_HOSTS"

sshd_conf=$ssh_dir/sshd_config
sshd_pid=$FFP_RUN/sshd.pid
sshd_changed=0
render "$DEPLOY/ssh/sshd_config.in" "$sshd_conf" 600 root:root \
  LISTEN="$FFP_SSH_HOST:$FFP_SSH_PORT" HOST_KEY="$ssh_dir/host/ssh_host_ed25519_key" \
  PID_FILE="$sshd_pid" USER="$FFP_SSH_USER" AUTHORIZED_KEYS="$authorized_keys" && sshd_changed=1
install -d -m 755 /run/sshd   # privilege separation directory
/usr/sbin/sshd -t -f "$sshd_conf" 2>>"$FFP_LOG/sshd.log" || die sshd "sshd -t rejects $sshd_conf" "$FFP_LOG/sshd.log"
if pid_alive "$sshd_pid" sshd && [ "$sshd_changed" = 1 ]; then
  say sshd "config changed: restarting"
  stop_pid sshd "$(<"$sshd_pid")"
fi
if ! pid_alive "$sshd_pid" sshd; then
  # An absolute path is required: sshd re-executes itself for each connection.
  /usr/sbin/sshd -f "$sshd_conf" -E "$FFP_LOG/sshd.log" </dev/null ||
    die sshd "did not start on $FFP_SSH_HOST:$FFP_SSH_PORT" "$FFP_LOG/sshd.log"
  touch "$FFP_OWNED/sshd"
  wait_until "$FFP_TIMEOUT" sshd "$FFP_LOG/sshd.log" ffp_ssh true
  say sshd "started on $FFP_SSH_HOST:$FFP_SSH_PORT"
else
  say sshd "running on $FFP_SSH_HOST:$FFP_SSH_PORT"
fi
# The proof the portal needs: key login, pinned host key, Slurm answering for the service user.
login=$(ffp_ssh sinfo -h -o %P 2>&1) ||
  die sshd "pinned-key login as $FFP_SSH_USER running sinfo failed: $login" "$FFP_LOG/sshd.log"

# --- Redis -----------------------------------------------------------------------------------------------
# No anonymous access (deploy/redis/redis.conf.in): one user, one password generated once.
if [ ! -s "$FFP_REDIS_PASSWORD_FILE" ]; then
  (umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$FFP_REDIS_PASSWORD_FILE")
  say redis "generated the portal's Redis password ($FFP_REDIS_PASSWORD_FILE, mode 600)"
fi
chmod 600 "$FFP_REDIS_PASSWORD_FILE"
redis_password=$(<"$FFP_REDIS_PASSWORD_FILE")
install -d -o redis -g redis -m 750 "$FFP_STATE/redis"
redis_conf=$FFP_STATE/redis/redis.conf
redis_up() { [ "$(REDISCLI_AUTH=$redis_password redis-cli --no-auth-warning --user "$FFP_REDIS_USER" \
  -h 127.0.0.1 -p "$FFP_REDIS_PORT" ping 2>/dev/null)" = PONG ]; }
conf_changed=0
render "$DEPLOY/redis/redis.conf.in" "$redis_conf" 600 redis:redis PORT="$FFP_REDIS_PORT" DIR="$FFP_STATE/redis" \
  USER="$FFP_REDIS_USER" PASSWORD="$redis_password" && conf_changed=1
# Running, but not as configured (an older config without a password, or a changed one): restart
# it; it saves its data on the way down and reloads it.
if pid_alive "$FFP_STATE/redis/redis.pid" redis-server && { [ "$conf_changed" = 1 ] || ! redis_up; }; then
  kill "$(<"$FFP_STATE/redis/redis.pid")" 2>/dev/null || true
  for _ in $(seq 1 100); do pid_alive "$FFP_STATE/redis/redis.pid" redis-server || break; sleep 0.1; done
  say redis "restarted with its configuration"
fi
if ! redis_up; then
  runuser -u redis -- redis-server "$redis_conf" </dev/null >>"$FFP_LOG/redis.out" 2>&1 ||
    die redis "redis-server did not start" "$FFP_STATE/redis/redis.log"
  touch "$FFP_OWNED/redis"
  wait_until "$FFP_TIMEOUT" redis "$FFP_STATE/redis/redis.log" redis_up
  say redis "started on 127.0.0.1:$FFP_REDIS_PORT (password required)"
else
  say redis "running on 127.0.0.1:$FFP_REDIS_PORT (password required)"
fi

# --- sample faces on cluster storage ---------------------------------------------------------------------
# Real face photos shipped inside Python packages of the venv (insightface's test images; its
# mask_*.jpg are mask textures without a face, so they are left out) and scikit-image's astronaut.
if [ ! -s "$FFP_SAMPLE_FACES/t1.jpg" ] || [ ! -s "$FFP_SAMPLE_FACES/astronaut.png" ]; then
  "$FFP_PYTHON" - "$FFP_SAMPLE_FACES" <<'PY' || die samples "could not copy the sample faces from the venv"
import importlib.util, pathlib, shutil, sys
out = pathlib.Path(sys.argv[1])
spec = importlib.util.find_spec("insightface")  # locates the package without importing it
images = pathlib.Path(spec.submodule_search_locations[0]) / "data" / "images"
for path in sorted(images.iterdir()):
    if path.suffix.lower() in {".jpg", ".jpeg", ".png"} and not path.name.startswith("mask_"):
        shutil.copyfile(path, out / path.name)
skimage = pathlib.Path(importlib.util.find_spec("skimage").submodule_search_locations[0])
astronaut = skimage / "data" / "astronaut.png"
if astronaut.is_file():
    shutil.copyfile(astronaut, out / "astronaut.png")
else:
    from PIL import Image
    from skimage import data
    Image.fromarray(data.astronaut()).save(out / "astronaut.png")
PY
  chmod 644 "$FFP_SAMPLE_FACES"/*
  say samples "$(find "$FFP_SAMPLE_FACES" -maxdepth 1 -type f | wc -l) face images in $FFP_SAMPLE_FACES"
fi

# --- the second cluster (the portal's "several clusters"): last, it shares munge and slurmdbd ---------
[ "$FFP_SECOND" = 0 ] || bash "$FFP_REPO/scripts/cluster/second.sh" up

private_logs  # what the daemons created meanwhile
say up "cluster $FFP_SLURM_CLUSTER ready in $(elapsed "$started")s (ssh $FFP_SSH_USER@$FFP_SSH_HOST:$FFP_SSH_PORT, redis :$FFP_REDIS_PORT)"
