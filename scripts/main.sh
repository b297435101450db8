#!/usr/bin/env bash
# Set everything up and open VRAG Desktop. On first launch the app indexes the bundled sample corpus.
# On a machine without a display it says so and runs the same job on the command line instead:
# index the sample corpus and search it (open the window with `xvfb-run -a scripts/main.sh`, or see
# scripts/screenshots.sh for a scripted run under a virtual display).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}${QT_QPA_PLATFORM:-}" ] || [ "$(uname)" = Darwin ]; then
  exec .venv/bin/vrag-desktop "$@"
fi
.venv/bin/vrag-desktop || true   # prints what to do without a display
echo
echo "Meanwhile, the same job on the command line:"
.venv/bin/vrag-desktop index resources/sample_corpus --corpus sample
echo
echo '$ vrag-desktop search "How heavy a load can the Atlas robot carry?" --corpus sample'
.venv/bin/vrag-desktop search "How heavy a load can the Atlas robot carry?" --corpus sample -k 3
