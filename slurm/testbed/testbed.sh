#!/usr/bin/env bash
# A real Slurm cluster on one Debian machine, for trying azhpc's SLURM path and for its tests:
# two emulated compute nodes (n1, n2: two slurmd on one host), fake GPUs (GRES backed by character
# devices, so Slurm sets CUDA_VISIBLE_DEVICES per task) and job accounting (slurmdbd + MariaDB).
#
#   sudo slurm/testbed/testbed.sh start     install what is missing (apt), write the config, start the daemons
#   sudo slurm/testbed/testbed.sh stop      stop every daemon it started (the config and accounting stay)
#   slurm/testbed/testbed.sh status         say whether the cluster answers
#   sudo slurm/testbed/testbed.sh resume    put nodes left down or drained back in service, partitions left down up,
#                                           and remove submit limits and accounts a run left (start does it too)
#   sudo slurm/testbed/testbed.sh grant PYTHON...    let the submitting user run the project with PYTHON (.venv/bin/python)
#
# Meant for a throwaway machine or container (it runs the daemons as root, as ../shared/SLURM_TESTBED.md
# records). It refuses to touch an /etc/slurm/slurm.conf it did not write. Settings (environment):
#   AZHPC_TESTBED_DIR   state, spool, logs and config      [/var/lib/azhpc-testbed]
#   AZHPC_TESTBED_GPUS  fake GPUs per node                 [4]
#   AZHPC_TESTBED_CPUS  CPUs each node declares            [8; more than the machine has, so that the
#                       default resource requests fit: jobs share the real cores]
#   AZHPC_TESTBED_USER  an ordinary (non-root) user made here and given an association, who submits as on a real
#                       site (the tests submit as this user)          [azhpc]
set -euo pipefail

DIR=${AZHPC_TESTBED_DIR:-/var/lib/azhpc-testbed}
GPUS=${AZHPC_TESTBED_GPUS:-4}
CPUS=${AZHPC_TESTBED_CPUS:-8}
CLUSTER=azhpc
USER_NAME=${AZHPC_TESTBED_USER:-azhpc}
ETC=/etc/slurm
MARK="# written by azhpc slurm/testbed/testbed.sh"
NODES=(n1 n2)
PORTS=(17001 17002)

log() { echo "testbed: $*" >&2; }
die() { echo "testbed: $*" >&2; exit 1; }

need_root() { [ "$(id -u)" = 0 ] || die "must run as root (it installs packages and starts daemons): sudo $0 $1"; }

answers() { timeout 10 sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; }
all_answer() {  # every node takes jobs: none down, drained or not responding ("idle*")
  local states; states=$(timeout 10 sinfo -h -N -o '%T' 2>/dev/null) && [ -n "$states" ] &&
    ! grep -qvE '^(idle|mixed|allocated|completing|planned|reserved)$' <<<"$states"
}

install_packages() {
  local missing=()
  command -v slurmctld >/dev/null || missing+=(slurm-wlm)
  command -v munged >/dev/null || missing+=(munge)
  command -v slurmdbd >/dev/null || missing+=(slurmdbd)
  command -v mysqld_safe >/dev/null || missing+=(mariadb-server)
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]} (apt)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

