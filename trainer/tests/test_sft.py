"""The supervised warm start (``algorithm: sft``) with a tiny Qwen2-VL on the toy corpus: the
teacher's sequences are the agent's own tokens with only the model's turns trained, masked tokens
give no loss and no gradient, real SFT steps (full and LoRA) lower the loss on the model's tokens
and write the run like GRPO does, a GRPO run starts from the SFT result (its first weights are the
SFT weights), and History's SFT export replays into the agent's token sequence."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import ScriptedGenerator
from test_training import _config, _weights, vrag_script
from toy_training import EXAMPLES
from vrag_trainer import runner
from vrag_trainer.sft import IGNORE, SftLoss, collate_sft
from vrag_trainer.sft_data import sample_text, teacher_segments

from vrag_desktop.core.training.config import ConfigError, TrainConfig
from vrag_desktop.core.training.rundir import TrainRun

REFS = {e["query"]: e["reference_answer"] for e in EXAMPLES}


def _sft(
    tiny_model_dir: Path, dataset_file: Path, toy_data: Path, search_url: str, **over: Any
) -> TrainConfig:
    base: dict[str, Any] = dict(
        algorithm="sft",
        max_turns=2,
        learning_rate=5e-3,
        sft={"batch_size": 2},
        micro_batch_rows=1,
        max_steps=4,
        save_steps=2,
        dtype="fp32",
        device="cpu",
        max_model_len=4096,
    )
    return _config(tiny_model_dir, dataset_file, toy_data, search_url, **(base | over))


def _rows(cfg: TrainConfig, processor: Any, toy_data: Path) -> Any:
    from vrag_trainer.data import load_train_data

    from vrag_desktop.core.agents.searchers import HttpSearcher

    data = load_train_data(cfg, toy_data)
    searcher = HttpSearcher(cfg.search_url)
    try:
        return asyncio.run(teacher_segments(cfg, data.items, data.golden, processor, lambda: searcher))
    finally:
        searcher.close()


def test_teacher_sequences_are_the_agents_tokens_with_only_the_models_turns_trained(  # type: ignore[no-untyped-def]
    tiny_model_dir, dataset_file, toy_data, search_url, processor
) -> None:
    from vrag_trainer.data import load_train_data
    from vrag_trainer.policy import Limits
    from vrag_trainer.rewards import RunJudge
    from vrag_trainer.rollout import RolloutSpec, run_rollout

    from vrag_desktop.core.agents.searchers import HttpSearcher
    from vrag_desktop.core.eval.reward import RewardWeights
    from vrag_desktop.core.training.config import JudgeConfig

    cfg = _sft(tiny_model_dir, dataset_file, toy_data, search_url)
    rows = _rows(cfg, processor, toy_data)
    assert rows.trajectories == 2 and len(rows.segments) == 2 and not rows.problems
    image_pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    data = load_train_data(cfg, toy_data)
    searcher = HttpSearcher(search_url)
    for item, gold, seg in zip(data.items, data.golden, rows.segments, strict=True):
        text = sample_text(processor, seg)
        trained = [t for t, m in zip(seg.input_ids, seg.loss_mask, strict=True) if m]
        expect = f"<search>{item.query}</search><|im_end|><answer>{REFS[item.query]}</answer><|im_end|>"
        assert processor.tokenizer.decode(trained, skip_special_tokens=False) == expect, text
        assert seg.n_images == 1 and image_pad in seg.input_ids
        assert not any(m for t, m in zip(seg.input_ids, seg.loss_mask, strict=True) if t == image_pad)
        assert seg.loss_mask[: seg.prompt_len] == [0] * seg.prompt_len
        # an RL rollout whose policy writes the same replies builds exactly this sequence
        replies = [f"<search>{item.query}</search>", f"<answer>{REFS[item.query]}</answer>"]
        spec = RolloutSpec(
            "vrag",
            processor,
            ScriptedGenerator(processor, lambda _t, _n, call, said=replies: said[(call - 1) % 2]),
            lambda: searcher,
            Limits(cfg.max_model_len, cfg.max_response_length, cfg.max_images, cfg.max_prompt_length),
            max_turns=cfg.max_turns,
            top_k=cfg.search_top_k,
            weights=RewardWeights(),
        )
        rollout, _ = asyncio.run(run_rollout(spec, item, gold, 0, judge=RunJudge(JudgeConfig(kind="exact"))))
        (rl,) = rollout.segments
        assert rl.input_ids == seg.input_ids and rl.loss_mask == seg.loss_mask
        assert all(torch.equal(a, b) for a, b in zip(rl.pixel_values, seg.pixel_values, strict=True))
    searcher.close()


def test_masked_tokens_give_no_loss_and_no_gradient(  # type: ignore[no-untyped-def]
    tiny_model_dir, dataset_file, toy_data, search_url, processor
) -> None:
    from transformers import AutoModelForImageTextToText

    cfg = _sft(tiny_model_dir, dataset_file, toy_data, search_url)
    segs = _rows(cfg, processor, toy_data).segments
    model = AutoModelForImageTextToText.from_pretrained(str(tiny_model_dir), dtype=torch.float32)
    pad = processor.tokenizer.pad_token_id
    batch = collate_sft(segs, pad, model.config.image_token_id, torch.float32)
    labels = batch.pop("labels")
    norm = next(m for n, m in model.named_modules() if n.endswith("language_model.norm"))
    kept: list[torch.Tensor] = []

    def keep(_m: Any, _i: Any, out: torch.Tensor) -> None:
        out.retain_grad()
        kept.append(out)

    norm.register_forward_hook(keep)
    out = model(**batch)
    n_trained = int((labels[:, 1:] != IGNORE).sum())
    loss = SftLoss()(out, labels, torch.tensor(n_trained))
    loss.backward()
    (hidden,) = kept
    grad = hidden.grad.abs().sum(-1)  # position p predicts token p + 1
    for i, seg in enumerate(segs):
        n = len(seg.input_ids)
        predicts_trained = torch.tensor(seg.loss_mask[1:] + [0] * (grad.shape[1] - n), dtype=torch.bool)
        assert (grad[i, :-1][~predicts_trained] == 0).all()
        assert (grad[i, :-1][predicts_trained] > 0).all()
        assert predicts_trained.sum() == sum(seg.loss_mask)
    # the loss is the mean negative log-likelihood of exactly the trained tokens
    logp = torch.log_softmax(out.logits[:, :-1].detach(), -1)
    target = batch["input_ids"][:, 1:]
    mask = labels[:, 1:] != IGNORE
    manual = -(logp.gather(-1, target[..., None])[..., 0][mask]).mean()
    assert float(loss) == pytest.approx(float(manual), rel=1e-5)


@pytest.mark.parametrize("lora", [False, True])
def test_sft_steps_lower_the_loss_and_write_the_run(  # type: ignore[no-untyped-def]
    lora, tiny_model_dir, dataset_file, toy_data, search_url, tmp_path
) -> None:
    # LoRA on a random 64-wide model learns slower (the embeddings and LM head stay random): a
    # smaller, steadier rate and a smaller bar; full fine-tuning moves the head too
    over: dict[str, Any] = {"lora": {"enabled": True, "rank": 8, "dropout": 0.0}, "learning_rate": 3e-3}
    over = over if lora else {}
    cfg = _sft(tiny_model_dir, dataset_file, toy_data, search_url, max_steps=6, save_steps=3, **over)
    rc = runner.start(cfg, str(tmp_path / "sft"))
    assert rc == runner.EXIT_OK
    run = TrainRun.open(tmp_path / "sft")
    assert run.state()["status"] == "finished" and run.state()["step"] == 6
    rows = run.metrics()
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert all(r["tokens"] > 0 and r["grad_norm"] > 0 for r in rows)
    # each step sees both trajectories (batch 2 of 2): the loss is on the same tokens every step
    losses = [r["loss"] for r in rows]
    assert losses[-1] < (0.98 if lora else 0.8) * losses[0], losses
    assert all(b < a for a, b in itertools.pairwise(losses)) or not lora, losses
    assert [c.step for c in run.complete_checkpoints()] == [3, 6]
    ckpt = run.checkpoint_dir(6)
    assert (ckpt / "adapter_config.json").is_file() == lora
    out = runner.export(str(run.root))
    assert (out / "config.json").is_file() and (out / "model.safetensors").is_file()


@pytest.mark.parametrize("sft_lora", [True, False], ids=["lora-sft-full-grpo", "full-sft-lora-grpo"])
def test_a_grpo_run_starts_from_the_sft_result(  # type: ignore[no-untyped-def]
    sft_lora, tiny_model_dir, dataset_file, toy_data, search_url, processor, tmp_path
) -> None:
    """A LoRA SFT is merged into its base and a full GRPO starts from the merge; a full SFT's
    checkpoint is the base a LoRA GRPO's (zero) adapter starts on, and its export merges onto it."""
    from peft import PeftModel
    from transformers import AutoModelForImageTextToText

    lora = {"enabled": True, "rank": 8}
    sft = _sft(
        tiny_model_dir,
        dataset_file,
        toy_data,
        search_url,
        max_steps=2,
        **({"lora": lora} if sft_lora else {}),
    )
    assert runner.start(sft, str(tmp_path / "sft")) == runner.EXIT_OK
    ckpt = TrainRun(tmp_path / "sft").checkpoint_dir(2)
    fresh = AutoModelForImageTextToText.from_pretrained(str(tiny_model_dir), dtype=torch.float32).state_dict()
    if sft_lora:
        base = AutoModelForImageTextToText.from_pretrained(str(tiny_model_dir), dtype=torch.float32)
        want = PeftModel.from_pretrained(base, str(ckpt)).merge_and_unload().state_dict()
    else:
        want = AutoModelForImageTextToText.from_pretrained(str(ckpt), dtype=torch.float32).state_dict()
    assert not all(torch.equal(want[k], fresh[k]) for k in want)  # SFT moved them
    seen: dict[str, torch.Tensor] = {}

    def first(trainer: Any, _rollouts: Any, _rows: Any) -> None:
        if not seen:  # before the first update: the policy's weights (a LoRA run: its base's)
            model = trainer.accelerator.unwrap_model(trainer.model)
            if hasattr(model, "get_base_model"):
                model = model.get_base_model()
            for k, v in model.state_dict().items():
                if "lora_" not in k:
                    seen[k.replace(".base_layer", "")] = v.detach().clone()

    val = tmp_path / "val.json"  # the warm start's value on held-out items is measured first
    val.write_text(json.dumps({"examples": EXAMPLES[:1]}))
    cfg = _config(
        tiny_model_dir, dataset_file, toy_data, search_url, max_steps=1, init_from=str(tmp_path / "sft"),
        dtype="fp32", device="cpu", validation={"dataset": str(val), "eval_steps": 1},
        **({} if sft_lora else {"lora": lora}),
    )  # fmt: skip
    rc = runner.start(cfg, str(tmp_path / "grpo"), generator=lambda _m, p: vrag_script(p), on_step=first)
    assert rc == runner.EXIT_OK
    assert seen.keys() == want.keys()
    assert all(torch.equal(seen[k], want[k]) for k in want)
    grpo = TrainRun(tmp_path / "grpo")
    baseline, after_step = grpo.val_metrics()
    assert (baseline["step"], baseline["best"], after_step["step"]) == (0, False, 1)
    started = tmp_path / "grpo" / "init-model" if sft_lora else ckpt
    assert grpo.state()["init_weights"] == str(started)
    if sft_lora:  # the GRPO step moved on from the SFT weights
        after = _weights(grpo.checkpoint_dir(1))
        assert any(not torch.equal(after[k], want[k]) for k in after if k in want)
    else:  # the LoRA GRPO run's export: its adapter on the SFT weights it started from
        out = runner.export(str(grpo.root))
        adapter = json.loads((out / "adapter" / "adapter_config.json").read_text())
        assert adapter["base_model_name_or_path"] == str(ckpt)
        merged = AutoModelForImageTextToText.from_pretrained(str(out), dtype=torch.float32).state_dict()
        assert any(not torch.equal(merged[k], want[k]) for k in want if "proj" in k)
        assert all(torch.equal(merged[k], want[k]) for k in want if "embed_tokens" in k)


