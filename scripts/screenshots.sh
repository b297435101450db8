#!/usr/bin/env bash
# Launch the real app under a virtual display (Xvfb), drive a scripted VRAG run end to end and save
# screenshots of the main window, the reasoning graph and the evidence view into docs/screenshots/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/display-deps.sh
export HF_HUB_OFFLINE=1 QT_QPA_PLATFORM=xcb
for theme in light dark; do
  xvfb-run -a -s "-screen 0 1600x1000x24" .venv/bin/python scripts/screenshots.py --theme "$theme" "$@"
done
