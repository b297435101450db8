#!/usr/bin/env bash
# Create (or update) the project's virtual environment in .venv with everything VRAG Desktop needs.
#
# - torch is installed first and pinned, so nothing later swaps it for a multi-GB CUDA build on a
#   machine without a GPU (see docs/install.md). With a GPU present, VRAG_GPU=1 (or an nvidia-smi
#   on PATH) also installs faiss-gpu.
# - rapidocr-onnxruntime goes in with --no-deps: it asks for the non-headless opencv-python, whose
#   GUI libraries clash with Qt; its real needs are listed in pyproject.toml.
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

stamp_key=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)-gpu$gpu
stamp="$VENV/.vrag-setup-$stamp_key"
if [ -f "$stamp" ]; then
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
    else
      "${pip[@]}" install -q "torch==$TORCH_VERSION" --index-url https://download.pytorch.org/whl/cpu
    fi
  fi
fi

echo "Installing VRAG Desktop and its dependencies…"
"${pip[@]}" install -q -e ".[dev]" "torch==$TORCH_VERSION"
"${pip[@]}" install -q --no-deps "rapidocr-onnxruntime==1.4.4"
if [ "$gpu" = 1 ]; then
  echo "GPU found: installing faiss-gpu…"
  "${pip[@]}" install -q "faiss-gpu-cu12>=1.8" || echo "faiss-gpu could not be installed; the CPU index is used." >&2
fi

# Fail now, not at first use, if the CPU box pulled CUDA packages or a torchvision that cannot import.
"$VENV/bin/python" - <<'PY'
import importlib.util, sys
bad = [m for m in ("torchvision", "torchaudio", "torchcodec") if importlib.util.find_spec(m)]
if bad:
    sys.exit(f"setup: {', '.join(bad)} got installed; they break transformers' image processors here. Remove them.")
PY
rm -f "$VENV"/.vrag-setup-*
touch "$stamp"
echo "Environment ready in $VENV"
