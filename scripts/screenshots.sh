#!/usr/bin/env bash
# Launch the real app under a virtual display (Xvfb), drive a scripted VRAG run end to end and save
# screenshots of the main window, the reasoning graph and the evidence view into docs/screenshots/,
# at two screen sizes in both themes (main-window-1280x800.png, main-window-1920x1080-dark.png, …).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/display-deps.sh
export HF_HUB_OFFLINE=1 QT_QPA_PLATFORM=xcb
# A small laptop screen and a common desktop one: the window sizes and lays itself out for each.
for size in 1280x800 1920x1080; do
  for theme in light dark; do
    xvfb-run -a -s "-screen 0 ${size}x24" .venv/bin/python scripts/screenshots.py --theme "$theme" "$@"
  done
done
