#!/usr/bin/env bash
# Set everything up, index the bundled sample corpus and run a search against it, printing the hits.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1
.venv/bin/vrag-desktop index resources/sample_corpus --corpus sample
echo
echo '$ vrag-desktop search "How heavy a load can the Atlas robot carry?" --corpus sample'
.venv/bin/vrag-desktop search "How heavy a load can the Atlas robot carry?" --corpus sample -k 3
