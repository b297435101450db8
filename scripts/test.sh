#!/usr/bin/env bash
# Set everything up, run the static checks (ruff lint, ruff format check, mypy), then the whole test
# suite (the import-linter contract runs inside it). Any failing step fails the command, and so CI.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 QT_QPA_PLATFORM=offscreen
checked=(vrag_desktop tests bench scripts)
echo "ruff check ${checked[*]}"
.venv/bin/ruff check "${checked[@]}"
echo "ruff format --check ${checked[*]}"
.venv/bin/ruff format --check "${checked[@]}"
echo "mypy vrag_desktop"
.venv/bin/mypy vrag_desktop
exec .venv/bin/python -m pytest "$@"
