"""Generators: batched Hugging Face sampling on the real tiny model, and the vLLM glue (TRL's
``VLLMGeneration`` itself needs a GPU, so its interface is stood in for here)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from vrag_trainer.generation import HFGenerator, VLLMGenerator


def test_concurrent_rollouts_share_one_generate_call(tiny_model_dir, processor) -> None:  # type: ignore[no-untyped-def]
    from transformers import AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(str(tiny_model_dir))
    gen = HFGenerator(model, processor)
    tok = processor.tokenizer
    prompts = [
        tok.encode(f"<|im_start|>user\nquestion {i}<|im_end|>\n<|im_start|>assistant\n") for i in range(4)
    ]

    async def one(ids: list[int], budget: int) -> Any:
        async with gen.rollout():
            await asyncio.sleep(0.01 * len(ids) % 3)  # arrive at different moments
            return await gen.generate(ids, [], [], max_new_tokens=budget, temperature=1.0)

    async def main() -> list[Any]:
        return await asyncio.gather(*(one(p, 3 + i) for i, p in enumerate(prompts)))

    outs = asyncio.run(main())
    assert gen.batch_sizes == [4]  # everyone in flight asked: one batch
    for i, out in enumerate(outs):
        assert 1 <= len(out.ids) <= 3 + i  # each row keeps its own budget
        assert out.finish in ("stop", "length")
        assert not set(out.ids) & set(gen.suppress)  # vision placeholders are never sampled


def test_vllm_generator_syncs_weights_once_per_step_and_passes_images() -> None:
    calls: list[Any] = []

    class FakeVLLMGeneration:  # the interface of trl.generation.vllm_generation.VLLMGeneration
        def sync_weights(self) -> None:
            calls.append("sync")

        def generate(self, prompts: list[list[int]], images: Any, num_generations: int) -> tuple:
            calls.append(("generate", [len(p) for p in prompts], images, num_generations))
            comps = [[7, 8, 9, 10] for _ in prompts]
            return prompts, comps, [[[-0.5]] * 4 for _ in prompts], None

    trainer = SimpleNamespace(vllm_generation=FakeVLLMGeneration(), state=SimpleNamespace(global_step=0))
    gen = VLLMGenerator(trainer)

    async def turn(budget: int, images: list[Any]) -> Any:
        return await gen.generate([1, 2, 3], [], [], max_new_tokens=budget, temperature=1.0, images=images)

    async def main() -> list[Any]:
        return await asyncio.gather(turn(2, ["page"]), turn(8, []))

    first = asyncio.run(main())
    assert [o.ids for o in first] == [[7, 8], [7, 8, 9, 10]] and first[0].finish == "length"
    assert first[1].logprobs == [-0.5] * 4
    assert calls[0] == "sync" and calls[1] == ("generate", [3, 3], [["page"], None], 1)
    asyncio.run(main())
    assert calls.count("sync") == 1  # same optimiser step: no new push
    trainer.state.global_step = 1
    asyncio.run(main())
    assert calls.count("sync") == 2


def test_grpo_args_hand_generation_to_trls_vllm_when_asked() -> None:
    from vrag_trainer.trl_trainer import grpo_args

    from vrag_desktop.core.training.config import TrainConfig

    cfg = TrainConfig(model="m", dataset="d", generator="vllm", vllm_mode="server", max_response_length=512)
    args = grpo_args(cfg, "/tmp/x", use_cpu=True, bf16=False, logging_dir=None)  # no GPU here
    assert args.use_vllm and args.vllm_mode == "server" and args.max_completion_length == 512
    ggpo = grpo_args(
        TrainConfig(model="m", dataset="d", algorithm="ggpo"),
        "/tmp/x",
        use_cpu=True,
        bf16=False,
        logging_dir=None,
    )
    assert ggpo.loss_type == "grpo" and ggpo.importance_sampling_level == "sequence" and not ggpo.use_vllm
    grpo = grpo_args(
        TrainConfig(model="m", dataset="d"), "/tmp/x", use_cpu=True, bf16=False, logging_dir=None
    )
    assert (
        grpo.loss_type == "bnpo" and grpo.beta == 0.01 and grpo.epsilon == 0.2 and grpo.num_generations == 5
    )


def test_a_batch_is_generated_in_the_rollouts_order_not_their_arrival_order() -> None:
    """The same seed samples the same tokens for the same rollout: rows are drawn in each rollout's
    place in the step (ROLLOUT_ORDER), whichever search answered first."""
    from vrag_trainer.generation import ROLLOUT_ORDER, _Batching
    from vrag_trainer.policy import Generated

    class Recording(_Batching):
        def __init__(self) -> None:
            super().__init__()
            self.rows: list[list[int]] = []

        def _generate_batch(self, batch: list[Any]) -> list[Generated]:
            self.rows.append([r.prompt_ids[0] for r in batch])
            return [Generated([r.prompt_ids[0]], None, "stop") for r in batch]

    async def run(arrival: list[int]) -> tuple[list[list[int]], list[int]]:
        gen = Recording()

        async def one(n: int, delay: float) -> int:
            ROLLOUT_ORDER.set((0, n))
            async with gen.rollout():
                await asyncio.sleep(delay)  # a search answering sooner or later
                out = await gen.generate([n], [], [], max_new_tokens=1, temperature=1.0)
                return int(out.ids[0])

        got = await asyncio.gather(*(one(n, 0.01 * arrival.index(n)) for n in range(4)))
        return gen.rows, list(got)

    for arrival in ([3, 1, 0, 2], [0, 1, 2, 3], [2, 3, 1, 0]):
        rows, got = asyncio.run(run(arrival))
        assert rows == [[0, 1, 2, 3]], (arrival, rows)  # one batch, in the rollouts' order
        assert got == [0, 1, 2, 3]  # each rollout still gets its own row's result

    async def unordered() -> list[list[int]]:  # requests without an order keep their arrival order
        gen = Recording()

        async def one(n: int, delay: float) -> None:
            async with gen.rollout():
                await asyncio.sleep(delay)
                await gen.generate([n], [], [], max_new_tokens=1, temperature=1.0)

        await asyncio.gather(*(one(n, 0.01 * (3 - n)) for n in range(4)))
        return gen.rows

    assert asyncio.run(unordered()) == [[3, 2, 1, 0]]
