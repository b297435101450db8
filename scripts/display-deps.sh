#!/usr/bin/env bash
# Install what Qt needs to open windows on a display-less Linux machine: Xvfb and the xcb libraries
# PySide6's xcb platform plugin loads (Debian/Ubuntu package names). Needs root (or sudo).
# Without libxcb-icccm4 / libxcb-keysyms1 Qt prints a misleading "xcb-cursor0 is needed" error.
# --browser also installs Chromium, which tests/test_eval_report_browser.py renders the evaluation
# report in (Debian: ~81 MB download, ~290 MB installed, ~3 min here; so not part of setup.sh).
set -euo pipefail
pkgs=(xvfb xauth libxkbcommon-x11-0 libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-image0
      libxcb-randr0 libxcb-render-util0 libxcb-shape0 libxcb-xinerama0 libxcb-xfixes0 libxcb-xkb1
      libx11-xcb1 libegl1 libgl1 libfontconfig1 libdbus-1-3 fonts-dejavu-core)
[ "${1:-}" = --browser ] && pkgs+=(chromium)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "Please install Xvfb and the Qt xcb libraries with your package manager: ${missing[*]}" >&2
  exit 1
fi
sudo=()
[ "$(id -u)" = 0 ] || sudo=(sudo)
echo "Installing ${missing[*]}…"
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
