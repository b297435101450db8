"""Evidence that the trainer learns (issue 11, item 7): CPU, the tiny Qwen2-VL of bench/trainer_toy.py.

Like the original (reference §6.5: SFT cold start, then RL), in two stages per experiment:

1. **Warm start (SFT).** The project's own agent is run on every toy question with a *scripted*
   generator (the right replies, fixed), so the recorded segments are exactly the token sequences
   the trainer would build (template, page images, observations); a plain torch loop then trains
   the tiny random model on the generated tokens only (loss mask 1), and stops *early*, as soon as
   the probability of sampling a whole scripted trajectory at temperature 1 (``exp Σ log p`` over
   its generated tokens, averaged over the scripted rollouts; for VimRAG over its distinct segments)
   reaches ``--vrag-sft-target`` / ``--vimrag-sft-target``. The policy then
   succeeds only sometimes: that is what RL has to improve. The model is saved with its processor.
2. **RL.** The real CLI (``python -m vrag_trainer grpo|ggpo --config cfg.json --run DIR``) on the
   warm-started model: real sampling with ``HFGenerator``, the real agent, the trainer's own search
   server over the indexed toy corpus, ``judge: exact``. Curves come from the run's
   ``metrics.jsonl``.

Experiments:

* ``vrag``: GRPO, VRAG agent, search then answer (4 questions). Reward, its parts, accuracy and
  response length per step.
* ``vimrag``: GRPO vs GGPO, VimRAG agent: a **smaller, scripted** version. A warm start that
  samples VimRAG's JSON tool calls was not reachable on this CPU in the time (a VimRAG segment is
  ~4–6k tokens with the tiny tokenizer, ~290 generated tokens of JSON per search node; an SFT step
  over the 8 distinct segments took ~25 s and the loss sat at ~3.5 nats/token after 12 steps). So
  the replies are scripted and only the *update* is real: the real trainer (``runner.start``, what
  the CLI runs; real masks, advantages, loss, optimiser) on the random tiny model, two questions
  (q2, q4), groups of 4 in which each rollout plays one variant: right answer, right answer after
  a **dead-end** search node ``n2`` (query "bicycles", nothing memorized), wrong answer, wrong
  answer after the dead end. Right rollouts score the same with or without the dead end (NDCG
  counts the evidence seen first). Measured after every step (checkpoints): at the context after
  node ``n1``, log p(the dead-end search call) − log p(the answer call), i.e. how the policy's
  choice between the dead end and answering moves. GRPO trains the dead end with +A in right
  rollouts and −A in wrong ones; GGPO masks it in right rollouts (off the answer path).

SVG curves go to ``docs/img/trainer_learning_*.svg`` (plain SVG written here: no plotting library).

Run (one command; torch threads 1 per process; ~17 min on the 2-core dev container)::

    .venv-trainer/bin/python bench/trainer_learning.py [--only vrag|vimrag] [--vrag-steps 80]
        [--vimrag-steps 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "trainer_learning"
IMG = ROOT / "docs" / "img"
sys.path.insert(0, str(ROOT / "bench"))

import trainer_toy  # noqa: E402

# ---- the scripted replies the warm start learns ----------------------------------------------------
#: uid -> (short search query that finds the reference page, answer)
VRAG_SCRIPT = {
    "q1": ("Alpha revenue", "42 million dollars"),
    "q2": ("Beta headquarters", "Oslo"),
    "q3": ("Alpha plants", "Lyon and Turin"),
    "q4": ("Beta founded", "1998"),
}
DEAD_END_QUERY = "bicycles"


class ScriptedGenerator:
    """A generator replying ``reply(prompt_text, n_images)``, tokenised, plus end of turn."""

    def __init__(self, processor: Any, reply: Callable[[str, int], str]) -> None:
        self.tok = processor.tokenizer
        self.reply = reply

    async def generate(
        self,
        prompt_ids: list[int],
        pixel_values: Any,
        image_grid_thw: Any,
        *,
        max_new_tokens: int,
        temperature: float,
        images: Any = None,
    ) -> Any:
        from vrag_trainer.policy import Generated

        text = self.tok.decode(prompt_ids, skip_special_tokens=False)
        ids = self.tok.encode(self.reply(text, len(pixel_values)), add_special_tokens=False)
        return Generated([*ids, self.tok.eos_token_id], None, "stop")


def _vrag_reply(uid: str) -> Callable[[str, int], str]:
    query, answer = VRAG_SCRIPT[uid]

    def reply(_text: str, n_images: int) -> str:
        return f"<answer>{answer}</answer>" if n_images else f"<search>{query}</search>"

    return reply


def _call(name: str, **args: Any) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"


def _vimrag_reply(uid: str, dead_end: bool, right: bool = True) -> Callable[[str, int], str]:
    query, answer = VRAG_SCRIPT[uid]
    answer = answer if right else "no"

    def reply(text: str, _n_images: int) -> str:
        if text.count("<|im_start|>assistant") >= 2:  # a search was made in this node: memorize
            if f'"query": "{DEAD_END_QUERY}"' in text.split("<|im_start|>assistant")[1]:
                return _call("summarize_and_memorize", summarize="nothing useful", memorize=[])
            item = {
                "information_id": "Picture 1",
                "is_useful": True,
                "key_timestamp": [],
                "priority_score": 4,
            }
            return _call("summarize_and_memorize", summarize="seen", memorize=[item])
        if '"id": "n2"' in text or ('"id": "n1"' in text and not dead_end):
            return _call("add_answer_node", parent_ids=["n1"], answer=answer)
        if '"id": "n1"' in text:
            return _call("add_search_node", id="n2", parent_ids=["root"], query=DEAD_END_QUERY)
        return _call("add_search_node", id="n1", parent_ids=["root"], query=query)

    return reply


# ---- stage 1: warm start ---------------------------------------------------------------------------
def _config(toy: dict[str, Path], model: Path, **over: Any) -> Any:
    from vrag_desktop.core.training.config import TrainConfig

    base: dict[str, Any] = dict(
        model=str(model),
        dataset=str(toy["dataset"]),
        corpora=("toy",),
        data_dir=str(toy["data"]),
        judge={"kind": "exact"},
        search_top_k=1,
    )
    base.update(over)
    return TrainConfig.from_mapping(base)


def record(
    toy: dict[str, Path],
    agent: str,
    scripts: Sequence[tuple[str, Callable[[str, int], str]]],
    **cfg_over: Any,
) -> list[list[Any]]:
    """Run the agent once per (uid, reply script) with a scripted generator; the segments of each
    rollout, exactly as the trainer builds them. Every scripted rollout must be right."""
    from vrag_trainer.data import load_train_data, serve_search
    from vrag_trainer.policy import Limits
    from vrag_trainer.rewards import RunJudge
    from vrag_trainer.rollout import RolloutSpec, run_rollout
    from vrag_trainer.runner import load_policy

    from vrag_desktop.core.agents.searchers import HttpSearcher
    from vrag_desktop.core.eval.reward import RewardWeights

    cfg = _config(toy, toy["model"], agent=agent, **cfg_over)
    _, processor = load_policy(cfg)
    data = load_train_data(cfg, toy["data"])
    index = {it.uid: i for i, it in enumerate(data.items)}
    url, stop = serve_search(toy["data"], ["toy"])
    searcher = HttpSearcher(url)
    judge = RunJudge(cfg.judge)
    out: list[list[Any]] = []

    async def go() -> None:
        for uid, reply in scripts:
            spec = RolloutSpec(
                agent,
                processor,
                ScriptedGenerator(processor, reply),
                lambda: searcher,
                Limits(cfg.max_model_len, cfg.max_response_length, cfg.max_images),
                max_turns=cfg.max_turns,
                top_k=cfg.search_top_k,
                weights=RewardWeights(cfg.reward.judge, cfg.reward.format, cfg.reward.ndcg),
            )
            i = index[uid]
            r, _ = await run_rollout(spec, data.items[i], data.golden[i], i, judge=judge)
            if not (r.correct and r.parts.format == 1.0):
                raise RuntimeError(
                    f"the scripted rollout of {uid} is not right: {r.answer!r}, {r.parts}, {r.error}"
                )
            out.append(r.segments)

    try:
        asyncio.run(go())
    finally:
        searcher.close()
        stop()
    return out


def _seq_logp(model: Any, seg: Any) -> Any:
    """Sum of log p of the segment's generated tokens (loss mask 1) under ``model``."""
    import torch
    from vrag_trainer.generation import vision_inputs

    ids = torch.tensor([seg.input_ids])
    extra = vision_inputs(model, ids, seg.pixel_values, seg.image_grid_thw)
    logits = model(input_ids=ids, **extra).logits[0, :-1].float()
    target = ids[0, 1:]
    mask = torch.tensor(seg.loss_mask[1:], dtype=torch.bool)
    logp = torch.log_softmax(logits, dim=-1).gather(1, target[:, None])[:, 0]
    return logp[mask].sum(), int(mask.sum())


