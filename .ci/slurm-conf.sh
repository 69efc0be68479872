#!/usr/bin/env bash
# The SLURM configuration files of the one-node test cluster, put in place and taken away so that the machine's
# own configuration comes back as it was (.ci/slurm-up.sh and .ci/slurm-down.sh call this).
#
#   slurm-conf.sh install DIR   put DIR/slurm.conf and DIR/gres.conf into the SLURM folder. A file there that this
#                               script did not write is first moved to the save folder (once: the machine's own);
#                               a folder it had to create is noted. Prints "changed" when a file changed.
#   slurm-conf.sh restore       remove the files this script wrote, move the saved ones back (mode, owner and time
#                               kept), remove the SLURM folder if install created it and it is empty, and the save
#                               folder once empty.
#
# Both are idempotent. Files this script writes begin with MARKER (or are the gres.conf of an older slurm-up.sh);
# nothing else is ever removed. A left-over
# configuration matters beyond the cluster's life: with slurm.conf naming a stopped controller, every `snakemake`
# call (a dry run too) waits about 9 s, because the SLURM executor plugin runs `scontrol show config` at start-up
# and scontrol retries the controller (docs/cluster.md). The folders can be moved for tests:
# R2MED_SLURM_ETC (default /etc/slurm) and R2MED_SLURM_SAVE (default /var/backups/r2med-eval-slurm).
set -euo pipefail

ETC=${R2MED_SLURM_ETC:-/etc/slurm}
SAVE=${R2MED_SLURM_SAVE:-/var/backups/r2med-eval-slurm}
MARKER="# Written by r2med-eval's .ci/slurm-up.sh"
FILES="slurm.conf gres.conf"

# gres.conf as slurm-up.sh wrote it before this script existed (its first line), also ours
LEGACY_GRES="# One fake GPU (/dev/null as its device file): scheduling only."

ours() {
  [ -f "$1" ] && [ ! -L "$1" ] || return 1
  local first
  first=$(head -n 1 "$1")
  case "$first" in
    "$MARKER"*) return 0 ;;
    "$LEGACY_GRES") [ "$(basename "$1")" = gres.conf ] ;;
    *) return 1 ;;
  esac
}

install_from() {
  local src=$1 f changed=0
  for f in $FILES; do
    ours "$src/$f" || { echo "slurm-conf: $src/$f does not begin with '$MARKER'" >&2; exit 2; }
  done
  if [ ! -d "$ETC" ]; then
    mkdir -p "$ETC" "$SAVE"
    : >"$SAVE/created-etc"
  fi
  for f in $FILES; do
    if [ -e "$ETC/$f" ] || [ -L "$ETC/$f" ]; then
      if ! ours "$ETC/$f"; then
        if [ -e "$SAVE/$f" ] || [ -L "$SAVE/$f" ]; then
          echo "slurm-conf: $ETC/$f was not written by .ci/slurm-up.sh, and $SAVE/$f holds an earlier saved" \
               "copy; move one of them away (the saved copy is what .ci/slurm-down.sh would restore)" >&2
          exit 1
        fi
        mkdir -p "$SAVE"
        mv "$ETC/$f" "$SAVE/$f"
      fi
    fi
    if ! cmp -s "$src/$f" "$ETC/$f"; then
      cp "$src/$f" "$ETC/$f.new"
      chmod 0644 "$ETC/$f.new"
      mv "$ETC/$f.new" "$ETC/$f"
      changed=1
    fi
  done
  if [ "$changed" = 1 ]; then echo changed; fi
}

restore() {
  local f
  for f in $FILES; do
    if ours "$ETC/$f"; then
      rm -f "$ETC/$f"
    fi
    if [ -e "$SAVE/$f" ] || [ -L "$SAVE/$f" ]; then
      if [ -e "$ETC/$f" ] || [ -L "$ETC/$f" ]; then
        echo "slurm-conf: $ETC/$f was not written by .ci/slurm-up.sh; left as it is, and the copy saved before" \
             "the test cluster stays in $SAVE/$f" >&2
      else
        mv "$SAVE/$f" "$ETC/$f"
      fi
    fi
  done
  if [ -e "$SAVE/created-etc" ]; then
    rmdir "$ETC" 2>/dev/null || true
    rm -f "$SAVE/created-etc"
  fi
  rmdir "$SAVE" 2>/dev/null || true
}

case "${1:-}" in
  install) [ $# = 2 ] || { echo "usage: $0 install DIR" >&2; exit 2; }; install_from "$2" ;;
  restore) restore ;;
  *) echo "usage: $0 install DIR | restore" >&2; exit 2 ;;
esac
