#!/usr/bin/env bash
# Set everything up, run the static checks (ruff lint, ruff format check, mypy), then the whole test
# suite (the import-linter contract runs inside it), then the trainer's tests in its own environment
# (.venv-trainer). Any failing step fails the command, and so CI; both suites run even if the first
# fails. Extra arguments go to the app's pytest. The suite includes the frozen-app test
# (tests/test_frozen_app.py: builds the double-click app with scripts/build-app.sh when it is out of
# date, minutes); VRAG_SKIP_FROZEN=1 skips it locally, CI runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The frozen-app build (minutes, mostly one core) overlaps the checks and the other tests; the frozen
# test's own scripts/build-app.sh call waits for it, then finds the bundle up to date.
build_pid=
if [ "${VRAG_SKIP_FROZEN:-0}" != 1 ]; then
  mkdir -p build
  echo "building the frozen app in the background (log: build/build-app.log)"
  bash scripts/build-app.sh --no-setup > build/build-app.log 2>&1 &
  build_pid=$!
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 QT_QPA_PLATFORM=offscreen
checked=(vrag_desktop tests bench scripts trainer)
echo "ruff check ${checked[*]}"
.venv/bin/ruff check "${checked[@]}"
echo "ruff format --check ${checked[*]}"
.venv/bin/ruff format --check "${checked[@]}"
echo "mypy vrag_desktop"
.venv/bin/mypy vrag_desktop
# The trainer imports TRL and accelerate, which only its environment has.
echo "mypy trainer/vrag_trainer"
TRAINER_VENV=${VRAG_TRAINER_VENV:-.venv-trainer}
.venv/bin/mypy --python-executable "$TRAINER_VENV/bin/python" trainer/vrag_trainer
status=0
.venv/bin/python -m pytest "$@" || status=$?
echo "pytest trainer/tests (in $TRAINER_VENV)"
"$TRAINER_VENV/bin/python" -m pytest trainer/tests -q || status=$?
if [ -n "$build_pid" ]; then
  wait "$build_pid" || { echo "frozen-app build failed (see build/build-app.log)"; status=1; }
fi
exit "$status"
