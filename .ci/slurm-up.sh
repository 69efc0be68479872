#!/usr/bin/env bash
# Start a one-node SLURM cluster on this host for tests/test_slurm.py (Debian's slurm-wlm + munge).
# Idempotent: installs the packages if missing, (re)writes /etc/slurm/slurm.conf and gres.conf for this
# host (name, CPUs and memory read from the machine), starts munged, slurmctld and slurmd unless they
# run, and waits until the node is idle. Needs root. No accounting daemon: the profile's status checks
# use squeue, so finished jobs stay visible for MinJobAge seconds.
# The configuration files go in through .ci/slurm-conf.sh: the machine's own slurm.conf and gres.conf, if any,
# are saved first, and .ci/slurm-down.sh puts them back (and removes ours), leaving the machine as it was.
# The node advertises one GPU through a gres whose device file is /dev/null: jobs that ask for `--gpus=1`
# are scheduled as on a GPU node and run on the CPU.
set -euo pipefail

if [ "$(id -u)" != 0 ]; then
  echo "slurm-up: needs root" >&2
  exit 1
fi

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null \
   || ! command -v sbatch >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq slurm-wlm munge >/dev/null
fi

HOST=$(hostname -s)
CPUS=$(nproc)
# RealMemory a little below the machine's, so slurmd accepts the node (MB).
MEM=$(awk '/MemTotal/ {printf "%d", $2 / 1024 * 0.9}' /proc/meminfo)

mkdir -p /var/log/slurm /var/lib/slurm/slurmctld /var/lib/slurm/slurmd /run/slurm
NEW=$(mktemp -d)
trap 'rm -rf "$NEW"' EXIT
cat >"$NEW/slurm.conf" <<EOF
# Written by r2med-eval's .ci/slurm-up.sh: a one-node test cluster, no accounting.
ClusterName=r2med
SlurmctldHost=${HOST}
AuthType=auth/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=5
# Without cgroups, memory is enforced by polling: a job above its --mem is killed (OUT_OF_MEMORY).
JobAcctGatherParams=OverMemoryKill
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
# Finished jobs stay visible to squeue for 10 minutes (the executor's status checks rely on it).
MinJobAge=600
KillWait=5
InactiveLimit=0
Waittime=0
NodeName=${HOST} NodeAddr=127.0.0.1 CPUs=${CPUS} RealMemory=${MEM} Gres=gpu:1 State=UNKNOWN
PartitionName=main Nodes=${HOST} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
cat >"$NEW/gres.conf" <<EOF
# Written by r2med-eval's .ci/slurm-up.sh: one fake GPU (/dev/null as its device file), scheduling only.
NodeName=${HOST} Name=gpu File=/dev/null Count=1
EOF
# stops here (set -e) when the machine's own configuration could not be saved
installed=$("$(dirname "$0")/slurm-conf.sh" install "$NEW")
changed=0
if [ "$installed" = changed ]; then changed=1; fi

running() { pgrep -x "$1" >/dev/null; }

if [ "$changed" = 1 ]; then
  # A new configuration: restart whatever runs.
  for d in slurmd slurmctld; do
    if running "$d"; then
      kill "$(cat /run/slurm/$d.pid 2>/dev/null || pgrep -x "$d")" 2>/dev/null || true
    fi
  done
  for _ in $(seq 1 20); do running slurmd || running slurmctld || break; sleep 0.5; done
fi

if ! running munged; then
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  chmod 0755 /run/munge
  [ -s /etc/munge/munge.key ] || { dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null;
                                   chown munge:munge /etc/munge/munge.key; chmod 0400 /etc/munge/munge.key; }
  runuser -u munge -- /usr/sbin/munged
fi
for _ in $(seq 1 20); do munge -n >/dev/null 2>&1 && break; sleep 0.5; done

running slurmctld || /usr/sbin/slurmctld
running slurmd || /usr/sbin/slurmd

# Wait for the node to be schedulable.
for _ in $(seq 1 60); do
  state=$(sinfo -h -N -n "$HOST" -o '%t' 2>/dev/null | head -1 || true)
  case "$state" in
    idle|mix|alloc) echo "slurm-up: node $HOST is $state (CPUs=$CPUS RealMemory=${MEM}MB, gpu:1)"; exit 0 ;;
    down*|drain*) scontrol update nodename="$HOST" state=resume 2>/dev/null || true ;;
  esac
  sleep 1
done
echo "slurm-up: node $HOST did not become idle; state '${state:-unknown}'. Logs: /var/log/slurm/" >&2
sinfo -N -l >&2 || true
exit 1
