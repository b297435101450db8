"""Generators: continue a token sequence with the policy's current weights.

:class:`HFGenerator` runs Hugging Face ``generate`` on the training model itself (CPU, or a GPU
without vLLM): no weight sync is needed because it *is* the trained model. Calls from concurrent
rollouts are served one at a time in a worker thread, so the event loop keeps running searches
and judge calls for the other rollouts meanwhile.

:class:`VLLMGenerator` (GPU) runs an in-process vLLM engine on token ids with the images as
multi-modal data; the trainer pushes the weights into it after each optimiser step.
"""

from __future__ import annotations

import asyncio
import math
import threading
from typing import Any

from vrag_trainer.policy import Generated, vision_token_ids

__all__ = ["HFGenerator", "VLLMGenerator", "vision_inputs"]


def vision_inputs(model: Any, ids: Any, pixel_values: list[Any], image_grid_thw: list[Any]) -> dict[str, Any]:
    """The image tensors a Qwen-VL forward needs for ``ids``: pixels, grids and the token types
    M-RoPE reads (1 on image tokens)."""
    import torch

    out: dict[str, Any] = {}
    cfg = model.config
    image_token = getattr(cfg, "image_token_id", None)
    if pixel_values:
        dtype = next(model.parameters()).dtype
        out["pixel_values"] = torch.cat(list(pixel_values)).to(ids.device, dtype=dtype)
        out["image_grid_thw"] = torch.stack([torch.as_tensor(g) for g in image_grid_thw]).to(ids.device)
    if image_token is not None:
        out["mm_token_type_ids"] = (ids == image_token).long()
    return out


class HFGenerator:
    """Sampling with ``model.generate`` (one sequence at a time, under a lock)."""

    def __init__(self, model: Any, processor: Any) -> None:
        self.model = model
        self.processor = processor
        self._lock = threading.Lock()
        tok = processor.tokenizer
        self.eos_ids = sorted(
            {
                i
                for i in (tok.eos_token_id, getattr(model.generation_config, "eos_token_id", None))
                if isinstance(i, int)
            }
        )
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else (self.eos_ids or [0])[0]
        self.suppress = sorted(vision_token_ids(tok))

    async def generate(
        self,
        prompt_ids: list[int],
        pixel_values: Any,
        image_grid_thw: Any,
        *,
        max_new_tokens: int,
        temperature: float,
    ) -> Generated:
        return await asyncio.to_thread(
            self._generate, prompt_ids, pixel_values, image_grid_thw, max_new_tokens, temperature
        )

    def _generate(
        self, prompt_ids: list[int], pixel_values: Any, grid: Any, max_new_tokens: int, temperature: float
    ) -> Generated:
        import torch
        from transformers import GenerationConfig

        model = self.model
        device = next(model.parameters()).device
        ids = torch.tensor([prompt_ids], device=device)
        extra = vision_inputs(model, ids, pixel_values, grid)
        config = GenerationConfig(
            max_new_tokens=max_new_tokens,
            do_sample=temperature > 0,
            temperature=temperature if temperature > 0 else None,
            top_p=1.0 if temperature > 0 else None,
            top_k=0 if temperature > 0 else None,
            eos_token_id=self.eos_ids or None,
            pad_token_id=self.pad_id,
            suppress_tokens=self.suppress or None,
        )
        with self._lock, torch.no_grad():
            was_training = model.training
            model.eval()
            try:
                out = model.generate(
                    input_ids=ids,
                    attention_mask=torch.ones_like(ids),
                    generation_config=config,
                    **extra,
                )
            finally:
                model.train(was_training)
        new = out[0, len(prompt_ids) :].tolist()
        if new and new[-1] == self.pad_id and self.pad_id not in self.eos_ids:
            while new and new[-1] == self.pad_id:  # generate pads nothing for one row; be safe
                new.pop()
        finish = "stop" if new and new[-1] in self.eos_ids else "length"
        return Generated(new, None, finish)


class VLLMGenerator:
    """An in-process vLLM engine (GPU only). ``sync_weights(model)`` pushes the trained weights."""

    def __init__(
        self,
        model_dir: str,
        *,
        gpu_memory_utilization: float,
        max_model_len: int,
        max_images: int,
        seed: int = 0,
    ) -> None:
        from vllm import LLM  # type: ignore[import-not-found,unused-ignore]  # GPU environment only

        self.llm = LLM(
            model=model_dir,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
            limit_mm_per_prompt={"image": max_images},
            seed=seed,
            enable_prefix_caching=True,
        )
        self._lock = threading.Lock()

    def sync_weights(self, model: Any) -> None:
        """Load the trainer's current weights into the engine (names as the HF checkpoint has them)."""
        state = model.state_dict()
        engine_model = self.llm.llm_engine.model_executor.driver_worker.worker.model_runner.model
        engine_model.load_weights(state.items())

    async def generate(
        self,
        prompt_ids: list[int],
        pixel_values: Any,
        image_grid_thw: Any,
        *,
        max_new_tokens: int,
        temperature: float,
        images: list[Any] | None = None,
    ) -> Generated:
        return await asyncio.to_thread(self._generate, prompt_ids, images or [], max_new_tokens, temperature)

    def _generate(
        self, prompt_ids: list[int], images: list[Any], max_new_tokens: int, temperature: float
    ) -> Generated:
        from vllm import SamplingParams  # type: ignore[import-not-found,unused-ignore]

        params = SamplingParams(max_tokens=max_new_tokens, temperature=temperature, logprobs=0)
        prompt: dict[str, Any] = {"prompt_token_ids": prompt_ids}
        if images:
            prompt["multi_modal_data"] = {"image": images}
        with self._lock:
            out = self.llm.generate([prompt], params, use_tqdm=False)[0].outputs[0]
        lps = [next(iter(d.values())).logprob if d else math.nan for d in (out.logprobs or [])]
        return Generated(
            list(out.token_ids), lps or None, "length" if out.finish_reason == "length" else "stop"
        )
