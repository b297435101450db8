"""Evidence that it learns, as a test (issue 30): from a cold start, a supervised warm start and then
a few GRPO steps raise the validation reward on held-out questions above the warm start's value.

The product's own path, nothing scripted: a tiny random Qwen2-VL (the session's, whose tokenizer
knows the prompts' and the toy task's words whole), ``runner.start`` with ``algorithm: sft`` on the
teacher's trajectories, then ``algorithm: grpo`` from it by ``init_from`` with the real HF sampler,
the real search server and the exact judge; the validation is the trainer's own (step 0 is the warm
start, greedy, scored by the rollout's reward).

Why the toy corpus and not the sample split: the sample corpus has to be indexed first (minutes on
a CPU) and its rise needed 32 rollouts a step for 5-20 steps (docs/trainer.md, *Evidence that it
learns*), far beyond a test. Here the toy corpus's four facts are asked by eight short training
questions and four held-out ones that ask the same facts in other words, with the product's default
reward (0.7 judge, 0.1 format, 0.2 NDCG; exact judge).

What rises, honestly (the greedy replies, read once): the 30-step warm start writes the protocol on
every held-out question (format 1.0) but does not yet tell the questions apart: every search finds
the same page and every answer is ``30``, a cut-off training answer, so none is right (reward
0.15). GRPO makes that answer whole within 4 steps (``300``, later ``Oslo``): right for the one
held-out question that asks that fact (0.325). So the test shows GRPO's reward moving the held-out
reward above the warm start (with the advantages negated it does not: 0.15, 0, 0.15), not a policy
that reads pages or answers each question. A longer warm start (80 steps) answers per question, but
its held-out reward then moves a question at a time in either direction (seeds 1-3 fell or
wandered), so it is not what a test can assert.

Deterministic: a step has 8 rollouts (2 questions x group 4), which one ``generate`` batch draws in
rollout order, and the SFT is bit for bit reproducible, so the numbers do not depend on the
machine's load (two runs gave identical metric rows). Seeds 0-3 all rose (0.15 -> 0.325 by step
4); the test runs seed 0.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_training import _config
from vrag_trainer import runner

from vrag_desktop.core.training.rundir import TrainRun


def _item(uid: str, query: str, answer: str, file: str, page: int) -> dict[str, Any]:
    return {
        "uid": uid,
        "query": query,
        "reference_answer": answer,
        "meta_info": {"file_name": file, "reference_page": [page]},
    }


#: Two questions per fact of the toy corpus (tests/toy_training.py's DOCS), short and mostly of
#: words the tiny tokenizer knows whole, so a reply that copies the question stays short.
TRAIN = [
    _item("t1", "Alpha Corp revenue in 2023?", "42 million dollars", "alpha.pdf", 1),
    _item("t2", "What was the revenue of Alpha Corp?", "42 million dollars", "alpha.pdf", 1),
    _item("t3", "How many people does Alpha Corp employ?", "300", "alpha.pdf", 2),
    _item("t4", "Alpha Corp people?", "300", "alpha.pdf", 2),
    _item("t5", "What does Beta Inc sell?", "red bicycles", "beta.pdf", 1),
    _item("t6", "Beta Inc sells what?", "red bicycles", "beta.pdf", 1),
    _item("t7", "Where are the Beta headquarters?", "Oslo", "beta.pdf", 2),
    _item("t8", "Beta headquarters city?", "Oslo", "beta.pdf", 2),
]
#: The same four facts in other words: never trained on.
VAL = [
    _item("v1", "In 2023 Alpha Corp had what revenue?", "42 million dollars", "alpha.pdf", 1),
    _item("v2", "Alpha Corp employs how many people?", "300", "alpha.pdf", 2),
    _item("v3", "What are the bicycles of Beta Inc?", "red bicycles", "beta.pdf", 1),
    _item("v4", "The Beta headquarters are in what city?", "Oslo", "beta.pdf", 2),
]

#: Fields both runs share: one search then an answer, turns of at most 24 tokens (a well-formed
#: reply is ~12), full fine-tuning in fp32 on the CPU, the product's default reward weights.
COMMON: dict[str, Any] = dict(
    max_turns=2,
    max_response_length=24,
    max_model_len=4096,
    dtype="fp32",
    device="cpu",
    seed=0,
    warmup_steps=0,
    save_steps=1000,
    samples_per_step=0,
)


@pytest.mark.slow
def test_grpo_raises_the_held_out_reward_above_the_warm_start(  # type: ignore[no-untyped-def]
    tiny_model_dir, toy_data, search_url, tmp_path
) -> None:
    train, val = tmp_path / "train.json", tmp_path / "val.json"
    train.write_text(json.dumps({"examples": TRAIN}), encoding="utf-8")
    val.write_text(json.dumps({"examples": VAL}), encoding="utf-8")

    # the warm start: 30 steps of all 8 teacher trajectories, a high rate for a random 64-wide model
    sft = _config(
        tiny_model_dir, train, toy_data, search_url, **COMMON,
        algorithm="sft", learning_rate=5e-3, sft={"batch_size": 8}, micro_batch_rows=8, max_steps=30,
    )  # fmt: skip
    assert runner.start(sft, str(tmp_path / "sft")) == runner.EXIT_OK
    losses = [r["loss"] for r in TrainRun(tmp_path / "sft").metrics()]
    assert len(losses) == 30 and losses[-1] < 0.2 * losses[0], losses

    # GRPO from it: 8 rollouts a step (2 questions x 4), KL 0.1 to the warm start, validated at 0, 4, 8
    grpo = _config(
        tiny_model_dir, train, toy_data, search_url, **COMMON,
        init_from=str(tmp_path / "sft"), learning_rate=5e-4, kl_coef=0.1, group_size=4,
        prompts_per_step=2, micro_batch_rows=8, max_steps=8,
        validation={"dataset": str(val), "eval_steps": 4},
    )  # fmt: skip
    assert runner.start(grpo, str(tmp_path / "grpo")) == runner.EXIT_OK
    run = TrainRun(tmp_path / "grpo")
    assert [r["step"] for r in run.metrics()] == list(range(1, 9))
    rows = run.val_metrics()
    assert [r["step"] for r in rows] == [0, 4, 8]
    assert all(r["val/items"] == 4 for r in rows)
    warm, final = rows[0]["val/reward"], rows[-1]["val/reward"]
    # the warm start is partial: well-formed held-out replies, no right answer (room to rise)
    assert rows[0]["val/accuracy"] == 0.0 and warm < 1.0, rows[0]
    assert final > warm, [(r["step"], r["val/reward"]) for r in rows]
    best = run.best()
    assert best is not None and best.step > 0 and best.value > warm
