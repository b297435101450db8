#!/usr/bin/env bash
# Set everything up and run the whole test suite (the import-linter contract runs inside it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 QT_QPA_PLATFORM=offscreen
exec .venv/bin/python -m pytest "$@"
