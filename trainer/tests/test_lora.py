"""LoRA through PEFT with tiny Qwen2-VL / Qwen2.5-VL models built here: GRPO steps that train the
adapter alone (base weights bit-identical, optimiser state only for adapter parameters), the
reference policy equal to the untouched base model, both exports (adapter, merged) loading back
with the trained policy's logits, and the refusals named before a step runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from test_training import _config, vrag_script
from vrag_trainer import runner
from vrag_trainer.batch import collate

from vrag_desktop.core.training.lora import LoraConfig
from vrag_desktop.core.training.rundir import TrainRun
from vrag_desktop.core.training.serve import model_dir_problem

LORA = {"enabled": True, "rank": 4, "alpha": 8, "dropout": 0.0}


def _base(path: Path) -> Any:
    from transformers import AutoModelForImageTextToText

    return AutoModelForImageTextToText.from_pretrained(str(path), dtype=torch.float32).eval()


def _probe(processor: Any) -> dict[str, Any]:
    """One prompt with an image, so the vision tower's path is in every logit compared."""
    from PIL import Image

    text = "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>What is on the page?<|im_end|>\n"
    return dict(
        processor(text=[text], images=[Image.new("RGB", (56, 56), (200, 30, 30))], return_tensors="pt")
    )


def _logits(model: Any, inputs: dict[str, Any]) -> torch.Tensor:
    with torch.no_grad():
        return model(**inputs).logits


def _base_name(peft_name: str) -> str:
    return peft_name.removeprefix("base_model.model.").replace(".base_layer.", ".")


def test_lora_grpo_trains_only_the_adapter_against_the_base_and_exports_both_ways(  # type: ignore[no-untyped-def]
    tiny_model_dir, dataset_file, toy_data, search_url, processor, tmp_path
) -> None:
    from peft import PeftModel
    from safetensors.torch import load_file
    from trl.trainer.grpo_trainer import add_fused_lm_head

    cfg = _config(tiny_model_dir, dataset_file, toy_data, search_url, lora=LORA, kl_coef=0.1)
    seen: dict[str, Any] = {}
    base = _base(tiny_model_dir)

    def factory(model: Any, proc: Any) -> Any:
        seen["policy"] = model
        return vrag_script(proc)

    def on_step(trainer: Any, _rollouts: Any, rows: Any) -> None:
        if trainer.state.global_step != 1:  # step 2: the adapter has had one update
            return
        pc = processor.tokenizer
        image = trainer.model.config.image_token_id
        batch = collate(rows[:2], pc.pad_token_id, image, trainer.accelerator.device)
        seen["ref"] = trainer._ref_logps(batch)
        # the untouched base, given the log-prob head TRL gives every model it scores with
        add_fused_lm_head(
            base, temperature=trainer.temperature, cast_lm_head_to_fp32=trainer.args.cast_lm_head_to_fp32
        )
        seen["base"] = trainer._logps(base, batch)
        seen["policy_logps"] = trainer._logps(trainer.model, batch)
        seen["mask"] = batch["tool_mask"].bool()
        seen["optimizer"] = {id(p) for g in trainer.optimizer.param_groups for p in g["params"]}
        seen["trainable"] = {id(p) for p in trainer.model.parameters() if p.requires_grad}
        seen["ref_model"] = trainer.ref_model

    rc = runner.start(cfg, str(tmp_path / "run"), generator=factory, on_step=on_step)
    assert rc == runner.EXIT_OK
    run = TrainRun.open(tmp_path / "run")
    assert run.state()["status"] == "finished" and [c.step for c in run.complete_checkpoints()] == [1, 2]

    # the reference is the base model (adapter disabled), not the policy and not a second copy
    mask = seen["mask"]
    assert seen["ref_model"] is None
    assert torch.allclose(seen["ref"][mask], seen["base"][mask], atol=1e-5)
    assert (seen["policy_logps"][mask] - seen["base"][mask]).abs().max() > 1e-4
    assert all(r["kl"] > 0 for r in run.metrics()[1:])  # KL against the base once the adapter moved

    # only the adapter trained; the optimiser holds exactly the adapter's parameters
    policy = seen["policy"]
    trainable = {n for n, p in policy.named_parameters() if p.requires_grad}
    assert trainable and all(".lora_" in n for n in trainable)
    assert seen["optimizer"] == seen["trainable"]
    original = load_file(str(tiny_model_dir / "model.safetensors"))
    frozen = {_base_name(n): p for n, p in policy.named_parameters() if ".lora_" not in n}
    assert len(frozen) == len(original) - ("lm_head.weight" in original and "lm_head.weight" not in frozen)
    assert all(torch.equal(p, original[n]) for n, p in frozen.items() if n in original)
    assert all(p.abs().max() > 0 for n, p in policy.named_parameters() if "lora_B" in n)  # moved from 0
    ckpt = run.checkpoint_dir(2)
    assert (ckpt / "adapter_model.safetensors").is_file() and not (ckpt / "model.safetensors").exists()
    state = torch.load(ckpt / "optimizer.pt", weights_only=False)["state"]
    shapes = sorted(tuple(p.shape) for n, p in policy.named_parameters() if p.requires_grad)
    assert sorted(tuple(s["exp_avg"].shape) for s in state.values()) == shapes

    # exports: merged model + adapter; both load with transformers/PEFT and match the policy
    out = runner.export(str(run.root), str(tmp_path / "export"))
    assert model_dir_problem(out) is None  # what the app's Serve… accepts
    assert (out / "adapter" / "adapter_config.json").is_file()
    assert (out / "adapter" / "tokenizer_config.json").is_file()
    probe = _probe(processor)
    want = _logits(policy.eval(), probe)
    merged = _logits(_base(out), probe)
    adapter = _logits(PeftModel.from_pretrained(_base(tiny_model_dir), str(out / "adapter")).eval(), probe)
    assert not torch.allclose(want, _logits(base, probe), atol=1e-4)  # the policy did change
    assert torch.allclose(merged, want, atol=1e-4) and torch.allclose(adapter, want, atol=1e-5)
    only = runner.export(str(run.root), str(tmp_path / "adapter-only"), merged=False)
    assert sorted(p.name for p in only.iterdir()) == ["adapter"]