write_config() {
  local host; host=$(hostname)
  mkdir -p "$DIR"/{etc,log,state,run,dev} "$DIR"/spool/{n1,n2} "$ETC"
  for f in slurm.conf gres.conf slurmdbd.conf; do
    if [ -e "$ETC/$f" ] && [ "$(readlink -f "$ETC/$f")" != "$DIR/etc/$f" ]; then
      die "$ETC/$f exists and is not the testbed's: this machine has its own Slurm; run the testbed on a throwaway machine"
    fi
  done
  # Fake GPUs: character devices (c 1 3, as /dev/null). Regular files are accepted but leave CUDA_VISIBLE_DEVICES empty.
  for n in "${NODES[@]}"; do
    for ((g = 0; g < GPUS; g++)); do
      [ -c "$DIR/dev/$n-gpu$g" ] || mknod "$DIR/dev/$n-gpu$g" c 1 3
    done
  done
  cat >"$DIR/etc/slurm.conf" <<EOF
$MARK
ClusterName=$CLUSTER
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=cred_expire=10
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
SlurmctldPort=16817
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=5,sched_interval=5
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
MaxArraySize=1001
InactiveLimit=0
KillWait=10
# A killed step that outlives this after SIGKILL drains its node ("Kill task failed"); the default 60 s is within
# reach of a loaded 2-core host, and a drained node holds every two-node job after it.
UnkillableStepTimeout=180
MinJobAge=300
SlurmctldTimeout=30
SlurmdTimeout=60
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStorageEnforce=limits
AccountingStorageTRES=gres/gpu
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
SlurmctldParameters=preempt_send_user_signal
NodeName=n1 NodeHostname=$host NodeAddr=127.0.0.1 Port=${PORTS[0]} CPUs=$CPUS RealMemory=4000 Gres=gpu:$GPUS State=UNKNOWN
NodeName=n2 NodeHostname=$host NodeAddr=127.0.0.1 Port=${PORTS[1]} CPUs=$CPUS RealMemory=4000 Gres=gpu:$GPUS State=UNKNOWN
PartitionName=normal Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4 PriorityTier=1 PreemptMode=REQUEUE GraceTime=30
PartitionName=urgent Nodes=n1,n2 MaxTime=INFINITE State=UP OverSubscribe=NO PriorityTier=10 PreemptMode=OFF
EOF
  {
    echo "$MARK"
    echo "AutoDetect=off"
    for n in "${NODES[@]}"; do echo "NodeName=$n Name=gpu File=$DIR/dev/$n-gpu[0-$((GPUS - 1))]"; done
  } >"$DIR/etc/gres.conf"
  cat >"$DIR/etc/slurmdbd.conf" <<EOF
$MARK
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
SlurmUser=root
LogFile=$DIR/log/slurmdbd.log
PidFile=$DIR/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=azhpc-testbed
StorageLoc=slurm_acct_db
EOF
  chmod 600 "$DIR/etc/slurmdbd.conf"
  for f in slurm.conf gres.conf slurmdbd.conf; do ln -sfn "$DIR/etc/$f" "$ETC/$f"; done
  # The node names must resolve (srun torchrun's rendezvous endpoint is the first node's name).
  grep -qE '^127\.0\.0\.1[[:space:]].*\bn1\b' /etc/hosts || echo "127.0.0.1 n1 n2" >>/etc/hosts
}

