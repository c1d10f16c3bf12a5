#!/usr/bin/env bash
# A real single-node SLURM cluster on this machine, for tests/cluster/test_slurm.py and `make test-cluster`:
# munge, MariaDB, slurmdbd (job accounting: Snakemake's SLURM executor asks sacct for job states), slurmctld and slurmd,
# all bound to 127.0.0.1 on free ports, with every file (configuration, state, logs, the database) in one folder.
#
#   tests/cluster/slurm.sh start DIR     start it (installing Debian's packages when missing), wait until the node is
#                                        idle, print `export SLURM_CONF=DIR/slurm.conf`; nothing else is touched
#   tests/cluster/slurm.sh stop DIR      stop the daemons that `start` started, by the PIDs it recorded in DIR/pids
#   tests/cluster/slurm.sh run DIR CMD.. start, run CMD with SLURM_CONF set, stop (also when CMD fails or is interrupted)
#
# The node is this host, with its real cores and memory (minus 1 GiB for the daemons), and one GPU-type generic
# resource (`gpu:1`, no device file: it is counted, not used) so that a run asking for --gres=gpu:1 is scheduled and two
# such runs never share the node at once. Root is needed (slurmd starts jobs, munged's key is root's): as another user
# the script runs itself again with sudo. No systemd is assumed: the daemons run in the foreground under this script's
# children, each one's PID recorded.
set -euo pipefail

