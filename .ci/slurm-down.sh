#!/usr/bin/env bash
# Stop the one-node SLURM cluster .ci/slurm-up.sh started (slurmd, slurmctld, munged), by pid file, and leave the
# SLURM configuration as slurm-up found it (.ci/slurm-conf.sh restore: its slurm.conf and gres.conf removed, the
# machine's own put back). Without that, every later `snakemake` call on this machine, a dry run too, would wait
# about 9 s for the stopped controller (docs/cluster.md). Idempotent: does nothing for daemons that do not run
# and for files that are not slurm-up's. Exits non-zero only when the configuration could not be restored.
set -uo pipefail

stop() {  # name pidfile
  local pid=""
  [ -s "$2" ] && pid=$(cat "$2")
  [ -n "$pid" ] || pid=$(pgrep -x "$1" | head -1)
  [ -n "$pid" ] || return 0
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.5; done
  kill -9 "$pid" 2>/dev/null || true
}

command -v scancel >/dev/null && scancel --quiet --user root 2>/dev/null
stop slurmd /run/slurm/slurmd.pid
stop slurmctld /run/slurm/slurmctld.pid
stop munged /run/munge/munged.pid
if ! "$(dirname "$0")/slurm-conf.sh" restore; then
  echo "slurm-down: stopped; the SLURM configuration could not be restored (above)" >&2
  exit 1
fi
echo "slurm-down: stopped; SLURM configuration restored"