def warm_start(
    toy: dict[str, Path],
    rollouts: list[list[Any]],
    out: Path,
    *,
    target: float,
    lr: float,
    max_steps: int,
    log: list[dict[str, Any]],
) -> Path:
    """Train on the scripted rollouts until the mean probability of sampling a whole scripted
    rollout reaches ``target``; save the model (with the processor) to ``out``."""
    import torch
    from transformers import AutoModelForImageTextToText
    from vrag_trainer.runner import save_processor

    from vrag_desktop.core.embedders.qwen_vl_loading import load_processor

    if (out / "COMPLETE").is_file():
        log.extend(json.loads((out / "sft_log.json").read_text()))
        return out
    torch.manual_seed(0)
    model = AutoModelForImageTextToText.from_pretrained(str(toy["model"]), dtype=torch.float32)
    processor = load_processor(toy["model"], "qwen2_vl")
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    t0 = time.perf_counter()
    for step in range(max_steps + 1):
        model.train()
        opt.zero_grad()
        total, tokens, probs = 0.0, 0, []
        for segs in rollouts:
            lp = 0.0
            for seg in segs:
                s, n = _seq_logp(model, seg)
                if step < max_steps:
                    s.neg().backward()
                lp += float(s.detach())
                tokens += n
                total -= float(s.detach())
            probs.append(math.exp(lp))
        p = sum(probs) / len(probs)
        log.append(
            {
                "step": step,
                "nll_per_token": total / tokens,
                "p_rollout": p,
                "seconds": time.perf_counter() - t0,
            }
        )
        print(f"  sft step {step}: nll/token {total / tokens:.3f}, p(scripted rollout) {p:.3f}", flush=True)
        if p >= target or step == max_steps:
            break
        for prm in model.parameters():
            if prm.grad is not None:
                prm.grad /= tokens
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    model.save_pretrained(out)
    save_processor(processor, out)
    (out / "sft_log.json").write_text(json.dumps(log))
    (out / "COMPLETE").write_text("")
    return out


