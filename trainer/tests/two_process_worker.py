"""One of the processes of a two-process run (``accelerate launch --num_processes 2`` runs this
file twice): the real runner with scripted replies, then a digest of this process's weights and
the step it reached in ``<out>/rank-<RANK>.json``, so a test can compare the processes."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import ScriptedGenerator
from test_training import vrag_script
from vrag_trainer import runner

from vrag_desktop.core.training.config import load_config


def digest(model: Any) -> str:
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().float().cpu().numpy().tobytes())
    return h.hexdigest()


def main() -> int:
    config, run_dir, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    seen: dict[str, Any] = {}

    def generator(model: Any, processor: Any) -> ScriptedGenerator:
        seen["model"] = model  # the policy this process trains
        return vrag_script(processor)

    rc = runner.start(load_config(config), run_dir, generator=generator)
    rank = os.environ.get("RANK", "0")
    report = {"rc": rc, "digest": digest(seen["model"]), "world": os.environ.get("WORLD_SIZE")}
    (out / f"rank-{rank}.json").write_text(json.dumps(report), encoding="utf-8")
    return rc


if __name__ == "__main__":
    sys.exit(main())
