#!/usr/bin/env bash
# Stop the one-node SLURM cluster .ci/slurm-up.sh started (slurmd, slurmctld, munged), by pid file.
# Idempotent: does nothing for daemons that do not run.
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
echo "slurm-down: stopped"
