"""The trainer's GPU path, measured: GRPO steps of the VRAG agent in bf16 on CUDA with a random
Qwen2-VL of a few hundred million parameters, batched Hugging Face generation, the real
PolicyChat / rollout / GGPO rows / TRL loss. Prints and writes JSON: step time, rollout and
update time, generated tokens per second, peak GPU memory, and whether the weights moved.

No model hub and no vLLM on the lent GPU machines: the weights are random (rewards are mostly 0;
a scripted fraction of answers keeps the advantages non-zero so the update is real) and search is
a small in-process keyword searcher over pages rendered with PIL — what is measured is the
machinery on a GPU, not answer quality. Run: ``python bench/trainer_gpu.py --out DIR``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "trainer"), str(ROOT / "tests")]

PAGES = {
    "alpha_1": "The revenue of Alpha Corp in 2023 was 42 million dollars.",
    "alpha_2": "Alpha Corp employs 300 people in four offices.",
    "beta_1": "Beta Inc sells red bicycles and blue scooters.",
    "beta_2": "The Beta headquarters are in Oslo, Norway.",
}
QUESTIONS = [
    ("q1", "What was the revenue of Alpha Corp in 2023?", "42 million dollars", "alpha_1"),
    ("q2", "Where are the Beta headquarters?", "Oslo", "beta_2"),
    ("q3", "How many people does Alpha Corp employ?", "300", "alpha_2"),
    ("q4", "What does Beta Inc sell?", "red bicycles", "beta_1"),
]


class PageSearcher:
    """Keyword overlap over rendered pages (the Searcher protocol)."""

    local_files = True

    def __init__(self, folder: Path) -> None:
        from PIL import Image, ImageDraw

        folder.mkdir(parents=True, exist_ok=True)
        self.pages: dict[str, Path] = {}
        for name, text in PAGES.items():
            img = Image.new("RGB", (896, 640), "white")
            ImageDraw.Draw(img).text((40, 40), text, fill="black")
            path = folder / f"{name}.png"
            img.save(path)
            self.pages[name] = path

    def search(self, query: str, k: int) -> list[Any]:
        from vrag_desktop.core.search.hit import Hit

        words = set(query.lower().split())
        ranked = sorted(PAGES, key=lambda n: -len(words & set(PAGES[n].lower().split())))
        return [
            Hit(
                score=1.0 / (i + 1),
                name=n,
                source=f"{n.split('_')[0]}.pdf",
                modality="page",
                image=str(self.pages[n]),
                page=int(n.split("_")[1]),
            )
            for i, n in enumerate(ranked[:k])
        ]

    def load_image(self, path: str) -> bytes:
        return Path(path).read_bytes()


def build_model(out: Path, hidden: int, layers: int) -> Path:
    import tiny_vl_models as T

    tags = ("<think>", "</think>", "<search>", "</search>", "<answer>", "</answer>", "<bbox>", "</bbox>")
    return T.build_tiny_qwen2_vl(
        out,
        with_lm_head=True,
        extra_tokens=tags,
        hidden=hidden,
        layers=layers,
        vision_depth=4,
        max_image_tokens=256,
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "trainer_gpu"))
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--group", type=int, default=5)
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--cpu", action="store_true", help="a dry run on the CPU (small sizes)")
    a = ap.parse_args()
    import logging

    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    import torch
    from datasets import Dataset as HFDataset  # type: ignore[import-untyped]
    from transformers import AutoModelForImageTextToText
    from vrag_trainer.generation import HFGenerator
    from vrag_trainer.policy import Limits
    from vrag_trainer.rollout import RolloutSpec
    from vrag_trainer.trl_trainer import AgentGRPOTrainer, grpo_args

    from vrag_desktop.core.datasets import DatasetItem
    from vrag_desktop.core.embedders.qwen_vl_loading import load_processor
    from vrag_desktop.core.training.config import JudgeConfig, TrainConfig

    cuda = torch.cuda.is_available() and not a.cpu
    model_dir = build_model(out / "model", a.hidden, a.layers)
    dtype = torch.bfloat16 if cuda else torch.float32
    model = AutoModelForImageTextToText.from_pretrained(str(model_dir), dtype=dtype)
    n_params = sum(p.numel() for p in model.parameters())
    processor = load_processor(model_dir, "qwen2_vl")
    items = [
        DatasetItem(uid, q, ans, file_name=f"{g.split('_')[0]}.pdf", reference_page=(int(g.split("_")[1]),))
        for uid, q, ans, g in QUESTIONS
    ]
    golden = [(g,) for *_, g in QUESTIONS]
    cfg = TrainConfig(
        model=str(model_dir),
        dataset="x",
        group_size=a.group,
        prompts_per_step=a.prompts,
        max_turns=3,
        max_response_length=a.tokens,
        max_model_len=8192,
        max_steps=a.steps,
        learning_rate=1e-5,
        warmup_steps=0,
        save_steps=10_000,
        micro_batch_rows=a.group * a.prompts,
        judge=JudgeConfig(kind="exact"),
        tensorboard=False,
        samples_per_step=0,
        device="cuda" if cuda else "cpu",
    )
    args = grpo_args(cfg, str(out / "ckpt"), use_cpu=not cuda, bf16=cuda, logging_dir=None)
    searcher = PageSearcher(out / "pages")
    rng = random.Random(0)
    gen_box: dict[str, Any] = {}

    class Mixed:
        """The policy's own samples; one answer in three replaced by the scripted right one so
        groups have a spread of rewards (the update is then not zero)."""

        def __init__(self, inner: HFGenerator) -> None:
            self.inner = inner
            self.tok = processor.tokenizer
            self.model_tokens = 0
            self.rollout = inner.rollout  # rollouts announce themselves, so turns are batched
            self.model_s = 0.0

        async def generate(self, prompt_ids: list[int], pixel_values: Any, grid: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            got = await self.inner.generate(prompt_ids, pixel_values, grid, **kw)
            self.model_s += time.perf_counter() - t0
            self.model_tokens += len(got.ids)
            if rng.random() < 0.33:
                from vrag_trainer.policy import Generated

                text = self.tok.decode(prompt_ids)
                q = next((x for x in QUESTIONS if x[1] in text), QUESTIONS[0])
                reply = f"<search>{q[1]}</search>" if not pixel_values else f"<answer>{q[2]}</answer>"
                ids = [*self.tok.encode(reply, add_special_tokens=False), self.tok.eos_token_id]
                return Generated(ids, None, "stop")
            return got

    async def judge(query: str, reference: str, answer: str | None) -> tuple[bool | None, str | None]:
        return (answer or "").strip() == reference, None

    def make_spec(trainer: Any) -> RolloutSpec:
        inner = HFGenerator(trainer.accelerator.unwrap_model(trainer.model), processor)
        batch_fn = inner._generate_batch

        def timed_batch(batch: Any) -> Any:  # time the GPU's generate calls themselves
            t = time.perf_counter()
            try:
                return batch_fn(batch)
            finally:
                gen_box["generate_s"] = gen_box.get("generate_s", 0.0) + time.perf_counter() - t

        inner._generate_batch = timed_batch  # type: ignore[method-assign]
        gen_box["gen"] = Mixed(inner)
        gen_box["inner"] = inner
        return RolloutSpec(
            "vrag",
            processor,
            gen_box["gen"],
            lambda: searcher,
            Limits(8192, a.tokens, 10),
            max_turns=3,
            top_k=1,
            temperature=1.0,
        )

    rows = [{"prompt": [{"role": "user", "content": it.query}], "index": i} for i, it in enumerate(items)]
    trainer = AgentGRPOTrainer(
        model=model,
        args=args,
        train_dataset=HFDataset.from_list(rows),
        processing_class=processor.tokenizer,
        run_config=cfg,
        items=items,
        golden=golden,
        make_spec=make_spec,
        judge=judge,
    )
    before = {k: v.detach().float().cpu().clone() for k, v in model.named_parameters() if "lm_head" in k}
    times: list[float] = []
    orig_step = trainer.training_step

    def timed(*args_: Any, **kw: Any) -> Any:
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        r = orig_step(*args_, **kw)
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        return r

    trainer.training_step = timed  # type: ignore[method-assign]
    t0 = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - t0
    after = {k: v.detach().float().cpu() for k, v in model.named_parameters() if "lm_head" in k}
    mixed = gen_box["gen"]
    history = [h for h in trainer.state.log_history if "reward" in h]
    result = {
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "torch": torch.__version__,
        "params_M": round(n_params / 1e6, 1),
        "dtype": str(dtype),
        "steps": a.steps,
        "rollouts_per_step": a.group * a.prompts,
        "step_seconds": [round(t, 3) for t in times],
        "wall_seconds": round(wall, 2),
        "generate_calls": mixed.inner.batches,
        "batch_sizes": mixed.inner.batch_sizes,
        "model_tokens": mixed.model_tokens,
        "generate_seconds": round(gen_box.get("generate_s", 0.0), 2),
        "generated_tokens_per_s_per_gpu": round(
            mixed.model_tokens / max(gen_box.get("generate_s", 0.0), 1e-9), 1
        ),
        "peak_gpu_memory_gb": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None,
        "weights_changed": any(not torch.equal(before[k], after[k]) for k in before),
        "log": history,
    }
    (out / "trainer_gpu.json").write_text(json.dumps(result, indent=2, default=str))
    print(json.dumps({k: v for k, v in result.items() if k != "log"}, indent=2))
    for h in history:
        print(
            {
                k: h.get(k)
                for k in (
                    "step",
                    "reward",
                    "accuracy",
                    "loss",
                    "kl",
                    "response_length",
                    "tokens_per_second",
                    "step_time",
                    "gpu_memory_gb",
                )
            }
        )
    return 0


if __name__ == "__main__":
    asyncio.set_event_loop_policy(None)
    sys.exit(main())