def test_weights_of_another_architecture_are_refused_by_name(  # type: ignore[no-untyped-def]
    tiny_model_dir, dataset_file, toy_data, search_url, tmp_path
) -> None:
    import tiny_vl_models

    other = tiny_vl_models.build_tiny_qwen25_vl(tmp_path / "qwen25", with_lm_head=True)
    cfg = _config(tiny_model_dir, dataset_file, toy_data, search_url, init_from=str(other))
    with pytest.raises(ConfigError, match="init_from") as got:
        runner.start(cfg, str(tmp_path / "grpo"))
    text = str(got.value)
    assert "Qwen2_5_VLForConditionalGeneration" in text and "Qwen2VLForConditionalGeneration" in text
    assert not (tmp_path / "grpo").exists()


def test_history_sft_export_replays_into_the_agents_sequence(  # type: ignore[no-untyped-def]
    tiny_model_dir, dataset_file, toy_data, search_url, processor, tmp_path
) -> None:
    from vrag_trainer.sft_data import export_segments

    from vrag_desktop.core.run.export import export_sft
    from vrag_desktop.core.run.store import RunStore
    from vrag_desktop.core.training.sft import read_sft_export

    # History's runs: two GRPO rollouts kept as app run files (search, then a right answer)
    grpo = _config(
        tiny_model_dir, dataset_file, toy_data, search_url, max_steps=1, samples_per_step=4, dtype="fp32",
        device="cpu",
    )  # fmt: skip
    rc = runner.start(grpo, str(tmp_path / "grpo"), generator=lambda _m, p: vrag_script(p, lambda *_: True))
    assert rc == runner.EXIT_OK
    store = RunStore(TrainRun(tmp_path / "grpo").samples)
    ids = [s.id for s in store.list()]
    report = export_sft(store, ids, dataset_file, tmp_path / "sft.json")
    assert report.count == len(ids) == 4
    export = read_sft_export(tmp_path / "sft.json")
    cfg = _sft(tiny_model_dir, tmp_path / "sft.json", toy_data, search_url)
    rows = asyncio.run(export_segments(export.samples, processor, cfg))
    assert rows.trajectories == 4 and not rows.problems
    for sample, seg in zip(export.samples, rows.segments, strict=True):
        replies = [m["content"] for m in sample.messages if m["role"] == "assistant"]
        trained = [t for t, m in zip(seg.input_ids, seg.loss_mask, strict=True) if m]
        assert processor.tokenizer.decode(trained, skip_special_tokens=False) == "".join(
            f"{r}<|im_end|>" for r in replies
        )
        assert seg.n_images == len(sample.images) == 1
    # an SFT run trains on the export as it is
    rc = runner.start(cfg.with_changes(max_steps=1), str(tmp_path / "sft"))
    assert rc == runner.EXIT_OK and TrainRun(tmp_path / "sft").metrics()[0]["tokens"] > 0


