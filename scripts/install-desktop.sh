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
# XDG_DATA_HOME (default ~/.local/share) picks where the files go.
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
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "install-desktop.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

desktop="$DATA/applications/$ID.desktop"
icons="$DATA/icons/hicolor"
sizes=(16 32 48 64 128 256)

refresh() {
  command -v update-desktop-database >/dev/null 2>&1 && update-desktop-database -q "$DATA/applications" || true
  command -v gtk-update-icon-cache >/dev/null 2>&1 && gtk-update-icon-cache -q -t "$icons" 2>/dev/null || true
}

if [ "$uninstall" = 1 ]; then
  rm -f "$desktop" "$icons/scalable/apps/$ID.svg"
  for s in "${sizes[@]}"; do rm -f "$icons/${s}x${s}/apps/$ID.png"; done
  refresh
  echo "Removed $desktop and the icons."
  exit 0
fi

# A .desktop Exec value: the program quoted (spaces, non-ASCII), with \ " ` $ escaped inside quotes.
quote_exec() {
  local s=$1
  s=${s//\\/\\\\\\\\}
  s=${s//\"/\\\\\"}
  s=${s//\`/\\\\\`}
  s=${s//\$/\\\\\$}
  s=${s//%/%%}
  printf '"%s"' "$s"
}

if [ -n "$exec_cmd" ]; then
  program=$exec_cmd
else
  program="$bundle/$APP"
  if [ ! -x "$program" ]; then
    echo "install-desktop.sh: no app at $program; build it with scripts/build-app.sh, or pass --bundle DIR / --exec CMD." >&2
    exit 1
  fi
fi

mkdir -p "$DATA/applications" "$icons/scalable/apps"
cp resources/icons/$ID.svg "$icons/scalable/apps/$ID.svg"
for s in "${sizes[@]}"; do
  mkdir -p "$icons/${s}x${s}/apps"
  cp "resources/icons/$ID-$s.png" "$icons/${s}x${s}/apps/$ID.png"
done

tmp=$(mktemp "$DATA/applications/.$ID.XXXXXX")
cat > "$tmp" <<EOF
[Desktop Entry]
Type=Application
Version=1.5
Name=$APP
GenericName=Document question answering
Comment=Answer questions from your own documents, images and videos, offline
Exec=$(quote_exec "$program") gui %F
TryExec=$program
Icon=$ID
Terminal=false
Categories=Office;Utility;
Keywords=RAG;search;PDF;OCR;documents;questions;
MimeType=application/pdf;image/png;image/jpeg;image/webp;image/tiff;image/gif;image/bmp;video/mp4;video/x-matroska;video/webm;video/quicktime;text/plain;text/markdown;inode/directory;
StartupNotify=true
StartupWMClass=$APP
SingleMainWindow=true
EOF
chmod 644 "$tmp"
mv "$tmp" "$desktop"
refresh
echo "Installed $desktop (runs: $program)."
