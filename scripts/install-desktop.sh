#!/usr/bin/env bash
# Put VRAG Desktop in the desktop's application menu (Linux, freedesktop.org): a .desktop file and
# the icon, for the current user (~/.local/share; no sudo). Files and folders opened with it from a
# file manager ("Open with VRAG Desktop", or dropped on the launcher) are added to a corpus; if the
# app is already open, its window comes forward and takes them.
#
#   scripts/install-desktop.sh                   the bundle in "dist/VRAG Desktop" (scripts/build-app.sh)
#   scripts/install-desktop.sh --bundle DIR      a bundle elsewhere (moved or unpacked: run it again after a move)
#   scripts/install-desktop.sh --exec CMD        any command instead, e.g. "$PWD/.venv/bin/vrag-desktop"
#   scripts/install-desktop.sh --uninstall       remove what it installed
#
# XDG_DATA_HOME (default ~/.local/share) picks where the files go. The bundle does the same without a
# checkout: "VRAG Desktop" --install-desktop (and --uninstall-desktop).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
APP="VRAG Desktop"
ID=vrag-desktop
DATA=${XDG_DATA_HOME:-$HOME/.local/share}
bundle="$ROOT/dist/$APP"
exec_cmd=""
uninstall=0
while [ $# -gt 0 ]; do
  case "$1" in
    --bundle) bundle=$(cd "$2" && pwd); shift 2 ;;
    --exec) exec_cmd=$2; shift 2 ;;
    --uninstall) uninstall=1; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "install-desktop.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

# The entry and the icons are written by the app's own code (vrag_desktop/core/desktop_entry.py, which
# `"VRAG Desktop" --install-desktop` runs too), with this checkout's Python.
PY=${PYTHON:-python3}
[ ! -x .venv/bin/python ] || PY=.venv/bin/python
entry() { PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" XDG_DATA_HOME="$DATA" "$PY" -m vrag_desktop.core.desktop_entry "$@"; }

if [ "$uninstall" = 1 ]; then
  entry --uninstall
  exit 0
fi

if [ -n "$exec_cmd" ]; then
  program=$exec_cmd
else
  program="$bundle/$APP"
  if [ ! -x "$program" ]; then
    echo "install-desktop.sh: no app at $program; build it with scripts/build-app.sh, or pass --bundle DIR / --exec CMD." >&2
    exit 1
  fi
fi
entry --exec "$program"