def test_an_export_without_assistant_turns_is_refused_naming_the_file(  # type: ignore[no-untyped-def]
    tiny_model_dir, dataset_file, toy_data, search_url, tmp_path
) -> None:
    bad = tmp_path / "no_turns.json"
    bad.write_text(json.dumps([{"id": "a", "messages": [{"role": "user", "content": "hi"}], "images": []}]))
    cfg = _sft(tiny_model_dir, bad, toy_data, search_url)
    rc = runner.start(cfg, str(tmp_path / "sft"))
    assert rc == runner.EXIT_BAD
    error = TrainRun(tmp_path / "sft").state()["error"]
    assert str(bad) in error and "no sample has an assistant turn" in error


def test_sft_arguments_follow_the_config() -> None:
    """``sft.batch_size`` sequences a step, in micro-batches of ``micro_batch_rows`` per process."""
    from vrag_trainer.sft import sft_args

    cfg = TrainConfig.from_mapping(dict(
        algorithm="sft", model="m", dataset="d", sft={"batch_size": 10}, micro_batch_rows=4,
        learning_rate=2e-5, warmup_steps=3, epochs=2, max_steps=7, save_steps=5, grad_clip=0.5, seed=11,
    ))  # fmt: skip
    args = sft_args(cfg, "out", use_cpu=True, bf16=False, logging_dir=None)
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == (4, 3)
    assert (args.learning_rate, args.warmup_steps, args.num_train_epochs, args.max_steps) == (2e-5, 3, 2, 7)
    assert (args.save_steps, args.max_grad_norm, args.seed, args.logging_steps) == (5, 0.5, 11, 1)
    two = sft_args(cfg, "out", world_size=2, use_cpu=True, bf16=False, logging_dir=None)
    assert (two.per_device_train_batch_size, two.gradient_accumulation_steps) == (4, 2)  # 5 a process
    small = sft_args(
        cfg.with_changes(sft=cfg.sft.__class__(batch_size=2)),
        "out",
        use_cpu=True,
        bf16=False,
        logging_dir=None,
    )
    assert (small.per_device_train_batch_size, small.gradient_accumulation_steps) == (2, 1)