running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local t=$1 what=$2; shift 2
  for ((i = 0; i < t * 2; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.5; done
  die "$what did not come up within ${t}s (logs: $DIR/log)"
}

start_munge() {
  if ! pgrep -x munged >/dev/null; then
    mkdir -p /run/munge && chown munge:munge /run/munge
    [ -f /etc/munge/munge.key ] || { mungekey --create 2>/dev/null || create-munge-key -f; chown munge:munge /etc/munge/munge.key; }
    su -s /bin/sh munge -c /usr/sbin/munged
  fi
  wait_for 10 munge sh -c 'munge -n | unmunge'
}

start_mariadb() {
  if ! mysqladmin ping >/dev/null 2>&1; then
    mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld
    (mysqld_safe --user=mysql >"$DIR/log/mysqld_safe.log" 2>&1 &)
    wait_for 60 MariaDB mysqladmin ping
  fi
  mysql -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
            CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'azhpc-testbed';
            GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"
}

start_slurm() {
  running "$DIR/run/slurmdbd.pid" || slurmdbd
  wait_for 60 slurmdbd sacctmgr -n list cluster
  sacctmgr -i -Q add cluster "$CLUSTER" >/dev/null 2>&1 || true
  sacctmgr -i -Q add account azhpc Cluster="$CLUSTER" Description=testbed Organization=azhpc >/dev/null 2>&1 || true
  add_users
  reset_limits
  running "$DIR/run/slurmctld.pid" || slurmctld
  wait_for 30 slurmctld scontrol ping
  for n in "${NODES[@]}"; do running "$DIR/run/slurmd-$n.pid" || slurmd -N "$n"; done
  wait_for 60 "the compute nodes" answers
  resume_nodes
  partitions_up
}

resume_nodes() {  # nodes left down or drained (an unclean stop, a step that outlived UnkillableStepTimeout) come back,
                  # with SLURM's reason in the log: "already running" must not mean one node of two
  local bad n i
  for n in "${NODES[@]}"; do running "$DIR/run/slurmd-$n.pid" || slurmd -N "$n"; done  # a dead slurmd: RESUME cannot help
  bad=$(timeout 10 sinfo -h -N -o '%N %T' | awk '$2 ~ /down|drain|fail|inval|unknown|[*]$/ {print $1}' | sort -u | paste -sd, -) || bad=""
  if [ -n "$bad" ]; then
    log "resuming node(s) $bad: $(sinfo -h -R -o '%N: %E' | paste -sd';' -)"
    scontrol update NodeName="$bad" State=RESUME >/dev/null 2>&1 || true
  fi
  for ((i = 0; i < 180; i++)); do all_answer && return 0; sleep 0.5; done
  die "a compute node is still not in service after 90s: $(sinfo -h -N -o '%N %T %E' | sort -u | paste -sd, -) (logs: $DIR/log)"
}

partitions_up() {  # a partition a run left down or drained (a test sets the default one DOWN for a while) is up again
  local name state
  while read -r name state; do
    [ "$state" = up ] && continue
    log "setting partition $name up (a run left it $state)"
    scontrol update PartitionName="$name" State=UP >/dev/null 2>&1 || die "partition $name stays $state: scontrol update refused"
  done < <(timeout 10 sinfo -h -o '%R %a' 2>/dev/null || true)
}

submit_limits() {  # the submit limits in the testbed's accounting, on one line; empty when there are none
  local assoc qos
  assoc=$(sacctmgr -nP show assoc format=Account,User,MaxSubmit,GrpSubmit 2>/dev/null | awk -F'|' '$3 != "" || $4 != ""' | paste -sd, -) || true
  qos=$(sacctmgr -nP show qos format=Name,MaxSubmitPU,GrpSubmit 2>/dev/null | awk -F'|' '$2 != "" || $3 != "" {printf " qos %s", $0}') || true
  echo "$assoc$qos"
}

reset_limits() {  # accounting back to what start made: no submit limit on an association or QOS, no account but azhpc.
                  # The tests set MaxSubmitJobs/GrpSubmitJobs and add side accounts, and undo it afterwards; a run
                  # killed before its clean-up (a timeout, ^C) left MaxSubmitJobs=3, and every launch of the next run
                  # on this testbed was refused
  local left name acct out
  left=$(submit_limits)
  if [ -n "$left" ]; then
    log "removing submit limits a run left on the testbed (account|user|MaxSubmitJobs|GrpSubmitJobs): $left"
    for name in $(sacctmgr -nP show user format=User 2>/dev/null); do
      sacctmgr -i -Q modify user where name="$name" set MaxSubmitJobs=-1 GrpSubmitJobs=-1 >/dev/null 2>&1 || true
    done
    for acct in $(sacctmgr -nP list account format=account 2>/dev/null); do
      sacctmgr -i -Q modify account where name="$acct" set MaxSubmitJobs=-1 GrpSubmitJobs=-1 >/dev/null 2>&1 || true
    done
    for name in $(sacctmgr -nP show qos format=Name 2>/dev/null); do
      sacctmgr -i -Q modify qos where name="$name" set MaxSubmitJobsPerUser=-1 GrpSubmitJobs=-1 >/dev/null 2>&1 || true
    done
    left=$(submit_limits)
    [ -z "$left" ] || die "submit limits stay on the testbed after sacctmgr removed them: $left"
  fi
  for acct in $(sacctmgr -nP list account format=account 2>/dev/null | grep -vxE 'root|azhpc'); do
    log "removing account $acct that a run left on the testbed"
    sacctmgr -i -Q delete user where account="$acct" >/dev/null 2>&1 || true
    out=$(sacctmgr -i delete account "$acct" 2>&1) || log "account $acct stays: $(tail -1 <<<"$out")"
  done
}

ensure_user() {  # the ordinary user who submits (a home of its own: pip, torch and submitit write under ~)
  id "$USER_NAME" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$USER_NAME"
}

add_users() {  # every submitting user needs an association (AccountingStorageEnforce=limits refuses one without)
  local u
  for u in root "$USER_NAME" ${SUDO_USER:-}; do
    sacctmgr -n -P list user "$u" format=user 2>/dev/null | grep -qx "$u" || sacctmgr -i -Q add user "$u" Account=azhpc >/dev/null 2>&1 || true
  done
}

grant() {  # grant PYTHON...: the submitting user can run the project with each PYTHON (directories above it that it cannot enter,
           # such as a pyenv Python under /root, are opened for traversal only: o+x, no listing)
  local p d target part parts
  for p in "$@"; do
    for target in "$(readlink -f "$p")" "$(cd "$(dirname "$p")" && pwd -P)/$(basename "$p")"; do
      d=""
      IFS=/ read -ra parts <<<"$(dirname "$target")"
      for part in "${parts[@]}"; do  # from the top down: a closed parent hides an open child
        [ -n "$part" ] || continue
        d="$d/$part"
        runuser -u "$USER_NAME" -- test -x "$d" || { chmod o+x "$d"; log "opened $d for traversal (o+x) to $USER_NAME"; }
      done
    done
    runuser -u "$USER_NAME" -- "$p" -c "import alphazero_hpc, torch" ||
      die "$USER_NAME still cannot run $p with the project and torch (a folder or file it cannot read?)"
  done
}

stop_pid() {  # stop_pid PIDFILE
  if running "$1"; then
    local pid; pid=$(cat "$1"); kill "$pid"
    for ((i = 0; i < 40; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$1"
}

cmd=${1:-status}
case "$cmd" in
  start)
    need_root start
    ensure_user
    if answers; then
      before=$(cat "$DIR"/etc/*.conf | md5sum)
      write_config
      if [ "$before" = "$(cat "$DIR"/etc/*.conf | md5sum)" ]; then
        add_users
        reset_limits
        resume_nodes
        partitions_up
        log "already running: $(sinfo -h -o '%D nodes %T' | paste -sd, -); submitting user: $USER_NAME"; exit 0
      fi
      log "the testbed's config changed: restarting slurmctld and slurmd"
      for n in "${NODES[@]}"; do stop_pid "$DIR/run/slurmd-$n.pid"; done
      stop_pid "$DIR/run/slurmctld.pid"
    fi
    install_packages
    write_config
    start_munge
    start_mariadb
    start_slurm
    log "up: $(sinfo -h -N -p normal -o '%N %T %G %c CPUs' | paste -sd, -); accounting: $(sacctmgr -n list cluster format=cluster | xargs); submitting user: $USER_NAME"
    ;;
  stop)
    need_root stop
    for u in root "$USER_NAME"; do scancel --user="$u" >/dev/null 2>&1 || true; done
    for n in "${NODES[@]}"; do stop_pid "$DIR/run/slurmd-$n.pid"; done
    stop_pid "$DIR/run/slurmctld.pid"
    stop_pid "$DIR/run/slurmdbd.pid"
    mysqladmin shutdown >/dev/null 2>&1 || true
    log "stopped (config and accounting kept in $DIR)"
    ;;
  resume)  # what start does for the nodes and accounting of a testbed already up; the tests call it before each SLURM test
    need_root resume
    head -1 "$ETC/slurm.conf" 2>/dev/null | grep -qxF "$MARK" || die "$ETC/slurm.conf is not the testbed's: nothing resumed"
    reset_limits
    resume_nodes
    partitions_up
    ;;
  grant)
    need_root grant
    ensure_user
    shift
    grant "$@"
    ;;
  status)
    if answers; then sinfo -N -o '%N %T %G %C'; else die "not running (start it: sudo $0 start)"; fi
    ;;
  *)
    die "unknown command '$cmd': use start, stop, status, resume or grant"
    ;;
esac