# ---- stage 2: RL with the real CLI -----------------------------------------------------------------
def run_cli(
    algorithm: str, cfg: dict[str, Any], run: Path, threads: int
) -> tuple[list[dict[str, Any]], float]:
    """``python -m vrag_trainer <algorithm> --config cfg.json --run <run>``; its metrics and wall time."""
    if run.exists():
        shutil.rmtree(run)
    run.parent.mkdir(parents=True, exist_ok=True)
    cfg_path = run.parent / f"{run.name}.config.json"
    cfg_path.write_text(json.dumps(cfg, indent=1), encoding="utf-8")
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    cmd = [sys.executable, "-m", "vrag_trainer", algorithm, "--config", str(cfg_path), "--run", str(run)]
    print("  $", " ".join(str(c) for c in cmd), flush=True)
    t0 = time.perf_counter()
    rc = subprocess.run(
        cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    ).returncode
    seconds = time.perf_counter() - t0
    if rc != 0:
        raise RuntimeError(f"the run {run} exited with {rc}; see {run / 'train.log'}")
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return rows, seconds


# ---- curves ----------------------------------------------------------------------------------------
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


def smooth(ys: Sequence[float], k: int) -> list[float]:
    """Trailing moving average over ``k`` points (fewer at the start)."""
    out = []
    for i in range(len(ys)):
        part = ys[max(0, i - k + 1) : i + 1]
        out.append(sum(part) / len(part))
    return out


