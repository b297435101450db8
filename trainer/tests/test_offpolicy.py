"""vLLM's importance-sampling correction, supplied by this trainer: the ratio's arithmetic per TRL
mode, and real GRPO steps in TRL's vLLM mode whose sampler log-probs line up token by token with
the policy's own (vLLM itself needs a GPU or its CPU build; here a generator reports the policy's
exact log-probs, shifted by a known amount, as vLLM's would be)."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from conftest import ScriptedGenerator
from test_training import _config, vrag_script
from vrag_trainer import runner
from vrag_trainer.generation import vision_inputs
from vrag_trainer.offpolicy import importance_ratio
from vrag_trainer.policy import Generated

from vrag_desktop.core.training.rundir import TrainRun

SHIFT = 0.25  # the "sampler" thinks every token it drew is this much (in log-prob) likelier


def test_ratio_per_mode_by_hand() -> None:
    policy = torch.tensor([[-1.0, -2.0, -0.5, 0.0]])
    sampling = torch.tensor([[-1.5, -1.0, float("nan"), -9.0]])
    mask = torch.tensor([[1, 1, 1, 0]])
    diff = [0.5, -1.0, 0.0, 0.0]  # NaN (not scored) counts as ratio 1; masked tokens too
    token = importance_ratio(policy, sampling, mask, mode="token_truncate", clip_max=1.5)
    assert token[0].tolist() == pytest.approx([min(math.exp(d), 1.5) for d in diff])
    masked = importance_ratio(policy, sampling, mask, mode="token_mask", clip_min=0.5, clip_max=1.5)
    assert masked[0].tolist() == pytest.approx(
        [math.exp(d) if 0.5 <= math.exp(d) <= 1.5 else 0.0 for d in diff]
    )
    seq = importance_ratio(policy, sampling, mask, mode="sequence_truncate", clip_max=3.0)
    assert seq.shape == (1, 1) and seq.item() == pytest.approx(math.exp(-0.5))
    assert importance_ratio(policy, sampling, mask, mode="sequence_mask", clip_min=0.7).item() == 0.0
    with pytest.raises(ValueError, match="unknown importance sampling mode"):
        importance_ratio(policy, sampling, mask, mode="tokens")


def test_collate_puts_the_recorded_logprobs_under_their_completion_tokens() -> None:
    from vrag_trainer.batch import collate
    from vrag_trainer.ggpo import Row
    from vrag_trainer.policy import Segment

    nan = float("nan")
    s1 = Segment(input_ids=[5, 6, 7, 8, 9], loss_mask=[0, 0, 1, 0, 1], prompt_len=2)
    s1.logprobs = [nan, nan, -0.5, nan, -1.5]
    s2 = Segment(input_ids=[5, 7, 8], loss_mask=[0, 1, 1], prompt_len=1)  # none recorded (HF)
    b = collate([Row(s1, 1.0, 1, 0), Row(s2, -1.0, 1, 1)], 0, None)
    got = b["sampling_per_token_logps"]
    assert got.shape == b["completion_ids"].shape == (2, 3)
    assert got[0, 0] == -0.5 and got[0, 2] == -1.5 and torch.isnan(got[0, 1]) and torch.isnan(got[1]).all()
    assert "sampling_per_token_logps" not in collate([Row(s2, -1.0, 1, 1)], 0, None)


class ReportingScript(ScriptedGenerator):
    """The scripted replies, with the log-probs a sampler would report for them: the policy's own
    (a forward pass over the same ids and images, at the run's temperature) plus :data:`SHIFT`."""

    def __init__(self, model: Any, processor: Any, temperature: float) -> None:
        script = vrag_script(processor)
        super().__init__(processor, script.reply)
        self.model = model
        self.temperature = temperature

    async def generate(self, prompt_ids: list[int], pixel_values: Any, image_grid_thw: Any, **kw: Any) -> Any:
        out = await super().generate(prompt_ids, pixel_values, image_grid_thw, **kw)
        ids = torch.tensor([list(prompt_ids) + out.ids])
        extra = vision_inputs(self.model, ids, list(pixel_values), list(image_grid_thw))
        with torch.no_grad():
            logits = self.model(input_ids=ids, **extra).logits[0, len(prompt_ids) - 1 : -1]
        logps = torch.log_softmax(logits.float() / self.temperature, dim=-1)
        picked = logps.gather(-1, torch.tensor(out.ids)[:, None])[:, 0]
        return Generated(out.ids, [float(x) + SHIFT for x in picked], out.finish)


@pytest.mark.parametrize("lora", [False, True])
def test_grpo_steps_in_vllm_mode_get_the_ratio_from_the_recorded_logprobs(  # type: ignore[no-untyped-def]
    lora, tiny_model_dir, dataset_file, toy_data, search_url, tmp_path
) -> None:
    cfg = _config(
        tiny_model_dir,
        dataset_file,
        toy_data,
        search_url,
        lora={"enabled": lora, "rank": 4},
        max_steps=2,
    )

    def vllm_mode(trainer: Any, _rollouts: Any, _rows: Any) -> None:
        # what GRPOConfig(use_vllm=True) sets (the engine itself is not installed here); TRL's
        # default correction stays on, as it does for `generator: vllm`
        trainer.use_vllm = True
        assert trainer.vllm_importance_sampling_correction
        assert trainer.vllm_importance_sampling_mode == "sequence_mask"

    rc = runner.start(
        cfg,
        str(tmp_path / "run"),
        generator=lambda model, p: ReportingScript(model, p, cfg.temperature),
        on_step=vllm_mode,
    )
    run = TrainRun.open(tmp_path / "run")
    assert rc == runner.EXIT_OK, run.state()
    rows = run.metrics()
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        # every generated token's recorded log-prob sits exactly SHIFT above the policy's: aligned
        assert r["sampling/sampling_logp_difference/mean"] == pytest.approx(SHIFT, abs=1e-4)
        assert r["sampling/sampling_logp_difference/max"] == pytest.approx(SHIFT, abs=1e-4)
        # one ratio per sequence, exp(-SHIFT * its generated tokens): below 1, inside the mask
        assert (
            0.0
            < r["sampling/importance_sampling_ratio/min"]
            <= r["sampling/importance_sampling_ratio/max"]
            < 1.0
        )
        assert math.isfinite(r["loss"]) and r["grad_norm"] > 0
