"""Real optimisation steps of GRPO (VRAG) and GGPO (VimRAG) with a tiny Qwen2-VL: the weights
change, metrics and TensorBoard are written, checkpoints are complete, sample trajectories are
app run files, and the export loads back."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import ScriptedGenerator
from toy_training import toy_run
from vrag_trainer import runner

from vrag_desktop.core.run.store import RunStore
from vrag_desktop.core.training.config import TrainConfig
from vrag_desktop.core.training.rundir import TrainRun

ANSWERS = {"Alpha": "42 million dollars", "Beta": "Oslo"}


def _topic(text: str) -> str:
    return "Alpha" if "Alpha Corp in 2023" in text else "Beta"


def vrag_script(processor: Any, right: Callable[[str, int], bool] | None = None) -> ScriptedGenerator:
    """Search, then answer; ``right(topic, k)`` says whether the k-th answer on a topic is right.
    By default answers alternate right and wrong, so every group has a spread of rewards whatever
    order the rollouts run in."""
    seen: dict[str, int] = {}

    def reply(text: str, n_images: int, _n: int) -> str:
        topic = _topic(text)
        if n_images == 0:
            return f"<think>look it up</think><search>{topic} facts</search>"
        seen[topic] = seen.get(topic, 0) + 1
        ok = right(topic, seen[topic]) if right is not None else seen[topic] % 2 == 1
        return f"<answer>{ANSWERS[topic] if ok else 'no idea'}</answer>"

    return ScriptedGenerator(processor, reply)


def _call(name: str, **args: Any) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"


def vimrag_script(processor: Any) -> ScriptedGenerator:
    """Node n1 (the evidence), a dead-end node n2, then an answer from n1 — right or wrong in turn."""
    seen: dict[str, int] = {}

    def reply(text: str, n_images: int, _n: int) -> str:
        topic = _topic(text)
        if text.count("<|im_start|>assistant") >= 2:  # mid-node: the search was made, memorize it
            item = {
                "information_id": "Picture 1",
                "is_useful": True,
                "key_timestamp": [],
                "priority_score": 4,
            }
            return _call("summarize_and_memorize", summarize="seen", memorize=[item])
        if '"id": "n2"' in text:  # a rebuilt context whose graph has both nodes
            seen[topic] = seen.get(topic, 0) + 1
            return _call(
                "add_answer_node", parent_ids=["n1"], answer=ANSWERS[topic] if seen[topic] % 2 else "no"
            )
        if '"id": "n1"' in text:
            return _call("add_search_node", id="n2", parent_ids=["root"], query="unrelated bicycles")
        return _call("add_search_node", id="n1", parent_ids=["root"], query=f"{topic} facts")

    return ScriptedGenerator(processor, reply)


def _config(
    tiny_model_dir: Path, dataset_file: Path, toy_data: Path, search_url: str, **over: Any
) -> TrainConfig:
    base = toy_run(
        model=str(tiny_model_dir),
        dataset=str(dataset_file),
        data_dir=str(toy_data),
        search_url=search_url,
        max_turns=3,
        max_response_length=256,
        max_model_len=8192,  # VimRAG's contexts: its system prompt alone is ~1.2k tiny-tokenizer tokens
        max_steps=2,
    )
    return TrainConfig.from_mapping(base | over)


def _weights(path: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(path / "model.safetensors"))


def _changed(a: dict[str, Any], b: dict[str, Any]) -> int:
    return sum(1 for k in a if k in b and not (a[k] == b[k]).all())


@pytest.mark.parametrize("algorithm,agent", [("grpo", "vrag"), ("ggpo", "vimrag")])
def test_real_steps_change_the_weights_and_write_the_run(  # type: ignore[no-untyped-def]
    algorithm, agent, tiny_model_dir, dataset_file, toy_data, search_url, processor, tmp_path
) -> None:
    turns = 3 if agent == "vrag" else 6  # VimRAG spends a step per tool call: search, memorize x2, answer
    cfg = _config(
        tiny_model_dir, dataset_file, toy_data, search_url, algorithm=algorithm, agent=agent, max_turns=turns
    )
    script = vrag_script if agent == "vrag" else vimrag_script
    rc = runner.start(cfg, str(tmp_path / "run"), generator=lambda _m, p: script(p))
    assert rc == runner.EXIT_OK
    run = TrainRun.open(tmp_path / "run")
    assert run.state()["status"] == "finished" and run.state()["step"] == 2
    rows = run.metrics()
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        assert 0.0 < r["reward"] < 1.0 and r["accuracy"] == pytest.approx(0.5), r
        assert r["rollout_errors"] == 0 and r["truncated"] == 0
        for key in (
            "reward/format",
            "reward/judge",
            "reward/ndcg",
            "kl",
            "entropy",
            "clip_fraction",
            "loss",
            "response_length",
            "turns",
            "tokens_per_second",
            "learning_rate",
            "grad_norm",
        ):
            assert key in r, key
        assert r["grad_norm"] > 0
    if algorithm == "ggpo":
        assert all(r["masked_segments"] > 0 for r in rows)  # dead ends of right answers at least
    assert [c.step for c in run.complete_checkpoints()] == [1, 2]
    base, last = _weights(tiny_model_dir), _weights(run.checkpoint_dir(2))
    assert _changed(base, last) > 0
    assert _changed(_weights(run.checkpoint_dir(1)), last) > 0
    assert list(run.tensorboard.rglob("events.out.tfevents*"))
    # samples: app run files the app can list and replay, with the step's masks
    samples = RunStore(run.samples).list()
    assert len(samples) == 4 and all(s.agent == agent for s in samples)
    info = samples[0].settings["training"]
    assert info["algorithm"] == algorithm and info["segments"]
    if algorithm == "ggpo":
        assert any(seg["masked"] for s in samples for seg in s.settings["training"]["segments"])
        assert {seg["node_id"] for seg in info["segments"]} >= {"n1", "answer"}
    assert list(RunStore(run.samples).events(samples[0].id))
    # export: a Hugging Face directory that loads back with the trained weights
    out = runner.export(str(run.root), str(tmp_path / "export"))
    from transformers import AutoModelForImageTextToText

    from vrag_desktop.core.embedders.qwen_vl_loading import load_processor

    model = AutoModelForImageTextToText.from_pretrained(str(out))
    assert _changed(last, {k: v for k, v in model.state_dict().items()}) == 0
    assert load_processor(out, "qwen2_vl").tokenizer.convert_tokens_to_ids(
        "<answer>"
    ) == processor.tokenizer.convert_tokens_to_ids("<answer>")
    with pytest.raises(runner.RunRefused, match="not empty"):
        runner.export(str(run.root), str(out))