def test_a_stopped_sft_run_resumes_from_its_checkpoint(  # type: ignore[no-untyped-def]
    tiny_model_dir, dataset_file, toy_data, search_url, tmp_path
) -> None:
    """The resumed steps are the steps an uninterrupted run makes: the weights, optimiser state and
    data order all come back (each step trains on the same two sequences, so a resume from the
    starting weights would repeat step 1's loss)."""
    cfg = _sft(tiny_model_dir, dataset_file, toy_data, search_url, max_steps=4, save_steps=1)
    assert runner.start(cfg, str(tmp_path / "whole")) == runner.EXIT_OK
    whole = [r["loss"] for r in TrainRun(tmp_path / "whole").metrics()]
    assert runner.start(cfg.with_changes(max_steps=2), str(tmp_path / "sft")) == runner.EXIT_OK
    run = TrainRun(tmp_path / "sft")
    first = run.metrics()
    assert runner.resume(str(run.root), cfg) == runner.EXIT_OK
    rows = run.metrics()
    assert [r["step"] for r in rows] == [1, 2, 3, 4] and rows[:2] == first
    assert run.state()["status"] == "finished" and run.state()["resumed_from"] == 2
    assert [r["loss"] for r in rows] == pytest.approx(whole, rel=1e-4), (whole, rows)


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_a_resumed_grpo_run_goes_on_from_its_checkpoint(  # type: ignore[no-untyped-def]
    lora, tiny_model_dir, dataset_file, toy_data, search_url, tmp_path
) -> None:
    """A warm-started GRPO run, resumed: its policy's weights before the next update are the
    checkpoint's (the Trainer's own load matched no name of a transformers 5 Qwen-VL checkpoint
    and went on from the starting weights), and its KL reference is still the warm start."""
    from safetensors.torch import load_file
    from transformers import AutoModelForImageTextToText

    sft = _sft(tiny_model_dir, dataset_file, toy_data, search_url, max_steps=1)
    assert runner.start(sft, str(tmp_path / "sft")) == runner.EXIT_OK
    cfg = _config(
        tiny_model_dir, dataset_file, toy_data, search_url, max_steps=1, init_from=str(tmp_path / "sft"),
        dtype="fp32", device="cpu", kl_coef=0.01, **({"lora": {"enabled": True, "rank": 8}} if lora else {}),
    )  # fmt: skip
    script = lambda _m, p: vrag_script(p)  # noqa: E731
    assert runner.start(cfg, str(tmp_path / "grpo"), generator=script) == runner.EXIT_OK
    ckpt = TrainRun(tmp_path / "grpo").checkpoint_dir(1)
    seen: dict[str, Any] = {}

    def first(trainer: Any, _rollouts: Any, _rows: Any) -> None:
        if not seen:
            model = trainer.accelerator.unwrap_model(trainer.model)
            seen["state"] = {k: v.detach().clone() for k, v in model.state_dict().items()}
            ref = trainer.ref_model
            seen["ref"] = None if ref is None else ref.config._name_or_path

    rc = runner.resume(str(tmp_path / "grpo"), cfg.with_changes(max_steps=2), generator=script, on_step=first)
    assert rc == runner.EXIT_OK
    state = seen["state"]
    if lora:
        saved = load_file(str(ckpt / "adapter_model.safetensors"))
        mine = {k.replace(".default", ""): v for k, v in state.items() if "lora_" in k}
        assert saved and all(torch.equal(mine[k], v) for k, v in saved.items())
        assert seen["ref"] is None  # the reference is the base with the adapter off
    else:
        want = AutoModelForImageTextToText.from_pretrained(str(ckpt), dtype=torch.float32).state_dict()
        assert state.keys() == want.keys() and all(torch.equal(state[k], want[k]) for k in want)
        assert seen["ref"] == str(TrainRun(tmp_path / "sft").checkpoint_dir(1))  # the warm start


