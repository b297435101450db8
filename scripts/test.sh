#!/usr/bin/env bash
# Set everything up, run the static checks (ruff lint, ruff format check, mypy), then the whole test
# suite (the import-linter contract runs inside it) and the trainer's tests in their own environment
# (.venv-trainer). Any failing step fails the command, and so CI; every part runs to its end even if
# another fails. Extra arguments go to the app's pytest. The suite includes the frozen-app tests
# (tests/test_frozen_app.py: builds the double-click app with scripts/build-app.sh when it is out of
# date, minutes); VRAG_SKIP_FROZEN=1 skips them locally, CI runs them.
#
# Much of the suite waits on child processes, servers and a GUI event loop, so on two cores the work
# runs side by side: the frozen-app build from the start; after the static checks, three shards:
# the Qt and real-vLLM tests (log build/tests-qt.log); the trainer's tests, then a few long
# self-contained app tests (log build/tests-trainer.log); the other app tests (this terminal), the
# frozen-app tests last so the build has time to finish. Each shard is one ordinary pytest process
# (two for the trainer's) in the order a single run would have. VRAG_TEST_SHARDS=0, or paths among
# the arguments: one process, as given, then the trainer's tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
mkdir -p build
# The frozen-app build (~8 CPU-minutes, mostly one core) overlaps the checks and the other tests at
# their priority: niced beside three busy shards it got almost no CPU and finished only after them,
# and the frozen tests (last; their own scripts/build-app.sh call waits for it, then finds the
# bundle up to date) waited 7 minutes for it on one core while the other idled.
build_pid=
if [ "${VRAG_SKIP_FROZEN:-0}" != 1 ]; then
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
trainer_tests() {
  echo "pytest trainer/tests (in $TRAINER_VENV)"
  "$TRAINER_VENV/bin/python" -m pytest trainer/tests -q --durations=15
}
paths=0
for arg in "$@"; do [[ "$arg" != -* && -e "$arg" ]] && paths=1; done
if [ "${VRAG_TEST_SHARDS:-1}" = 0 ] || [ "$paths" = 1 ]; then
  .venv/bin/python -m pytest "$@" || status=$?
  trainer_tests || status=$?
else
  # the tests of the built bundle last: the background build has to finish first
  frozen=(tests/test_frozen_app.py tests/test_frozen_readonly.py tests/test_bundle_glibc.py
    tests/test_installers.py)
  # the real-vLLM tests go with the Qt tests, and these long self-contained ones (none uses the
  # session's sample index) after the trainer's: the three shards then take about as long
  vllm=(tests/test_vllm_real.py tests/test_vllm_rollouts.py)
  long=(tests/test_soak.py tests/test_resume_sigkill.py tests/test_exif.py tests/test_warmup.py
    tests/test_store_and_legacy.py tests/test_original_layout.py tests/test_bombs.py
    tests/test_models_cli.py tests/test_cli_runtime.py tests/test_index_integrity.py tests/test_bad_inputs.py
    tests/test_derive_process.py tests/test_agent_perf_speculation.py)
  others=()
  for f in tests/test_*.py; do
    [[ " ${frozen[*]} ${vllm[*]} ${long[*]} " == *" $f "* ]] || others+=("$f")
  done
  echo "pytest tests/qt ${vllm[*]} (beside the other tests; log: build/tests-qt.log)"
  .venv/bin/python -m pytest --durations=20 "$@" tests/qt "${vllm[@]}" > build/tests-qt.log 2>&1 &
  qt_pid=$!
  echo "pytest trainer/tests, then ${long[*]} (beside the other tests; log: build/tests-trainer.log)"
  (
    rc=0
    trainer_tests || rc=1
    .venv/bin/python -m pytest --durations=15 "$@" "${long[@]}" || rc=1
    exit "$rc"
  ) > build/tests-trainer.log 2>&1 &
  trainer_pid=$!
  echo "pytest the other tests, the frozen app's last"
  .venv/bin/python -m pytest --durations=30 "$@" "${others[@]}" "${frozen[@]}" || status=$?
  wait "$qt_pid" || status=1
  wait "$trainer_pid" || status=1
  echo "---- tests/qt and the real-vLLM tests (build/tests-qt.log)"
  cat build/tests-qt.log
  echo "---- trainer/tests and the long app tests (build/tests-trainer.log)"
  cat build/tests-trainer.log
fi
if [ -n "$build_pid" ]; then
  wait "$build_pid" || { echo "frozen-app build failed (see build/build-app.log)"; status=1; }
fi
exit "$status"
