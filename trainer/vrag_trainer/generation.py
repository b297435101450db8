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
import contextlib
import contextvars
import math
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from vrag_trainer.policy import Generated, vision_token_ids

__all__ = ["ROLLOUT_ORDER", "HFGenerator", "VLLMGenerator", "vision_inputs"]

#: A rollout's place in its step (set by the task that runs it). Each batch is generated in this
#: order, not in the order the requests arrived (which follows the search server's timing), so the
#: same seed samples the same tokens for the same rollout: a step whose rollouts all run at once
#: is reproducible. Requests without one keep their arrival order.
ROLLOUT_ORDER: contextvars.ContextVar[tuple[int, ...]] = contextvars.ContextVar("rollout_order", default=())


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


@dataclass
class _Request:
    prompt_ids: list[int]
    pixel_values: list[Any]
    image_grid_thw: list[Any]
    images: list[Any]
    max_new_tokens: int
    temperature: float
    future: asyncio.Future[Generated]
    order: tuple[int, ...] = field(default_factory=ROLLOUT_ORDER.get)


class _Batching:
    """Collects the model calls that concurrent rollouts make and serves them as one batch.

    Rollouts announce themselves (:meth:`rollout`); a batch starts as soon as every rollout in
    flight is waiting for the model (or after ``max_wait_s``, so one slow tool call cannot hold
    the others for long). Without announced rollouts it waits ``wait_s`` for company. A step's
    rollouts thus cost about one ``generate`` per turn, not one per rollout and turn.
    """

    def __init__(self, max_batch: int = 64, wait_s: float = 0.005, max_wait_s: float = 2.0) -> None:
        self.max_batch = max(1, max_batch)
        self.wait_s = wait_s
        self.max_wait_s = max_wait_s
        self.active = 0  # rollouts in flight
        self._pending: list[_Request] = []
        self._pump: asyncio.Future[None] | None = None
        self._wake: asyncio.Event | None = None
        self.batches = 0  # generate calls made (for metrics and tests)
        self.batch_sizes: list[int] = []

    @contextlib.asynccontextmanager
    async def rollout(self) -> AsyncIterator[None]:
        """Hold while a rollout may still ask for tokens."""
        self.active += 1
        try:
            yield
        finally:
            self.active -= 1
            self._poke()

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

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
        loop = asyncio.get_running_loop()
        req = _Request(
            list(prompt_ids),
            list(pixel_values or []),
            list(image_grid_thw or []),
            list(images or []),
            max_new_tokens,
            temperature,
            loop.create_future(),
        )
        self._pending.append(req)
        self._poke()
        if self._pump is None or self._pump.done():
            self._wake = asyncio.Event()
            self._pump = asyncio.ensure_future(self._serve())
        return await req.future

    async def _gather(self) -> None:
        """Wait until every rollout in flight has asked (or the batch is full, or time is up)."""
        loop = asyncio.get_running_loop()
        if self.active <= 0:
            await asyncio.sleep(self.wait_s)
            return
        deadline = loop.time() + self.max_wait_s
        assert self._wake is not None
        while len(self._pending) < min(self.active, self.max_batch):
            left = deadline - loop.time()
            if left <= 0:
                return
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), left)
            except asyncio.TimeoutError:
                return

    async def _serve(self) -> None:
        while self._pending:
            await self._gather()
            batch = [r for r in self._pending[: self.max_batch] if not r.future.done()]
            del self._pending[: self.max_batch]
            batch.sort(key=lambda r: r.order)  # stable: unordered requests keep their arrival order
            if not batch:
                continue
            try:
                results = await asyncio.to_thread(self._generate_batch, batch)
                self.batches += 1
                self.batch_sizes.append(len(batch))
            except Exception as exc:
                for r in batch:
                    if not r.future.done():
                        r.future.set_exception(exc)
                continue
            for r, out in zip(batch, results, strict=True):
                if not r.future.done():
                    r.future.set_result(out)

    def _generate_batch(self, batch: list[_Request]) -> list[Generated]:  # pragma: no cover - abstract
        raise NotImplementedError


