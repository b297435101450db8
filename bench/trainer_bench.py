"""Trainer performance (issue 11), on the tiny Qwen2-VL model of bench/trainer_toy.py, CPU.

**A. Step time, single turn: ours vs stock TRL.** Our :class:`AgentGRPOTrainer` (rollouts through
the project's VRAG agent with ``max_turns=0``: the agent asks for the answer at once, one model
turn, no search; the spec is built here because the config requires ``max_turns >= 1``) against
TRL 1.16's stock ``GRPOTrainer`` on a copy of the same weights. Same settings on both sides, from
the same ``grpo_args``: group size, prompts per step, learning rate, KL beta (so both compute
reference log-probs), seed, ``bnpo`` loss, one optimiser step per generation. Same prompts: the
stock side gets the exact text the VRAG agent sends (prompt + "answer now", checked token for
token). Same reward: the core ``format_score``/``exact_match``/``composite_reward``. Same length:
both models' ``generate`` are given ``min_new_tokens = max_new_tokens = L`` and the vision tokens
suppressed, so every completion has exactly ``L`` tokens (checked from each side's logged mean
completion length). What differs is the machinery: stock TRL samples the whole batch in one
batched ``generate``; ours runs one agent per rollout (concurrently, as the trainer does), each
calling ``PolicyChat`` → the trainer's real ``HFGenerator``, which gathers the requests that
arrive within its batching window into one left-padded ``generate``; then collates rows. Each side
runs ``--rounds`` times alternately (fresh trainer each time, so both see the same machine load),
``--steps`` timed steps after one warm-up step; a step is ``on_step_begin`` → ``on_step_end``
(generation, reward, reference log-probs, loss, backward, optimiser). The batch size of every
``generate`` is recorded. ``--wait-s X`` adds a diagnostic side: ours with
``HFGenerator(wait_s=X)`` (a constructor argument of the real class; the trainer uses the default).

**B. Non-model cost of a multi-turn rollout.** The trainer's own ``serve_search`` serves the
indexed toy corpus over HTTP; ``run_rollout`` runs the VRAG agent with ONE ``HttpSearcher`` shared
by every rollout (as the runner does: one connection pool) and the real ``HFGenerator``, whose
tokens are forced by a logits processor to a script (search → page image → bbox crop → answer; a
row's turn is the number of images in its prompt, so rows of different rollouts can share a
batch), so every rollout takes the same three turns with a random model. Timed: ``model.generate``
itself (the model), ``HFGenerator.generate`` around it (the rest of it is the batching: window,
thread hand-off, padding, cutting), search HTTP, ``PolicyChat._context`` (template, tokenisation,
image processing), page/crop imaging, by wrappers installed here; ``training_rows`` + ``collate``
separately. (1) Rollouts one after another, for a clean split; non-model share =
(rollout − model.generate + collate) / (rollout + collate). (2) ``--groups`` GRPO groups of
``--group`` concurrent rollouts, as the trainer runs a step: wall time against the time inside
``model.generate`` (the non-model time left exposed beside the model).

Run (about 2 minutes on 2 cores; writes bench/out/trainer_bench.json)::

    .venv-trainer/bin/python bench/trainer_bench.py [--steps 8] [--rounds 3] [--rollouts 8] [--groups 4]
        [--wait-s 0.05]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
sys.path.insert(0, str(ROOT / "bench"))

import trainer_toy  # noqa: E402

# ---- shared ------------------------------------------------------------------------------------


def _load(model_dir: Path) -> tuple[Any, Any]:
    from transformers import AutoModelForImageTextToText

    from vrag_desktop.core.embedders.qwen_vl_loading import load_processor

    model = AutoModelForImageTextToText.from_pretrained(str(model_dir))
    return model, load_processor(model_dir, "qwen2_vl")


def _patch_generate(model: Any, spent: list[float], sizes: list[int], **forced: Any) -> None:
    """Give every ``model.generate`` call these keyword arguments (they override the config);
    the seconds and the batch size of each call are appended to ``spent`` and ``sizes``."""
    orig = model.generate

    def generate(*args: Any, **kwargs: Any) -> Any:
        ids = kwargs.get("input_ids", args[0] if args else None)
        sizes.append(int(ids.shape[0]) if ids is not None else 0)
        t = time.perf_counter()
        try:
            return orig(*args, **(kwargs | forced))
        finally:
            spent.append(time.perf_counter() - t)

    model.generate = generate


def _quiet(trainer: Any) -> None:
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)


def _summary(xs: list[float]) -> dict[str, float]:
    return {
        "n": len(xs),
        "median": statistics.median(xs),
        "mean": statistics.fmean(xs),
        "min": min(xs),
        "max": max(xs),
    }


class _Timers:
    """Thread-safe accumulated seconds per name."""

    def __init__(self) -> None:
        self.s: dict[str, float] = defaultdict(float)
        self.n: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()

    def add(self, name: str, dt: float) -> None:
        with self._lock:
            self.s[name] += dt
            self.n[name] += 1

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                self.add(name, time.perf_counter() - t)

        return timed

    def reset(self) -> None:
        self.s.clear()
        self.n.clear()


# ---- A: step time ------------------------------------------------------------------------------


def _config(paths: dict[str, Path], out: Path, steps: int, length: int, group: int, prompts: int) -> Any:
    from vrag_desktop.core.training.config import JudgeConfig, TrainConfig

    return TrainConfig(
        agent="vrag",
        model=str(paths["model"]),
        dataset=str(paths["dataset"]),
        corpora=("toy",),
        data_dir=str(paths["data"]),
        output_dir=str(out),
        group_size=group,
        prompts_per_step=prompts,
        max_turns=1,
        max_response_length=length,
        max_model_len=1024,
        learning_rate=1e-5,
        warmup_steps=0,
        kl_coef=0.04,
        max_steps=steps,
        save_steps=100_000,
        micro_batch_rows=group * prompts,  # one forward per step, as stock TRL does it
        samples_per_step=0,
        tensorboard=False,
        seed=0,
        judge=JudgeConfig(kind="exact"),
    )


class _StepTimer:
    """Seconds per optimiser step, and of them the seconds inside ``model.generate``."""

    def __init__(self) -> None:
        from transformers import TrainerCallback

        outer = self

        class CB(TrainerCallback):  # type: ignore[misc]
            def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                outer.mark = len(outer.spent)
                outer.t0 = time.perf_counter()

            def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                outer.times.append(time.perf_counter() - outer.t0)
                outer.gen.append(sum(outer.spent[outer.mark :]))
                outer.calls.append(len(outer.spent) - outer.mark)
                outer.batches.append(outer.sizes[outer.mark :])

        self.t0 = 0.0
        self.mark = 0
        self.spent: list[float] = []
        self.times: list[float] = []
        self.gen: list[float] = []
        self.calls: list[int] = []
        self.sizes: list[int] = []  # batch size of each generate
        self.batches: list[list[int]] = []  # per step
        self.callback = CB()


def _prompt_text(query: str) -> str:
    from vrag_desktop.core.agents import vrag_protocol as vp

    return vp.build_prompt(query) + vp.ANSWER_NOW  # the template joins text parts with nothing


def _stock_reward(completions: list[Any], reference: list[str], **_: Any) -> list[float]:
    from vrag_desktop.core.eval.answers import exact_match, format_score, last_answer
    from vrag_desktop.core.eval.reward import RewardParts, composite_reward

    out = []
    for comp, ref in zip(completions, reference, strict=True):
        text = comp[-1]["content"] if isinstance(comp, list) else str(comp)
        turns = [{"role": "assistant", "content": text}]
        fmt = format_score(turns)
        judge = exact_match(last_answer(turns), ref) >= 1.0 if fmt > 0 else None
        out.append(composite_reward(RewardParts(format=fmt, judge=judge, ndcg=0.0)))
    return out


class _NoSearch:
    local_files = True

    def search(self, query: str, k: int) -> list[Any]:
        raise AssertionError("a single-turn rollout must not search")


def _run_ours(
    paths: dict[str, Path], cfg: Any, data: Any, work: Path, wait_s: float | None = None
) -> tuple[_StepTimer, list[float]]:
    from datasets import Dataset as HFDataset  # type: ignore[import-untyped]
    from vrag_trainer.generation import HFGenerator
    from vrag_trainer.policy import Limits, vision_token_ids
    from vrag_trainer.rewards import RunJudge
    from vrag_trainer.rollout import RolloutSpec
    from vrag_trainer.trl_trainer import AgentGRPOTrainer, grpo_args

    model, processor = _load(paths["model"])
    suppress = sorted(vision_token_ids(processor.tokenizer))
    timer = _StepTimer()
    _patch_generate(
        model, timer.spent, timer.sizes, min_new_tokens=cfg.max_response_length, suppress_tokens=suppress
    )
    args = grpo_args(cfg, str(work / "ours"), use_cpu=True, bf16=False, logging_dir=None)
    rows = [
        {"prompt": [{"role": "user", "content": it.query}], "index": i} for i, it in enumerate(data.items)
    ]
    limits = Limits(cfg.max_model_len, cfg.max_response_length, cfg.max_images)

    def make_spec(trainer: Any) -> RolloutSpec:
        policy = trainer.accelerator.unwrap_model(trainer.model)
        # the trainer's own generator: batches the concurrent rollouts' turns
        gen = (
            HFGenerator(policy, processor)
            if wait_s is None
            else HFGenerator(policy, processor, wait_s=wait_s)
        )
        return RolloutSpec(
            "vrag", processor, gen, _NoSearch, limits, max_turns=0, temperature=cfg.temperature
        )

    judge = RunJudge(cfg.judge)
    trainer = AgentGRPOTrainer(
        model=model,
        args=args,
        train_dataset=HFDataset.from_list(rows),
        processing_class=processor.tokenizer,
        callbacks=[timer.callback],
        run_config=cfg,
        items=data.items,
        golden=data.golden,
        make_spec=make_spec,
        judge=judge,
    )
    _quiet(trainer)
    trainer.train()
    trainer._loop.close()
    lengths = [h["response_length"] for h in trainer.state.log_history if "response_length" in h]
    return timer, lengths


def _run_stock(paths: dict[str, Path], cfg: Any, data: Any, work: Path) -> tuple[_StepTimer, list[float]]:
    from datasets import Dataset as HFDataset
    from trl import GRPOTrainer
    from vrag_trainer.policy import vision_token_ids
    from vrag_trainer.trl_trainer import grpo_args

    model, processor = _load(paths["model"])
    suppress = sorted(vision_token_ids(processor.tokenizer))
    timer = _StepTimer()
    _patch_generate(
        model, timer.spent, timer.sizes, min_new_tokens=cfg.max_response_length, suppress_tokens=suppress
    )
    args = grpo_args(cfg, str(work / "stock"), use_cpu=True, bf16=False, logging_dir=None)
    args.max_completion_length = cfg.max_response_length  # ours: Limits.max_response_length per turn
    rows = [
        {"prompt": [{"role": "user", "content": _prompt_text(it.query)}], "reference": it.reference_answer}
        for it in data.items
    ]
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[_stock_reward],
        args=args,
        train_dataset=HFDataset.from_list(rows),
        processing_class=processor.tokenizer,
        callbacks=[timer.callback],
    )
    _quiet(trainer)
    trainer.train()
    lengths = [
        h["completions/mean_length"] for h in trainer.state.log_history if "completions/mean_length" in h
    ]
    return timer, lengths


def _check_prompts(paths: dict[str, Path], data: Any) -> int:
    """Both sides' first prompt, token for token (ours as PolicyChat renders the agent's request)."""
    from vrag_desktop.core.agents import vrag_protocol as vp
    from vrag_desktop.core.endpoints.hf_messages import openai_to_hf_messages

    _, processor = _load(paths["model"])
    q = data.items[0].query
    request = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": vp.build_prompt(q)},
                {"type": "text", "text": vp.ANSWER_NOW},
            ],
        }
    ]
    conv, _ = openai_to_hf_messages(request, None)
    ours = processor.apply_chat_template(conv, tokenize=False, add_generation_prompt=True)
    stock = processor.tokenizer.apply_chat_template(
        [{"role": "user", "content": _prompt_text(q)}], tokenize=False, add_generation_prompt=True
    )
    if ours != stock:
        raise SystemExit(f"prompts differ:\n{ours!r}\n{stock!r}")
    return len(processor.tokenizer(ours)["input_ids"])


SIDES = ("stock", "ours")
WAIT = "ours_wait"  # diagnostic (--wait-s): HFGenerator with a longer batching window


def part_a(paths: dict[str, Path], args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from vrag_trainer.data import load_train_data

    cfg = _config(paths, work, 1 + args.steps, args.length, args.group, args.prompts)
    data = load_train_data(cfg, paths["data"])
    prompt_tokens = _check_prompts(paths, data)
    res: dict[str, list[Any]] = defaultdict(list)
    sides = SIDES + ((WAIT,) if args.wait_s is not None else ())
    for r in range(args.rounds):
        for side in sides:
            t = time.perf_counter()
            if side == "stock":
                timer, lengths = _run_stock(paths, cfg, data, work / f"{side}{r}")
            else:
                wait = args.wait_s if side == WAIT else None
                timer, lengths = _run_ours(paths, cfg, data, work / f"{side}{r}", wait)
            print(
                f"  A round {r + 1} {side:12s}: steps {', '.join(f'{x:.2f}' for x in timer.times)} s "
                f"(run {time.perf_counter() - t:.0f} s)",
                flush=True,
            )
            res[side] += timer.times[1:]  # the first step is the warm-up
            res[f"{side}_gen"] += timer.gen[1:]
            res[f"{side}_calls"] += timer.calls[1:]
            res[f"{side}_batches"] += timer.batches[1:]
            res[f"{side}_len"] += lengths
    ours, stock = _summary(res["ours"]), _summary(res["stock"])
    diag = {}
    if args.wait_s is not None:
        w = _summary(res[WAIT])
        diag = {WAIT: w | {"wait_s": args.wait_s}, "ratio_wait_median": w["median"] / stock["median"]}
    split = {
        side: {
            "generate_calls_per_step": statistics.fmean(res[f"{side}_calls"]),
            "generate_batch_sizes": res[f"{side}_batches"],
            "generate_s_mean": statistics.fmean(res[f"{side}_gen"]),
            "rest_s_mean": statistics.fmean(
                a - g for a, g in zip(res[side], res[f"{side}_gen"], strict=True)
            ),
        }
        for side in sides
    }
    return {
        "settings": {
            "group_size": args.group,
            "prompts_per_step": args.prompts,
            "completions_per_step": args.group * args.prompts,
            "completion_tokens": args.length,
            "prompt_tokens": prompt_tokens,
            "learning_rate": cfg.learning_rate,
            "kl_beta": cfg.kl_coef,
            "loss_type": "bnpo",
            "seed": cfg.seed,
            "steps_timed_per_round": args.steps,
            "rounds": args.rounds,
        },
        "ours": ours,
        "stock": stock,
        **diag,
        "ratio_median": ours["median"] / stock["median"],
        "ratio_mean": ours["mean"] / stock["mean"],
        "split": split,
        "mean_completion_length": {
            side: statistics.fmean(res[f"{side}_len"]) if res[f"{side}_len"] else None for side in sides
        },
        "raw": {side: res[side] for side in sides},
    }


# ---- B: multi-turn rollout ---------------------------------------------------------------------

SCRIPT = (
    "<think> find it </think><search> {q} </search>",
    "<think> zoom in </think><bbox>[40, 60, 480, 330]</bbox>",
    "<think> read </think><answer> {a} </answer>",
)


class _Forced:
    """A logits processor that makes ``generate`` write, in each row ``b``, ``replies[b]`` (then
    eos), one token a step."""

    def __init__(self, replies: list[list[int]], start: int, eos: int) -> None:
        self.replies, self.start, self.eos = replies, start, eos

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        k = input_ids.shape[1] - self.start
        out = scores.new_full(scores.shape, float("-inf"))
        for b, ids in enumerate(self.replies):
            out[b, ids[k] if k < len(ids) else self.eos] = 0.0
        return out


class _ScriptedModel:
    """Forces the real model's ``generate`` onto the script (the model still runs a forward per
    token over the whole batch and context, images included). Each row's turn is the number of
    images in its prompt (search: 0, bbox: 1 page, answer: page + crop), so rows of rollouts at
    different turns can share a batch. The seconds of each ``model.generate`` go to ``timers``."""

    def __init__(self, model: Any, tokenizer: Any, timers: _Timers) -> None:
        from transformers import LogitsProcessorList

        self.tok = tokenizer
        self.replies: list[list[int]] = []
        self.calls: list[int] = []  # batch size of each generate
        vstart = model.config.vision_start_token_id
        orig = model.generate

        def generate(*a: Any, **k: Any) -> Any:
            ids = k["input_ids"]
            turns = (ids == vstart).sum(dim=1).tolist()
            proc = LogitsProcessorList(
                [_Forced([self.replies[t] for t in turns], ids.shape[1], tokenizer.eos_token_id)]
            )
            self.calls.append(ids.shape[0])
            t = time.perf_counter()
            try:
                return orig(*a, **(k | {"logits_processor": proc}))
            finally:
                timers.add(MODEL, time.perf_counter() - t)

        model.generate = generate

    def load(self, query: str, answer: str) -> None:
        self.replies = [
            self.tok(s.format(q=query, a=answer), add_special_tokens=False)["input_ids"] for s in SCRIPT
        ]


MODEL = "model.generate (the forward passes)"
GEN = "HFGenerator.generate (model + batching)"


class _TimedGenerator:
    def __init__(self, inner: Any, timers: _Timers) -> None:
        self.inner, self.timers = inner, timers

    async def generate(self, *a: Any, **k: Any) -> Any:
        t = time.perf_counter()
        try:
            return await self.inner.generate(*a, **k)
        finally:
            self.timers.add(GEN, time.perf_counter() - t)


def _instrument(timers: _Timers) -> None:
    """Timers around the non-model parts (bench-local wrappers; behaviour unchanged)."""
    from vrag_trainer.policy import PolicyChat

    from vrag_desktop.core.agents import vrag
    from vrag_desktop.core.agents.searchers import HttpSearcher

    PolicyChat._context = timers.wrap("PolicyChat._context (template, tokenise, pixels)", PolicyChat._context)  # type: ignore[method-assign]
    HttpSearcher.search = timers.wrap("search HTTP (HttpSearcher.search)", HttpSearcher.search)  # type: ignore[method-assign]
    vrag._Run.show_page = timers.wrap("page image (show_page)", vrag._Run.show_page)  # type: ignore[method-assign]
    vrag._Run.cut = timers.wrap("crop (cut)", vrag._Run.cut)  # type: ignore[method-assign]


def _breakdown(total: float, s: dict[str, float], collate_s: float) -> dict[str, Any]:
    """Seconds per part; the non-model share counts only ``model.generate`` as the model."""
    parts = {k: v for k, v in s.items() if k not in (MODEL, GEN, "total")}
    named = sum(parts.values())
    batching = s.get(GEN, 0.0) - s.get(MODEL, 0.0)
    return {
        "total": total,
        MODEL: s.get(MODEL, 0.0),
        "HFGenerator batching (wait, thread hand-off, pad, cut)": batching,
        **parts,
        "rest of the rollout (agent, events, reward)": total - s.get(GEN, 0.0) - named,
        "training_rows + collate": collate_s,
        "non_model_share": (total - s.get(MODEL, 0.0) + collate_s) / (total + collate_s),
        # as the previous run counted it: all of HFGenerator.generate as the model
        "non_model_share_like_before": (total - s.get(GEN, 0.0) + collate_s) / (total + collate_s),
    }


def part_b(paths: dict[str, Path], args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from vrag_trainer.batch import collate
    from vrag_trainer.data import load_train_data, serve_search
    from vrag_trainer.generation import HFGenerator
    from vrag_trainer.ggpo import training_rows
    from vrag_trainer.policy import Limits
    from vrag_trainer.rewards import RunJudge
    from vrag_trainer.rollout import RolloutSpec, run_rollout

    from vrag_desktop.core.agents.searchers import HttpSearcher

    cfg = _config(paths, OUT, 1, 64, args.group, 1)
    data = load_train_data(cfg, paths["data"])
    timers = _Timers()
    _instrument(timers)
    model, processor = _load(paths["model"])
    model.train()  # as in the trainer: HFGenerator switches to eval for generate and back
    scripted = _ScriptedModel(model, processor.tokenizer, timers)
    hf = HFGenerator(model, processor)
    gen = _TimedGenerator(hf, timers)
    url, stop = serve_search(paths["data"], ["toy"], device="cpu")
    searcher = HttpSearcher(url)  # one for every rollout, as the runner shares it (one connection pool)
    spec = RolloutSpec(
        "vrag",
        processor,
        gen,
        lambda: searcher,
        Limits(cfg.max_model_len, 64, cfg.max_images),
        max_turns=3,
        top_k=3,
    )
    judge = RunJudge(cfg.judge)
    loop = asyncio.new_event_loop()
    pad = processor.tokenizer.pad_token_id
    image_token = model.config.image_token_id

    def check(r: Any) -> None:
        if r.error or r.turns != 3 or not r.segments[0].n_images >= 2:
            raise SystemExit(f"the scripted rollout went wrong: {r.error} turns={r.turns} {r.answer}")

    def collate_s(group: list[Any], reps: int = 5) -> float:
        t = time.perf_counter()
        for _ in range(reps):
            rows = training_rows(group, "grpo")
            for k in range(0, len(rows), 4):
                collate(rows[k : k + 4], pad, image_token, torch.device("cpu"))
        return (time.perf_counter() - t) / reps

    seq: list[dict[str, float]] = []
    conc: list[dict[str, float]] = []
    rollouts = []
    calls: list[list[int]] = []
    try:
        # 1. one rollout at a time: a clean split of one rollout's time
        for n in range(args.rollouts + 1):  # the first is the warm-up
            i = n % len(data.items)
            item = data.items[i]
            scripted.load(item.query, item.reference_answer)
            timers.reset()
            t = time.perf_counter()
            r, _ = loop.run_until_complete(run_rollout(spec, item, data.golden[i], i, judge=judge))
            total = time.perf_counter() - t
            check(r)
            if n:
                rollouts.append(r)
                seq.append({"total": total, **timers.s})
        per_collate = collate_s(rollouts[: args.group]) / args.group
        # 2. a GRPO group at once, as the trainer runs a step's rollouts (concurrently, their
        #    turns batched by HFGenerator): the non-model time left exposed beside the model
        for n in range(args.groups + 1):
            i = n % len(data.items)
            item = data.items[i]
            scripted.load(item.query, item.reference_answer)
            timers.reset()
            scripted.calls = []

            async def group(i: int = i, item: Any = item) -> list[Any]:
                jobs = [run_rollout(spec, item, data.golden[i], i, judge=judge) for _ in range(args.group)]
                return await asyncio.gather(*jobs)

            t = time.perf_counter()
            rs = loop.run_until_complete(group())
            total = time.perf_counter() - t
            for r, _ in rs:
                check(r)
            if n:
                conc.append({"total": total, **timers.s})
                calls.append(list(scripted.calls))
        group_collate = collate_s([r for r, _ in rs])
    finally:
        loop.close()
        searcher.close()
        stop()
    seg = rollouts[0].segments[0]

    def mean(xs: list[dict[str, float]]) -> dict[str, float]:
        names = sorted({k for p in xs for k in p})
        return {k: statistics.fmean(p.get(k, 0.0) for p in xs) for k in names}

    m_seq, m_conc = mean(seq), mean(conc)
    return {
        "rollouts": len(seq),
        "turns": 3,
        "sequence_tokens": len(seg.input_ids),
        "generated_tokens": seg.generated_tokens,
        "images": seg.n_images,
        "one_at_a_time": _breakdown(m_seq["total"], m_seq, per_collate),
        "per_rollout_total_s": _summary([p["total"] for p in seq]),
        "group": {
            "size": args.group,
            "groups": len(conc),
            "generate_batches": calls,
            "total": m_conc["total"],
            MODEL: m_conc.get(MODEL, 0.0),
            "training_rows + collate": group_collate,
            "non_model_share": (m_conc["total"] - m_conc.get(MODEL, 0.0) + group_collate)
            / (m_conc["total"] + group_collate),
            "parts_summed_over_rollouts": {k: v for k, v in m_conc.items() if k not in ("total", MODEL)},
        },
    }


# ---- main --------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=8, help="timed steps per round, after one warm-up step")
    ap.add_argument("--rounds", type=int, default=3, help="stock/ours alternations")
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--prompts", type=int, default=2)
    ap.add_argument("--length", type=int, default=32, help="completion tokens (forced)")
    ap.add_argument("--rollouts", type=int, default=8, help="multi-turn rollouts timed one at a time (B)")
    ap.add_argument("--groups", type=int, default=4, help="groups of concurrent rollouts timed (B)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--only", choices=("a", "b"), default=None)
    ap.add_argument(
        "--wait-s",
        type=float,
        default=None,
        help="diagnostic: also time ours with HFGenerator(wait_s=...) (default: not run)",
    )
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    paths = trainer_toy.build()
    result: dict[str, Any] = {
        "machine": f"{os.cpu_count()} CPU cores, torch {torch.__version__} ({args.threads} thread(s))",
    }
    import transformers
    import trl

    result["load_average_start"] = os.getloadavg()
    result["versions"] = {"trl": trl.__version__, "transformers": transformers.__version__}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="trainer-bench-") as tmp:
        if args.only in (None, "b"):
            print("B: multi-turn rollout", flush=True)
            result["b"] = part_b(paths, args)
        if args.only in (None, "a"):
            print("A: single-turn step time", flush=True)
            result["a"] = part_a(paths, args, Path(tmp))
    result["wall_s"] = time.perf_counter() - t0
    result["load_average_end"] = os.getloadavg()
    _print(result)
    OUT.mkdir(parents=True, exist_ok=True)
    dest = OUT / "trainer_bench.json"
    dest.write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(f"\nwritten {dest.relative_to(ROOT)}")


def _print(res: dict[str, Any]) -> None:
    print(f"\n{res['machine']}; trl {res['versions']['trl']}, transformers {res['versions']['transformers']}")
    if "a" in res:
        a = res["a"]
        s = a["settings"]
        print(
            f"\nA. GRPO step, single turn ({s['completions_per_step']} completions × {s['completion_tokens']} "
            f"tokens, prompt {s['prompt_tokens']} tokens, {s['rounds']}×{s['steps_timed_per_round']} steps)"
        )
        print(f"{'':14s}{'median s':>10s}{'mean s':>10s}{'min s':>10s}{'max s':>10s}{'gen len':>10s}")
        for side in a["split"]:
            x = a[side] if side in a else a[WAIT]
            ln = a["mean_completion_length"][side]
            print(
                f"{side:14s}{x['median']:10.3f}{x['mean']:10.3f}{x['min']:10.3f}{x['max']:10.3f}"
                f"{(ln if ln is not None else float('nan')):10.1f}"
            )
        for side, x in a["split"].items():
            print(
                f"  {side}: {x['generate_calls_per_step']:.0f} generate call(s) per step, "
                f"{x['generate_s_mean']:.3f} s in generate, {x['rest_s_mean']:.3f} s the rest; "
                f"batch sizes {x['generate_batch_sizes'][:4]} ..."
            )
        print(f"ours/stock: median {a['ratio_median']:.2f}×, mean {a['ratio_mean']:.2f}× (target ≤ 1.10)")
        if WAIT in a:
            print(
                f"diagnostic, HFGenerator(wait_s={a[WAIT]['wait_s']}) / stock: median {a['ratio_wait_median']:.2f}×"
            )
    if "b" in res:
        b = res["b"]
        one, g = b["one_at_a_time"], b["group"]
        print(
            f"\nB. multi-turn VRAG rollout ({b['turns']} turns, {b['images']} images, {b['sequence_tokens']} "
            f"tokens of which {b['generated_tokens']} generated), one at a time ({b['rollouts']} rollouts), "
            "mean ms per rollout"
        )
        for k, v in one.items():
            if not k.startswith("non_model"):
                print(f"  {k:55s}{v * 1000:9.1f}")
        print(
            f"non-model share: {one['non_model_share'] * 100:.1f} % (target ≤ 10 %); counting all of "
            "HFGenerator.generate as the model, as the previous run did: "
            f"{one['non_model_share_like_before'] * 100:.1f} %"
        )
        print(
            f"a group of {g['size']} at once ({g['groups']} groups, generate batch sizes {g['generate_batches'][0]}): "
            f"{g['total'] * 1000:.1f} ms, {g[MODEL] * 1000:.1f} ms in model.generate, collate "
            f"{g['training_rows + collate'] * 1000:.1f} ms; non-model share {g['non_model_share'] * 100:.1f} %"
        )
        for k, v in g["parts_summed_over_rollouts"].items():
            print(f"    (summed over the group's rollouts) {k:55s}{v * 1000:9.1f}")


if __name__ == "__main__":
    main()
