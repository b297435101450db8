#!/usr/bin/env bash
# Set everything up, run the static checks (ruff lint, ruff format check, mypy), then the whole test
# suite (the import-linter contract runs inside it; two shards side by side) with the trainer's
# tests beside it in its own environment (.venv-trainer). Any failing step fails the command, and so
# CI; both suites always run to the end. Extra arguments go to the app's pytest. The suite includes the frozen-app test
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
# Three test processes side by side (much of the suite waits on child processes and servers, so a
# 2-core machine has room): the trainer's tests in their environment; the Qt tests with the real-vLLM
# and frozen-app tests (shard A, in the order a single run has them); everything else (shard B).
# Each shard is one ordinary pytest process. Paths in the arguments, or VRAG_TEST_SHARDS=0: one
# process, as given. Output of the trainer and shard A follows shard B's.
mkdir -p build
echo "pytest trainer/tests (in $TRAINER_VENV, beside the app's tests; log: build/trainer-tests.log)"
"$TRAINER_VENV/bin/python" -m pytest trainer/tests -q > build/trainer-tests.log 2>&1 &
trainer_pid=$!
shard_a=(tests/qt tests/test_vllm_real.py tests/test_vllm_rollouts.py tests/test_frozen_app.py tests/test_frozen_readonly.py)
paths=0
for arg in "$@"; do [[ "$arg" != -* && -e "$arg" ]] && paths=1; done
if [ "${VRAG_TEST_SHARDS:-1}" = 0 ] || [ "$paths" = 1 ]; then
  .venv/bin/python -m pytest "$@" || status=$?
else
  echo "pytest shard A: ${shard_a[*]} (log: build/tests-shard-a.log)"
  .venv/bin/python -m pytest "$@" "${shard_a[@]}" > build/tests-shard-a.log 2>&1 &
  a_pid=$!
  ignores=()
  for p in "${shard_a[@]}"; do ignores+=("--ignore=$p"); done
  echo "pytest shard B: tests except shard A"
  .venv/bin/python -m pytest "$@" tests "${ignores[@]}" || status=$?
  wait "$a_pid" || status=1
  echo "---- shard A (build/tests-shard-a.log)"
  cat build/tests-shard-a.log
fi
trainer_status=0
wait "$trainer_pid" || trainer_status=$?
echo "---- trainer/tests (build/trainer-tests.log)"
cat build/trainer-tests.log
[ "$trainer_status" = 0 ] || status=$trainer_status
if [ -n "$build_pid" ]; then
  wait "$build_pid" || { echo "frozen-app build failed (see build/build-app.log)"; status=1; }
fi
exit "$status"