def test_target_modules_stay_in_the_language_model_unless_vision_is_asked(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Qwen2.5-VL's vision MLP is also named gate/up/down_proj: by default none of it is adapted."""
    import tiny_vl_models
    from peft import get_peft_model
    from vrag_trainer.lora import peft_config

    path = tiny_vl_models.build_tiny_qwen25_vl(tmp_path / "q25", with_lm_head=True)
    default = get_peft_model(_base(path), peft_config(_base(path), LoraConfig(enabled=True)))
    adapted = {n.split(".lora_")[0] for n, _ in default.named_parameters() if ".lora_A" in n}
    assert adapted and not any(".visual." in n for n in adapted) and not any("lm_head" in n for n in adapted)
    assert {n.rsplit(".", 1)[-1] for n in adapted} == set(LoraConfig().target_modules)
    vision = get_peft_model(_base(path), peft_config(_base(path), LoraConfig(enabled=True, vision=True)))
    tower = {n.split(".lora_")[0] for n, _ in vision.named_parameters() if ".lora_A" in n and ".visual." in n}
    assert {n.rsplit(".", 1)[-1] for n in tower} >= {"qkv", "proj", "gate_proj", "down_proj"}
    assert any(".merger." in n for n in tower)


def test_lora_on_missing_modules_or_qlora_without_a_gpu_is_refused_before_a_step(  # type: ignore[no-untyped-def]
    tiny_model_dir, dataset_file, toy_data, search_url, processor, tmp_path
) -> None:
    bad = _config(
        tiny_model_dir,
        dataset_file,
        toy_data,
        search_url,
        lora={**LORA, "target_modules": ["q_proj", "c_attn", "query_key_value"]},
    )
    rc = runner.start(bad, str(tmp_path / "bad"), generator=lambda _m, p: vrag_script(p))
    assert rc == runner.EXIT_BAD
    state = TrainRun.open(tmp_path / "bad").state()
    assert state["status"] == "failed"
    want = "lora.target_modules: Qwen2VLForConditionalGeneration has no c_attn, query_key_value"
    assert state["error"].startswith(want), state["error"]
    assert "q_proj" in state["error"] and "down_proj" in state["error"]  # the names it does have
    assert not TrainRun.open(tmp_path / "bad").complete_checkpoints()
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: QLoRA would not be refused for want of one")
    q = _config(tiny_model_dir, dataset_file, toy_data, search_url, lora={**LORA, "qlora": True})
    assert runner.start(q, str(tmp_path / "q"), generator=lambda _m, p: vrag_script(p)) == runner.EXIT_BAD
    assert "lora.qlora: a 4-bit base needs a CUDA GPU" in TrainRun.open(tmp_path / "q").state()["error"]


def test_a_lora_run_resumes_from_its_adapter_checkpoint(  # type: ignore[no-untyped-def]
    tiny_model_dir, dataset_file, toy_data, search_url, tmp_path
) -> None:
    from safetensors.torch import load_file

    cfg = _config(tiny_model_dir, dataset_file, toy_data, search_url, lora=LORA, max_steps=1)
    root = tmp_path / "run"
    assert runner.start(cfg, str(root), generator=lambda _m, p: vrag_script(p)) == runner.EXIT_OK
    run = TrainRun.open(root)
    first = load_file(str(run.checkpoint_dir(1) / "adapter_model.safetensors"))
    seen: dict[str, Any] = {}

    def factory(model: Any, proc: Any) -> Any:  # called at the resumed step's first rollout
        seen["policy"] = model
        seen["at_start"] = {
            n.replace(".default.", "."): p.detach().clone()
            for n, p in model.named_parameters()
            if p.requires_grad
        }
        return vrag_script(proc)

    more = cfg.with_changes(max_steps=2)
    assert runner.resume(str(root), more, generator=factory) == runner.EXIT_OK
    assert [c.step for c in run.complete_checkpoints()] == [1, 2]
    second = load_file(str(run.checkpoint_dir(2) / "adapter_model.safetensors"))
    assert first.keys() == second.keys() and any(not torch.equal(first[k], second[k]) for k in first)
    assert all(".lora_" in n for n, p in seen["policy"].named_parameters() if p.requires_grad)
    restored = seen["at_start"]  # step 2 started from step 1's adapter, not a fresh one
    assert restored.keys() == first.keys() and all(torch.equal(restored[k], first[k]) for k in first)
