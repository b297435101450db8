"""Does GGPO on the VimRAG agent raise held-out validation reward above an SFT warm start?
(issue 30) The recipe of trainer/tests/test_learning_rise.py (toy corpus, vocabulary-2000 tiny
model, 8 training / 4 held-out questions) with ``agent: vimrag`` for the SFT and ``algorithm:
ggpo`` for the RL half.  Run in the trainer environment:

    PYTHONPATH=$PWD:$PWD/tests:$PWD/trainer .venv-trainer/bin/python bench/ggpo_vimrag_rise.py \
        --sft-steps 30 --rl-steps 8 --seed 0

The second round's setting (docs/trainer.md): ``--tool-tokens --top-k 1 --resp 32`` (the calls'
fixed JSON as whole tokens, one search item to memorise); ``--sft-save-steps 5`` keeps the warm
start every 5 steps, ``--init-from RUN/checkpoints/checkpoint-N --val-only`` validates one of them
greedily in seconds (``--show-replies`` prints every reply) before any GGPO step is spent on it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "tests", ROOT / "trainer", ROOT / "trainer" / "tests"):
    sys.path.insert(0, str(p))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("VRAG_DESKTOP_VIEW_CACHE", tempfile.mkdtemp(prefix="vrag-views-"))


def cpu() -> float:
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sft-steps", type=int, default=30)
    ap.add_argument("--sft-lr", type=float, default=5e-3)
    ap.add_argument("--rl-steps", type=int, default=8)
    ap.add_argument("--rl-lr", type=float, default=5e-4)
    ap.add_argument("--kl", type=float, default=0.1)
    ap.add_argument("--prompts", type=int, default=2, help="questions a GGPO step")
    ap.add_argument("--group", type=int, default=4, help="rollouts a question")
    ap.add_argument("--eval-steps", type=int, default=4)
    ap.add_argument("--max-turns", type=int, default=4)
    ap.add_argument("--resp", type=int, default=192)
    ap.add_argument("--dynamic", action="store_true")
    ap.add_argument("--top-k", type=int, default=3, help="search_top_k (1: one item to memorise)")
    ap.add_argument("--tool-tokens", action="store_true", help="VimRAG's call pieces as whole tokens")
    ap.add_argument("--sft-save-steps", type=int, default=0, help="keep the warm start every N steps")
    ap.add_argument("--show-replies", action="store_true", help="print every validation reply")
    ap.add_argument("--val-only", action="store_true", help="stop after the warm start's validation")
    ap.add_argument("--work", default="")
    ap.add_argument("--init-from", default="", help="skip the SFT: start GGPO from this SFT run")
    args = ap.parse_args()

    import tiny_vl_models
    from test_learning_rise import TRAIN, VAL
    from test_training import _config
    from toy_training import TAGS, VOCAB_SIZE, build_toy_data, vimrag_call_tokens, vocabulary
    from vrag_trainer import runner, validation
    from vrag_trainer.data import serve_search

    from vrag_desktop.core.training.rundir import TrainRun

    row_of = validation.validation_row

    def said(r, query_type=""):  # every greedy held-out reply's outcome, as the validation scores it
        row = row_of(r, query_type)
        print(
            "  val item",
            r.uid,
            "steps",
            r.turns,
            "format",
            r.parts.format,
            "answer",
            repr(r.answer),
            "error",
            repr((r.error or "")[:160]),
            flush=True,
        )
        if args.show_replies:
            for seg in r.segments:
                for reply in seg.replies:
                    print("    reply", repr(reply[:300]), flush=True)
        return row

    validation.validation_row = said

    class ValidatedOnly(KeyboardInterrupt):
        """Raised after step 0's validation under --val-only, so the warm start is checked in
        seconds; the runner takes it as a stop request (rc 3, the validation row written)."""

    if args.val_only:
        begin = validation.ValidationCallback.on_train_begin

        def begin_then_stop(self, *a, **kw):
            begin(self, *a, **kw)
            raise ValidatedOnly

        validation.ValidationCallback.on_train_begin = begin_then_stop

    work = Path(args.work or tempfile.mkdtemp(prefix="ggpo-rise-"))
    work.mkdir(parents=True, exist_ok=True)
    t0, c0 = time.time(), cpu()
    model = tiny_vl_models.build_tiny_qwen2_vl(
        work / "tiny-qwen2-vl", with_lm_head=True,
        extra_tokens=TAGS + (vimrag_call_tokens() if args.tool_tokens else ()),
        vocabulary=vocabulary(), vocab_size=VOCAB_SIZE,
    )  # fmt: skip
    if (work / "toy" / "data").exists():  # a rerun in the same folder reuses the index
        toy = work / "toy" / "data"
    else:
        (work / "toy").mkdir()
        toy = build_toy_data(work / "toy")
    url, stop = serve_search(toy, ["toy"])
    train, val = work / "train.json", work / "val.json"
    train.write_text(json.dumps({"examples": TRAIN}), encoding="utf-8")
    val.write_text(json.dumps({"examples": VAL}), encoding="utf-8")
    common = dict(
        max_turns=args.max_turns, max_response_length=args.resp, max_model_len=8192, dtype="fp32",
        device="cpu", seed=args.seed, warmup_steps=0, save_steps=1000, samples_per_step=0,
        agent="vimrag", search_top_k=args.top_k,
    )  # fmt: skip
    print(f"setup {time.time() - t0:.0f}s cpu {cpu() - c0:.0f}s", flush=True)
    try:
        t1, c1 = time.time(), cpu()
        keep = {"save_steps": args.sft_save_steps, "save_total_limit": 100} if args.sft_save_steps else {}
        sft_dir = Path(args.init_from) if args.init_from else work / "sft"
        sft = _config(
            model, train, toy, url, **(common | keep), algorithm="sft", learning_rate=args.sft_lr,
            sft={"batch_size": 16}, micro_batch_rows=16, max_steps=args.sft_steps,
        )  # fmt: skip
        if not args.init_from:
            assert runner.start(sft, str(sft_dir)) == runner.EXIT_OK
        losses = [r["loss"] for r in TrainRun(sft_dir).metrics()] or [float("nan")]
        print(
            f"sft {time.time() - t1:.0f}s cpu {cpu() - c1:.0f}s loss {losses[0]:.2f} -> {losses[-1]:.2f}",
            flush=True,
        )
        t2, c2 = time.time(), cpu()
        rl = _config(
            model, train, toy, url, **common, algorithm="ggpo", init_from=str(sft_dir),
            learning_rate=args.rl_lr, kl_coef=args.kl, group_size=args.group, prompts_per_step=args.prompts,
            micro_batch_rows=8, max_steps=args.rl_steps,
            dynamic_sampling={"enabled": args.dynamic},
            validation={"dataset": str(val), "eval_steps": args.eval_steps},
        )  # fmt: skip
        rc = runner.start(rl, str(work / "ggpo"))  # --val-only: the runner's stop, rc 3
        run = TrainRun(work / "ggpo")
        print(f"ggpo rc {rc} {time.time() - t2:.0f}s cpu {cpu() - c2:.0f}s", flush=True)
        for r in run.metrics():
            print(
                "train",
                {
                    k: (round(v, 3) if isinstance(v, float) else v)
                    for k, v in r.items()
                    if k
                    in (
                        "step",
                        "reward",
                        "reward/format",
                        "reward/judge",
                        "rollout_errors",
                        "groups_filtered",
                        "skipped_steps",
                    )
                },
            )
        for r in run.val_metrics():
            print("val", {k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()})
    finally:
        stop()
    print(f"total {time.time() - t0:.0f}s cpu {cpu() - c0:.0f}s work {work}")


if __name__ == "__main__":
    main()