class HFGenerator(_Batching):
    """Sampling with ``model.generate`` on the trained model itself: left-padded batches, each
    row cut at its first end-of-turn token and at its own token budget."""

    def __init__(self, model: Any, processor: Any, *, max_batch: int = 64, wait_s: float = 0.005) -> None:
        super().__init__(max_batch, wait_s)
        self.model = model
        self.processor = processor
        self._lock = threading.Lock()
        tok = processor.tokenizer
        gen_eos = getattr(model.generation_config, "eos_token_id", None)
        eos = {tok.eos_token_id, *(gen_eos if isinstance(gen_eos, list) else [gen_eos])}
        self.eos_ids = sorted(i for i in eos if isinstance(i, int))
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else (self.eos_ids or [0])[0]
        self.suppress = sorted(vision_token_ids(tok))

    def _generate_batch(self, batch: list[_Request]) -> list[Generated]:
        import torch
        from transformers import GenerationConfig

        model = self.model
        device = next(model.parameters()).device
        width = max(len(r.prompt_ids) for r in batch)
        ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long, device=device)
        attention = torch.zeros_like(ids)
        for k, r in enumerate(batch):
            ids[k, width - len(r.prompt_ids) :] = torch.tensor(r.prompt_ids, device=device)
            attention[k, width - len(r.prompt_ids) :] = 1
        extra = vision_inputs(
            model,
            ids,
            [p for r in batch for p in r.pixel_values],
            [g for r in batch for g in r.image_grid_thw],
        )
        temperature = batch[0].temperature
        config = GenerationConfig(
            max_new_tokens=max(r.max_new_tokens for r in batch),
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
                    input_ids=ids, attention_mask=attention, generation_config=config, **extra
                )
            finally:
                model.train(was_training)
        results = []
        for k, r in enumerate(batch):
            new = out[k, width:].tolist()[: r.max_new_tokens]
            end = next((i for i, t in enumerate(new) if t in self.eos_ids), None)
            if end is not None:
                results.append(Generated(new[: end + 1], None, "stop"))
            else:
                results.append(Generated(new, None, "length"))
        return results


class VLLMGenerator(_Batching):
    """Rollouts on vLLM through TRL's own ``VLLMGeneration`` (the trainer builds it when
    ``generator: vllm``): colocated in the training process or a ``trl vllm-serve`` server, token
    ids in with the images as multi-modal data, and TRL's weight sync (plain, FSDP, DeepSpeed,
    PEFT) before the first rollout of each optimiser step. Not run in this project yet: vLLM
    needs a GPU and could not be installed where the tests run."""

    def __init__(self, trainer: Any, max_batch: int = 256) -> None:
        super().__init__(max_batch)
        self.trainer = trainer
        self.vllm = trainer.vllm_generation
        self._synced_step = -1

    def sync(self) -> None:
        """Push the current weights if an optimiser step happened since the last push."""
        step = int(self.trainer.state.global_step)
        if step != self._synced_step:
            self.vllm.sync_weights()
            self._synced_step = step

    def _generate_batch(self, batch: list[_Request]) -> list[Generated]:
        self.sync()
        images = [list(r.images) or None for r in batch]
        _, completions, logprobs, _ = self.vllm.generate(
            prompts=[r.prompt_ids for r in batch],
            images=images if any(images) else None,
            num_generations=1,
        )
        results = []
        for k, r in enumerate(batch):
            ids = list(completions[k])[: r.max_new_tokens]
            lps = None
            if logprobs is not None:
                lps = [float(step[0]) if step and step[0] is not None else math.nan for step in logprobs[k]]
                lps = lps[: len(ids)]
            finish = "stop" if len(ids) < r.max_new_tokens else "length"
            results.append(Generated(ids, lps, finish))
        return results