def svg_panels(
    path: Path,
    title: str,
    panels: list[tuple[str, list[tuple[str, list[float], list[float]]]]],
    note: str = "",
) -> None:
    """A row of line charts, one per panel (its name, then (label, xs, ys) series), as plain SVG.
    Series whose label ends with ``(raw)`` are drawn thin and light."""
    pw, ph, ml, mt, mb = 300, 210, 46, 44, 86
    width = ml + len(panels) * (pw + ml)
    height = mt + ph + mb + (16 if note else 0)
    esc = lambda s: s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")  # noqa: E731
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="14" font-weight="bold">{esc(title)}</text>',
    ]
    for p, (name, series) in enumerate(panels):
        x0, y0 = ml + p * (pw + ml), mt
        xs_all = [x for _, xs, _ in series for x in xs] or [0, 1]
        ys_all = [y for _, _, ys in series for y in ys] or [0, 1]
        xmin, xmax = min(xs_all), max(xs_all)
        ymin, ymax = min(0.0, min(ys_all)), max(ys_all)
        if ymax <= ymin:
            ymax = ymin + 1
        ymax += 0.05 * (ymax - ymin)
        xmax = xmax if xmax > xmin else xmin + 1
        fx = lambda x, x0=x0, xmin=xmin, xmax=xmax: x0 + (x - xmin) / (xmax - xmin) * pw  # noqa: E731
        fy = lambda y, y0=y0, ymin=ymin, ymax=ymax: y0 + ph - (y - ymin) / (ymax - ymin) * ph  # noqa: E731
        out.append(f'<rect x="{x0}" y="{y0}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>')
        out.append(
            f'<text x="{x0 + pw / 2}" y="{y0 - 6}" text-anchor="middle" font-weight="bold">{esc(name)}</text>'
        )
        for k in range(5):
            yv = ymin + (ymax - ymin) * k / 4
            out.append(f'<line x1="{x0}" x2="{x0 + pw}" y1="{fy(yv):.1f}" y2="{fy(yv):.1f}" stroke="#eee"/>')
            out.append(f'<text x="{x0 - 4}" y="{fy(yv) + 4:.1f}" text-anchor="end">{yv:.3g}</text>')
            xv = xmin + (xmax - xmin) * k / 4
            out.append(f'<text x="{fx(xv):.1f}" y="{y0 + ph + 14}" text-anchor="middle">{xv:.0f}</text>')
        out.append(f'<text x="{x0 + pw / 2}" y="{y0 + ph + 28}" text-anchor="middle">step</text>')
        colour = 0
        legend_y = y0 + ph + 42
        legend_x = x0
        for label, xs, ys in series:
            raw = label.endswith("(raw)")
            c = COLOURS[colour % len(COLOURS)]
            if not raw:
                colour += 1
            else:
                c = COLOURS[colour % len(COLOURS)]
            pts = " ".join(f"{fx(x):.1f},{fy(y):.1f}" for x, y in zip(xs, ys, strict=True))
            style = 'stroke-width="1" stroke-opacity="0.35"' if raw else 'stroke-width="2"'
            out.append(f'<polyline points="{pts}" fill="none" stroke="{c}" {style}/>')
            if not raw:
                if legend_x > x0 and legend_x + 18 + 7 * len(label) > x0 + pw + ml - 8:
                    legend_x, legend_y = x0, legend_y + 14
                out.append(
                    f'<line x1="{legend_x}" x2="{legend_x + 14}" y1="{legend_y - 4}" y2="{legend_y - 4}" '
                    f'stroke="{c}" stroke-width="2"/>'
                )
                out.append(f'<text x="{legend_x + 18}" y="{legend_y}">{esc(label)}</text>')
                legend_x += 18 + 7 * len(label) + 10
    if note:
        out.append(f'<text x="{ml}" y="{height - 6}" fill="#555">{esc(note)}</text>')
    out.append("</svg>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out) + "\n", encoding="utf-8")


def _series(
    rows: list[dict[str, Any]], key: str, label: str, k: int, raw: bool = True
) -> list[tuple[str, list[float], list[float]]]:
    xs = [float(r["step"]) for r in rows]
    ys = [float(r.get(key, 0.0)) for r in rows]
    out = [(f"{label} (raw)", xs, ys)] if raw else []
    return [*out, (label if k <= 1 else f"{label}, mean of {k}", xs, smooth(ys, k))]


def _ends(rows: list[dict[str, Any]], key: str, k: int) -> dict[str, float]:
    """First-k and last-k step means of ``key``."""
    ys = [float(r.get(key, 0.0)) for r in rows]
    return {"first": sum(ys[:k]) / len(ys[:k]), "last": sum(ys[-k:]) / len(ys[-k:])}


# ---- experiments -----------------------------------------------------------------------------------
def _rl_config(toy: dict[str, Path], model: Path, a: argparse.Namespace, **over: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = dict(
        model=str(model),
        dataset=str(toy["dataset"]),
        corpora=["toy"],
        data_dir=str(toy["data"]),
        judge={"kind": "exact"},
        search_top_k=1,
        temperature=1.0,
        warmup_steps=0,
        kl_coef=0.0,
        seed=a.seed,
        epochs=1000,
        save_steps=10_000,  # the final checkpoint only (the trainer saves at the end)
        save_total_limit=1,
        tensorboard=False,
        dtype="fp32",
        device="cpu",
    )
    cfg.update(over)
    return cfg


def plot_vrag(rows: list[dict[str, Any]], rl_s: float, sft: dict[str, Any], k: int = 10) -> None:
    svg_panels(
        IMG / "trainer_learning_vrag.svg",
        f"GRPO, VRAG agent, tiny Qwen2-VL on CPU: {len(rows)} steps × 32 rollouts, {rl_s / 60:.1f} min",
        [
            ("reward", _series(rows, "reward", "reward", k)),
            (
                "reward parts / accuracy",
                _series(rows, "accuracy", "accuracy", k, raw=False)
                + _series(rows, "reward/format", "format", k, raw=False)
                + _series(rows, "reward/ndcg", "ndcg", k, raw=False),
            ),
            ("response length (generated tokens per rollout)", _series(rows, "response_length", "tokens", k)),
        ],
        note=f"thin: per step; thick: trailing mean of {k} steps. Warm start: {sft['step']} SFT steps "
        f"(p of a whole scripted rollout {sft['p_rollout']:.2f}). bench/trainer_learning.py",
    )


def exp_vrag(toy: dict[str, Path], a: argparse.Namespace) -> dict[str, Any]:
    print("VRAG, GRPO: warm start", flush=True)
    scripts = [(u, _vrag_reply(u)) for u in VRAG_SCRIPT]
    base = dict(max_turns=1, max_response_length=32, max_model_len=2048)
    rollouts = record(toy, "vrag", scripts, **base)
    sft_log: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    model = warm_start(
        toy, rollouts, OUT / "vrag_sft", target=a.vrag_sft_target, lr=3e-3, max_steps=300, log=sft_log
    )
    sft_s = time.perf_counter() - t0
    cfg = _rl_config(
        toy,
        model,
        a,
        algorithm="grpo",
        agent="vrag",
        group_size=8,
        prompts_per_step=4,
        micro_batch_rows=16,
        learning_rate=a.vrag_lr,
        max_steps=a.vrag_steps,
        samples_per_step=1,
        **base,
    )
    print(f"VRAG, GRPO: {a.vrag_steps} steps", flush=True)
    rows, rl_s = run_cli("grpo", cfg, OUT / "vrag_grpo", a.threads)
    k = 10
    keys = ("reward", "accuracy", "reward/format", "reward/ndcg", "response_length", "turns")
    summary = {
        "sft": {"steps": sft_log[-1]["step"], "p_rollout": sft_log[-1]["p_rollout"], "seconds": sft_s},
        "rl": {"steps": len(rows), "seconds": rl_s, "config": cfg},
        "first_last_mean_of_10": {key: _ends(rows, key, k) for key in keys},
        "step1": {key: rows[0].get(key) for key in keys},
        "last": {key: rows[-1].get(key) for key in keys},
    }
    plot_vrag(rows, rl_s, sft_log[-1])
    return summary


VIMRAG_UIDS = ("q2", "q4")  # the two short answers: VimRAG's ~6k-token segments are slow on CPU
#: the four rollouts of a group: (answer right?, dead end?)
VARIANTS = ((True, False), (True, True), (False, False), (False, True))


class VariantGenerator(ScriptedGenerator):
    """Scripted VimRAG replies; the k-th rollout of a question plays ``VARIANTS[k % 4]``, so every
    group holds one rollout of each kind whatever order they run in. A rollout is known by its
    ``PolicyChat`` (the caller's ``self``): the agent awaits each model call in a task of its own."""

    def __init__(self, processor: Any) -> None:
        super().__init__(processor, lambda _t, _n: "")
        self.rollouts: dict[Any, Callable[[str, int], str]] = {}  # strong keys: no id reuse
        self.count: dict[str, int] = {}

    async def generate(self, prompt_ids: list[int], pixel_values: Any, *a: Any, **k: Any) -> Any:
        caller = sys._getframe(1).f_locals.get("self")  # PolicyChat.chat
        if caller not in self.rollouts:
            text = self.tok.decode(prompt_ids, skip_special_tokens=False)
            uid = next(u for u in VIMRAG_UIDS if _question(u) in text)
            n = self.count[uid] = self.count.get(uid, 0) + 1
            right, dead = VARIANTS[(n - 1) % 4]
            self.rollouts[caller] = _vimrag_reply(uid, dead, right)
        self.reply = self.rollouts[caller]
        return await super().generate(prompt_ids, pixel_values, *a, **k)


def _dead_ends(run: Path) -> dict[int, list[bool]]:
    """Per step, for each rollout saved as a sample (all of them here): did it add a search node
    that is off its answer path (a dead end)?"""
    from vrag_desktop.core.run.store import RunStore

    out: dict[int, list[bool]] = {}
    for s in RunStore(run / "samples").list():
        info = s.settings.get("training") or {}
        path = set(info.get("answer_path") or [])
        nodes = [seg.get("node_id") for seg in info.get("segments", [])]
        dead = any(n not in (None, "answer") and n not in path for n in nodes)
        out.setdefault(int(info.get("step", 0)), []).append(dead)
    return out


def _question(uid: str) -> str:
    return next(q for u, q, *_ in trainer_toy.EXAMPLES if u == uid)


def _scripted_run(algorithm: str, cfg: dict[str, Any], run: Path) -> None:
    """(A child process.) The real trainer (``runner.start``, what the CLI calls) with scripted rollouts."""
    import torch
    from vrag_trainer import runner

    from vrag_desktop.core.training.config import TrainConfig

    torch.set_num_threads(1)
    rc = runner.start(TrainConfig.from_mapping(cfg), str(run), generator=lambda _m, p: VariantGenerator(p))
    raise SystemExit(rc)


def _decision_logodds(
    model_dir: Path, contexts: dict[str, tuple[Any, list[int], list[int]]]
) -> dict[str, Any]:
    """Per question, at the context after node n1: ``decision``, log p − log p of the two calls'
    first differing token (``search`` vs ``answer`` in ``"add_…_node"``: the choice itself, on the
    same prefix); ``call``, log p(the whole dead-end call) − log p(the whole answer call)."""
    import torch
    from transformers import AutoModelForImageTextToText
    from vrag_trainer.generation import vision_inputs

    model = AutoModelForImageTextToText.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    out = {}
    with torch.no_grad():
        for uid, (seg, dead_ids, answer_ids) in contexts.items():
            lps = []
            for reply in (dead_ids, answer_ids):
                ids = torch.tensor([seg.input_ids[: seg.prompt_len] + reply])
                n = int((ids == model.config.vision_start_token_id).sum())  # images in the context
                extra = vision_inputs(model, ids, seg.pixel_values[:n], seg.image_grid_thw[:n])
                logits = model(input_ids=ids, **extra).logits[0, seg.prompt_len - 1 : -1].float()
                lps.append(torch.log_softmax(logits, -1).gather(1, torch.tensor(reply)[:, None])[:, 0])
            j = next(i for i, (x, y) in enumerate(zip(dead_ids, answer_ids, strict=False)) if x != y)
            out[uid] = {
                "decision": float(lps[0][j] - lps[1][j]),
                "call": float(lps[0].sum() - lps[1].sum()),
            }
    return out


def exp_vimrag(toy: dict[str, Path], a: argparse.Namespace) -> dict[str, Any]:
    """The smaller, scripted version (see the docs): real trainer, masks and updates; replies fixed."""
    ds = OUT / "vimrag_ds.json"
    items = json.loads(Path(toy["dataset"]).read_text())["examples"]
    ds.write_text(json.dumps({"examples": [e for e in items if e["uid"] in VIMRAG_UIDS]}))
    vtoy = {**toy, "dataset": ds}
    base = dict(max_turns=6, max_response_length=512, max_model_len=8192)
    # the decision point: the context after n1 (rebuilt with n1 in the graph), and the two replies
    scripts = [(u, _vimrag_reply(u, True, True)) for u in VIMRAG_UIDS]
    contexts = {}
    from vrag_desktop.core.embedders.qwen_vl_loading import load_processor

    tok = load_processor(toy["model"], "qwen2_vl").tokenizer
    for (uid, _), segs in zip(scripts, record(vtoy, "vimrag", scripts, **base), strict=True):
        seg = segs[1]  # the n2 segment: its prompt is the context after n1
        assert seg.node_id == "n2", seg.node_id
        dead = seg.input_ids[seg.prompt_len :][: seg.loss_mask[seg.prompt_len :].index(0)]
        answer = _vimrag_reply(uid, False, True)(tok.decode(seg.input_ids[: seg.prompt_len]), 0)
        contexts[uid] = (seg, dead, [*tok.encode(answer, add_special_tokens=False), tok.eos_token_id])
    procs = {}
    for algorithm in ("grpo", "ggpo"):
        cfg = _rl_config(
            vtoy,
            toy["model"],
            a,
            algorithm=algorithm,
            agent="vimrag",
            group_size=4,
            prompts_per_step=2,
            micro_batch_rows=1,
            learning_rate=a.vimrag_lr,
            max_steps=a.vimrag_steps,
            save_steps=1,
            save_total_limit=a.vimrag_steps + 1,
            samples_per_step=8,
            **base,
        )
        run = OUT / f"vimrag_{algorithm}"
        shutil.rmtree(run, ignore_errors=True)
        cfg_path = OUT / f"vimrag_{algorithm}.config.json"
        cfg_path.write_text(json.dumps(cfg, indent=1))
        cmd = [sys.executable, __file__, "--scripted-run", algorithm, str(cfg_path), str(run)]
        print("  $", " ".join(cmd), flush=True)
        env = dict(os.environ, OMP_NUM_THREADS="1")
        procs[algorithm] = (
            subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
            time.perf_counter(),
        )
    summary: dict[str, Any] = {"config": cfg}
    before = _decision_logodds(toy["model"], contexts)
    for algorithm, (proc, t0) in procs.items():
        rc = proc.wait()
        seconds = time.perf_counter() - t0
        run = OUT / f"vimrag_{algorithm}"
        if rc != 0:
            raise RuntimeError(f"the run {run} exited with {rc}; see {run / 'train.log'}")
        rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
        odds = [before] + [
            _decision_logodds(run / "checkpoints" / f"checkpoint-{r['step']}", contexts) for r in rows
        ]
        dead = _dead_ends(run)
        summary[algorithm] = {
            "seconds": seconds,
            "logodds_dead_end": odds,
            "dead_end_rate": [sum(d) / len(d) for _, d in sorted(dead.items())],
            "masked_segments": [r.get("masked_segments") for r in rows],
            "segments": [r.get("segments") for r in rows],
            "reward": [r.get("reward") for r in rows],
            "accuracy": [r.get("accuracy") for r in rows],
        }
    panels = []
    for what, name in (("decision", "choice token"), ("call", "whole call")):
        for uid in VIMRAG_UIDS:
            series = []
            for algorithm in ("grpo", "ggpo"):
                ys = [o[uid][what] - before[uid][what] for o in summary[algorithm]["logodds_dead_end"]]
                series.append((algorithm.upper(), [float(i) for i in range(len(ys))], ys))
            panels.append((f"{uid}, {name}: Δ log-odds dead end vs answer", series))
    svg_panels(
        IMG / "trainer_learning_vimrag.svg",
        f"VimRAG, GRPO vs GGPO on the same scripted groups: {a.vimrag_steps} steps, lr {a.vimrag_lr:g}",
        panels,
        note="Each group: right / right+dead end / wrong / wrong+dead end (scripted). Below 0: the policy "
        "moves away from the dead-end search node after n1.",
    )
    return summary


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", choices=("vrag", "vimrag"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads of each training process")
    p.add_argument("--vrag-steps", type=int, default=80)
    p.add_argument("--vrag-lr", type=float, default=5e-4)
    p.add_argument("--vrag-sft-target", type=float, default=0.05)
    p.add_argument("--vimrag-steps", type=int, default=4)
    p.add_argument("--vimrag-lr", type=float, default=1e-3)
    p.add_argument("--scripted-run", nargs=3, help=argparse.SUPPRESS)  # internal: a child run
    p.add_argument("--plot-only", action="store_true", help="redraw the VRAG curves from the last run")
    a = p.parse_args()
    if a.scripted_run:
        algorithm, cfg_path, run = a.scripted_run
        _scripted_run(algorithm, json.loads(Path(cfg_path).read_text()), Path(run))
    if a.plot_only:
        res = json.loads((OUT / "results.json").read_text())["vrag"]
        rows = [json.loads(x) for x in (OUT / "vrag_grpo" / "metrics.jsonl").read_text().splitlines() if x]
        sft = json.loads((OUT / "vrag_sft" / "sft_log.json").read_text())[-1]
        plot_vrag(rows, res["rl"]["seconds"], sft)
        return
    import torch

    torch.set_num_threads(a.threads)
    OUT.mkdir(parents=True, exist_ok=True)
    toy = trainer_toy.build()
    results_path = OUT / "results.json"

    def save(key: str, value: dict[str, Any]) -> None:  # re-read: the other experiment may have written
        results = json.loads(results_path.read_text()) if results_path.is_file() else {}
        results[key] = value
        results_path.write_text(json.dumps(results, indent=1))

    machine = {
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "threads": a.threads,
        "load_before": os.getloadavg(),
    }
    if a.only in (None, "vrag"):
        save("vrag", {**exp_vrag(toy, a), "machine": machine, "load_after": os.getloadavg()})
    if a.only in (None, "vimrag"):
        save("vimrag", {**exp_vimrag(toy, a), "machine": machine, "load_after": os.getloadavg()})
    print(results_path.read_text())


if __name__ == "__main__":
    main()
