"""GRPO on VRAG and GGPO on VimRAG from a supervised warm start, on the product's own commands.

Why this bench: docs/trainer.md's walk-through (sample corpus, tiny model, ``train sft`` then
``train grpo`` with a validation curve) is the evidence that a run learns; this runs it, and the
equivalent GGPO run on the VimRAG agent, the way a person would, with nothing of its own in the
training path: ``vrag-desktop index``, ``scripts/tiny_vl_model.py``, ``vrag-desktop train sft``,
``train grpo`` / ``train ggpo`` and ``train export --best``. Then the curves of both runs are drawn
side by side with the Training panel's plot widget (``scripts/training_curves.py``).

The two RL runs start from the same base model and the same training split. They cannot start
from the same *weights*: GGPO trains VimRAG, whose replies are JSON tool calls
(``add_search_node`` …), while a VRAG warm start writes ``<search>``/``<answer>`` tags, so each
gets a warm start of its own agent's protocol (``train sft`` with ``agent`` set), from the same
config otherwise (docs/examples/warm_start_sft.json, warm_start_grpo.json).

    .venv/bin/python bench/warm_start_learning.py [--only grpo|ggpo] [--rl-steps 60]
        [--sft-steps 50] [--data bench/out/warm_start_learning/data]
        [--sft-set KEY=VALUE ...] [--rl-set KEY=VALUE ...]   # passed on as ``--set`` (a shorter run)

Output: bench/out/warm_start_learning/ (the data folder with the runs, results.json) and
docs/img/warm_start_learning.png. VimRAG's sequences are ~5k tokens with the tiny tokenizer (its
tool prompt), so its SFT and GGPO steps cost ~10x VRAG's on a CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "warm_start_learning"
MODEL = ROOT / "bench" / "out" / "warm_start" / "tiny-qwen2-vl"
APP = ROOT / ".venv" / "bin" / "vrag-desktop"
SFT = ROOT / "docs" / "examples" / "warm_start_sft.json"
RL = ROOT / "docs" / "examples" / "warm_start_grpo.json"

#: The runs: name -> (agent, SFT overrides, RL command, RL overrides). VimRAG spends a turn per tool
#: call (search node, memorize, answer) and needs room for its ~5k-token tool prompt and for the
#: teacher's replies (a memorize call of the sample split is up to 233 tokens).
VIMRAG = {"agent": "vimrag", "max_turns": 4, "max_model_len": 8192, "max_response_length": 256}
RUNS: dict[str, tuple[dict[str, Any], str, dict[str, Any]]] = {
    "grpo": ({}, "grpo", {}),
    "ggpo": ({**VIMRAG, "name": "sample-sft-vimrag"}, "ggpo", {**VIMRAG, "init_from": "sample-sft-vimrag"}),
}


def sh(argv: list[str | Path], env: dict[str, str]) -> float:
    """Run one command as a person would (its output streamed); fail on a failure; its seconds."""
    print("$", " ".join(str(a) for a in argv), flush=True)
    t0 = time.perf_counter()
    subprocess.run([str(a) for a in argv], cwd=ROOT, env=env, check=True)
    return time.perf_counter() - t0


def sets(over: dict[str, Any]) -> list[str]:
    """``--set key=value`` for each override (JSON values, as the CLI reads them)."""
    return [
        x for k, v in over.items() for x in ("--set", f"{k}={json.dumps(v) if not isinstance(v, str) else v}")
    ]


def more(items: list[str]) -> list[str]:
    """``--set`` for each KEY=VALUE given on this script's command line (after the run's own)."""
    return [x for item in items for x in ("--set", item)]


def rows(path: Path) -> list[dict[str, Any]]:
    return (
        [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
        if path.exists()
        else []
    )


def summary(run: Path) -> dict[str, Any]:
    """What the report needs of a run: its validation curve, its training reward by tens of steps,
    the dynamic-sampling counts and the best step."""
    train = rows(run / "metrics.jsonl")
    val = rows(run / "val_metrics.jsonl")
    tens = [train[i : i + 10] for i in range(0, len(train), 10)]
    best = json.loads((run / "best.json").read_text()) if (run / "best.json").exists() else None
    return {
        "steps": len(train),
        "val": [
            {k: r.get(k) for k in ("step", "val/reward", "val/format", "val/accuracy", "val/recall")}
            for r in val
        ],
        "train_reward_by_10": [round(sum(r.get("reward", 0.0) for r in t) / len(t), 4) for t in tens],
        "train_format_by_10": [round(sum(r.get("reward/format", 0.0) for r in t) / len(t), 4) for t in tens],
        "groups_filtered": sum(r.get("groups_filtered", 0.0) for r in train),
        "best": best,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", choices=tuple(RUNS))
    p.add_argument("--sft-steps", type=int, default=50)
    p.add_argument("--rl-steps", type=int, default=60)
    p.add_argument("--data", type=Path, default=OUT / "data")
    p.add_argument(
        "--sft-set", action="append", default=[], metavar="KEY=VALUE", help="more `train sft --set`"
    )
    p.add_argument(
        "--rl-set", action="append", default=[], metavar="KEY=VALUE", help="more `train grpo|ggpo --set`"
    )
    a = p.parse_args()
    env = {**os.environ, "VRAG_DESKTOP_DATA_DIR": str(a.data.resolve())}
    OUT.mkdir(parents=True, exist_ok=True)
    seconds: dict[str, float] = {}
    if not (a.data / "corpora" / "sample" / "manifest.sqlite").exists():
        seconds["index"] = sh([APP, "index", "resources/sample_corpus", "--corpus", "sample"], env)
    if not (MODEL / "config.json").exists():
        sh([sys.executable, "scripts/tiny_vl_model.py", MODEL], env)
    training = a.data / "training"
    results: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "load_before": os.getloadavg()}}
    for name, (sft_over, command, rl_over) in RUNS.items():
        if a.only not in (None, name):
            continue
        sft_name = sft_over.get("name", "sample-sft")
        rl_name = f"sample-{name}"
        if not (training / sft_name / "state.json").exists():
            seconds[f"{name}:sft"] = sh(
                [
                    APP,
                    "train",
                    "sft",
                    "--config",
                    SFT,
                    *sets({**sft_over, "max_steps": a.sft_steps}),
                    *more(a.sft_set),
                ],
                env,
            )
        rl = {**rl_over, "algorithm": command, "name": rl_name, "max_steps": a.rl_steps}
        seconds[f"{name}:rl"] = sh([APP, "train", command, "--config", RL, *sets(rl), *more(a.rl_set)], env)
        sh([APP, "train", "export", rl_name, "--best"], env)
        results[name] = summary(training / rl_name)
    results["seconds"] = seconds
    results["machine"]["load_after"] = os.getloadavg()
    (OUT / "results.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    runs = [
        str(training / f"sample-{n}") for n in RUNS if (training / f"sample-{n}" / "metrics.jsonl").exists()
    ]
    names = {"grpo": "GRPO on VRAG", "ggpo": "GGPO on VimRAG"}
    labels = [names[n] for n in RUNS if (training / f"sample-{n}" / "metrics.jsonl").exists()]
    sh([sys.executable, "scripts/training_curves.py", *runs, *[x for lab in labels for x in ("--label", lab)],
        "--out", "docs/img/warm_start_learning.png"], env)  # fmt: skip
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