def test_the_vimrag_teacher_builds_one_sequence_per_graph_node(  # type: ignore[no-untyped-def]
    tiny_model_dir, dataset_file, toy_data, search_url, processor
) -> None:
    """Search node (its search and memorize calls in one sequence), then the answer node: the
    agent accepts the teacher's tool calls and scores the trajectory right."""
    cfg = _sft(
        tiny_model_dir, dataset_file, toy_data, search_url, agent="vimrag", max_turns=4, max_model_len=8192,
        max_response_length=1024,
    )  # fmt: skip
    rows = _rows(cfg, processor, toy_data)
    assert rows.trajectories == 2 and not rows.problems, rows.lines()
    assert [s.node_id for s in rows.segments] == ["n1", "answer", "n1", "answer"]
    for item, (search, answer) in zip(
        EXAMPLES, zip(rows.segments[::2], rows.segments[1::2], strict=True), strict=True
    ):
        written = processor.tokenizer.decode(
            [t for t, m in zip(search.input_ids, search.loss_mask, strict=True) if m],
            skip_special_tokens=False,
        )
        assert written.count("<tool_call>") == 2 and '"add_search_node"' in written
        assert f'"query": "{item["query"]}"' in written and '"summarize_and_memorize"' in written
        assert '"information_id": "Picture 1"' in written and search.n_images >= 1
        said = processor.tokenizer.decode(
            [t for t, m in zip(answer.input_ids, answer.loss_mask, strict=True) if m],
            skip_special_tokens=False,
        )
        assert '"add_answer_node"' in said and f'"answer": "{item["reference_answer"]}"' in said
        assert not any(
            m
            for t, m in zip(search.input_ids, search.loss_mask, strict=True)
            if t == processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
        )


def test_a_teacher_reply_longer_than_a_turn_leaves_its_trajectory_out(  # type: ignore[no-untyped-def]
    tiny_model_dir, dataset_file, toy_data, search_url, processor
) -> None:
    """Not cut (half a search would be trained as the model's words): named and left out."""
    # the first replies, a search for the question, take 13 and 9 tokens (with the end of turn)
    cfg = _sft(tiny_model_dir, dataset_file, toy_data, search_url, max_response_length=6)
    rows = _rows(cfg, processor, toy_data)
    assert not rows.segments and rows.trajectories == 0
    assert [uid for uid, _ in rows.problems] == ["q1", "q2"]
    assert all("more than max_response_length" in why and "reply 1 is" in why for _, why in rows.problems)