die() { echo "slurm.sh: $*" >&2; exit 1; }
[ $# -ge 2 ] || die "usage: $0 start|stop|run DIR [CMD ...]"
cmd=$1; dir=$2; shift 2

if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || die "needs root (slurmd, munged) and sudo is not installed"
  exec sudo -E "$0" "$cmd" "$dir" "$@"
fi

PACKAGES=(slurm-wlm slurmdbd slurm-client munge mariadb-server)

install_packages() {
  local missing=()
  for p in "${PACKAGES[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  local t0=$SECONDS
  echo "slurm.sh: installing Debian's ${missing[*]} (apt)" >&2
  # policy-rc.d refuses the packages' own service starts: this script starts what it needs, where it needs it
  local policy=/usr/sbin/policy-rc.d made_policy=0
  if [ ! -e $policy ]; then printf '#!/bin/sh\nexit 101\n' > $policy; chmod +x $policy; made_policy=1; fi
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  [ $made_policy -eq 1 ] && rm -f $policy
  echo "slurm.sh: installed in $((SECONDS - t0)) s" >&2
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

wait_for() {  # wait_for SECONDS WHAT COMMAND...: poll until COMMAND succeeds
  local limit=$1 what=$2; shift 2
  for _ in $(seq $((limit * 4))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.25; done
  die "$what did not come up in $limit s (logs in $dir/log/)"
}

daemon() {  # daemon NAME COMMAND...: start COMMAND in the background (it stays in the foreground), record its PID
  local name=$1; shift
  "$@" >"$dir/log/$name.out" 2>&1 &
  echo "$! $name" >> "$dir/pids"
}

start() {
  install_packages
  [ -e "$dir/pids" ] && die "$dir/pids exists: a cluster started there may still run ($0 stop $dir)"
  mkdir -p "$dir"/{log,munge,mysql,state,spool,run}
  chmod 700 "$dir" "$dir/munge"
  dir=$(cd "$dir" && pwd)
  : > "$dir/pids"
  local host cpus mem ctld_port d_port dbd_port db_port pass
  host=$(hostname -s)
  cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)   # the cores: nproc alone reports a caller's OMP_NUM_THREADS instead (a limit of 1 left a 2-CPU job pending forever)
  mem=$(( $(awk '/^MemTotal/ {print int($2/1024)}' /proc/meminfo) - 1024 ))
  ctld_port=$(free_port); d_port=$(free_port); dbd_port=$(free_port); db_port=$(free_port)
  pass=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')

  # munge: its own key and socket (a munged already on the machine is left alone)
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  daemon munged munged --foreground --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --seed-file="$dir/munge/munged.seed" --log-file="$dir/log/munged.log"
  wait_for 20 munged test -S "$dir/munge/munge.socket"

  # MariaDB on 127.0.0.1 for slurmdbd
  mariadb-install-db --no-defaults --datadir="$dir/mysql" --user=root --auth-root-authentication-method=socket >"$dir/log/mariadb-install.out" 2>&1
  daemon mariadbd mariadbd --no-defaults --datadir="$dir/mysql" --user=root --bind-address=127.0.0.1 --port="$db_port" \
    --socket="$dir/run/mysqld.sock" --pid-file="$dir/run/mysqld.pid" --log-error="$dir/log/mariadb.log" --skip-name-resolve
  wait_for 60 MariaDB mariadb --no-defaults --socket="$dir/run/mysqld.sock" -e 'select 1'
  mariadb --no-defaults --socket="$dir/run/mysqld.sock" -e "CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;"

  cat > "$dir/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$dbd_port
SlurmUser=root
LogFile=$dir/log/slurmdbd.log
PidFile=$dir/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$db_port
StorageUser=slurm
StoragePass=$pass
StorageLoc=slurm_acct_db
EOF
  chmod 600 "$dir/slurmdbd.conf"

  cat > "$dir/slurm.conf" <<EOF
# written by tests/cluster/slurm.sh: one node, this host, on 127.0.0.1
ClusterName=judgelab
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=5
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$dbd_port
# for the connections to slurmdbd the munge socket is given here (AuthInfo covers the others)
AccountingStoragePass=$dir/munge/munge.socket
AccountingStorageTRES=gres/gpu
AccountingStoreFlags=job_comment
JobCompType=jobcomp/none
MinJobAge=300
KillWait=5
GresTypes=gpu
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem Gres=gpu:1 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  echo "NodeName=$host Name=gpu Count=1 File=/dev/null" > "$dir/gres.conf"
  echo "export SLURM_CONF=$dir/slurm.conf" > "$dir/env"
  # Snakemake's job step (snakemake-executor-plugin-slurm-jobstep) starts each run with an inner srun whose environment it
  # strips of every SLURM_* variable, SLURM_CONF included: that srun reads the compiled-in /etc/slurm/slurm.conf only.
  # So the configuration is linked there while the cluster runs (and only where no other SLURM configuration is).
  if [ -e /etc/slurm/slurm.conf ] || [ -L /etc/slurm/slurm.conf ]; then
    [ "$(readlink /etc/slurm/slurm.conf 2>/dev/null || true)" = "" ] && die "/etc/slurm/slurm.conf exists: this machine has its own SLURM configuration, which this test cluster will not replace"
    old=$(readlink /etc/slurm/slurm.conf)
    [ -e "$old" ] && die "/etc/slurm/slurm.conf links to $old, a test cluster that may still run ($0 stop $(dirname "$old"))"
    rm -f /etc/slurm/slurm.conf
  fi
  mkdir -p /etc/slurm
  ln -s "$dir/slurm.conf" /etc/slurm/slurm.conf
  echo "/etc/slurm/slurm.conf" > "$dir/linked"
  export SLURM_CONF=$dir/slurm.conf

  daemon slurmdbd slurmdbd -D
  wait_for 60 slurmdbd bash -c "exec 3<>/dev/tcp/127.0.0.1/$dbd_port"
  # the cluster and an account for root in the database (sacct lists jobs of known associations)
  sacctmgr -i add cluster judgelab >/dev/null
  sacctmgr -i add account judgelab Cluster=judgelab Description=tests Organization=judgelab >/dev/null
  sacctmgr -i add user root Account=judgelab DefaultAccount=judgelab >/dev/null
  daemon slurmctld slurmctld -D -i
  wait_for 60 slurmctld scontrol ping
  daemon slurmd slurmd -D -N "$host"
  wait_for 90 "the node $host (idle)" bash -c "sinfo -h -N -o '%T' | grep -qx idle"
  echo "slurm.sh: SLURM $(sinfo -V | awk '{print $2}') running, node $host ($cpus CPUs, $mem MB, gpu:1) idle; state in $dir" >&2
  echo "export SLURM_CONF=$dir/slurm.conf"
}

stop() {
  [ -f "$dir/pids" ] || return 0
  # jobs first (their processes are slurmd's children), then the daemons in the reverse order of their start
  SLURM_CONF=$dir/slurm.conf timeout 10 scancel --user=root >/dev/null 2>&1 || true
  tac "$dir/pids" | while read -r pid name; do
    kill -TERM "$pid" 2>/dev/null || continue
    for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "$pid" 2>/dev/null && echo "slurm.sh: $name ($pid) did not stop in 10 s: killed" >&2 || true
  done
  mv "$dir/pids" "$dir/pids.stopped"
  if [ -f "$dir/linked" ] && [ "$(readlink /etc/slurm/slurm.conf 2>/dev/null)" = "$dir/slurm.conf" ]; then rm -f /etc/slurm/slurm.conf; fi
  rm -f "$dir/linked"
}

case $cmd in
  start) start ;;
  stop) stop ;;
  run)
    [ $# -ge 1 ] || die "run: no command"
    trap stop EXIT INT TERM
    start >/dev/null
    export SLURM_CONF=$dir/slurm.conf
    "$@" ;;
  *) die "unknown command $cmd: start, stop or run" ;;
esac
