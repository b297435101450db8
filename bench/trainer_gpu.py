"""The trainer's GPU path, measured: GRPO steps of the VRAG agent on CUDA (bf16) with a random
Qwen-VL, batched Hugging Face generation, the real PolicyChat / rollout / GGPO rows / TRL loss.
Prints and writes ``trainer_gpu.json``: step time, rollout and update time, generated tokens per
second, peak GPU memory against core's pre-flight estimate (``core/training/memory.py``, for the
same config and image budget), whether the weights moved, and a profile of every generate call
(batch size, prompt lengths, prefill / decode / vision-tower time: where the §8.1 figures of
docs/benchmarks.md come from).

``--arch qwen25vl-7b`` builds the real Qwen2.5-VL-7B config (core's catalogue entry, the VRAG
model's architecture) with random weights straight on the GPU (no download, nothing saved) and
trains LoRA with the docs' 24 GB settings (checkpointing, 1 row, 6,144 tokens, 8 images of
512·28·28 pixels, group 5): the one command for a lent GPU::

    python bench/trainer_gpu.py --arch qwen25vl-7b --out /tmp/gpu7b --steps 2 --prompts 2 --tokens 128

``--arch tiny`` (default) is a random Qwen2-VL of ``--hidden``/``--layers``; ``--cpu`` runs it on the
CPU (a dry run of the whole script). No model hub and no vLLM on the lent machines: the weights are
random (rewards are mostly 0; a scripted third of the answers keeps the advantages non-zero so the
update is real) and search is an in-process keyword searcher over pages rendered with PIL — what
is measured is the machinery, not answer quality.
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


TAGS = ("<think>", "</think>", "<search>", "</search>", "<answer>", "</answer>", "<bbox>", "</bbox>")
#: What Qwen2.5-VL-7B's config.json has beyond core's catalogue entry (which holds what the memory
#: estimate reads): M-RoPE sections, RoPE base, norms, the vision tower's window attention.
QWEN25_EXTRA = {
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-06,
    "hidden_act": "silu",
    "max_window_layers": 28,
}
QWEN25_VISION_EXTRA = {"window_size": 112, "fullatt_block_indexes": [7, 15, 23, 31], "tokens_per_second": 2}


def build_tiny(out: Path, hidden: int, layers: int, image_tokens: int) -> Path:
    import tiny_vl_models as T

    return T.build_tiny_qwen2_vl(
        out,
        with_lm_head=True,
        extra_tokens=TAGS,
        hidden=hidden,
        layers=layers,
        vision_depth=4,
        max_image_tokens=image_tokens,
    )


def build_7b(out: Path, image_tokens: int, device: Any, dtype: Any) -> tuple[Path, dict[str, Any], Any]:
    """The Qwen2.5-VL-7B architecture, random weights made on ``device`` (nothing downloaded or
    saved); the folder holds its config.json and a small tokenizer and processor (their special
    token ids written into the config, the vocabulary kept at 7B's 152,064 rows)."""
    import shutil

    import torch
    from transformers import AutoModelForImageTextToText, Qwen2_5_VLConfig

    from vrag_desktop.core.models.catalogue_data import QWEN25_VL_7B

    small = build_tiny(out / "processor", 64, 1, image_tokens)
    tiny_cfg = json.loads((small / "config.json").read_text())
    cfg = {**QWEN25_VL_7B, **QWEN25_EXTRA}
    cfg["vision_config"] = {**QWEN25_VL_7B["vision_config"], **QWEN25_VISION_EXTRA}
    for key in ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id"):
        cfg[key] = tiny_cfg[key]
    text = tiny_cfg.get("text_config", tiny_cfg)
    cfg.update(bos_token_id=None, eos_token_id=text["eos_token_id"], pad_token_id=text["pad_token_id"])
    folder = out / "model"
    folder.mkdir(parents=True, exist_ok=True)
    for f in small.iterdir():
        if f.suffix != ".safetensors" and f.name != "config.json":
            shutil.copy(f, folder / f.name)
    (folder / "config.json").write_text(json.dumps(cfg, indent=1))
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForImageTextToText.from_config(Qwen2_5_VLConfig(**cfg), dtype=dtype)
    return folder, cfg, model


class Profile:
    """Times every forward of the policy inside generate calls (prefill: the call's first, whole
    prompt and images; decode: one token a row) and the vision tower, per generate call."""

    def __init__(self, base: Any, cuda: bool) -> None:
        import torch

        self.cuda = cuda
        self.calls: list[dict[str, Any]] = []
        self.active: dict[str, Any] | None = None
        self._sync = torch.cuda.synchronize if cuda else (lambda: None)
        self._t: dict[str, float] = {}
        base.register_forward_pre_hook(self._pre("model"), with_kwargs=True)
        base.register_forward_hook(self._post("model"), with_kwargs=True)
        visual = getattr(getattr(base, "model", base), "visual", None)
        if visual is not None:
            visual.register_forward_pre_hook(self._pre("vision"), with_kwargs=True)
            visual.register_forward_hook(self._post("vision"), with_kwargs=True)

    def _pre(self, what: str) -> Any:
        def hook(_m: Any, _a: Any, _k: Any) -> None:
            if self.active is not None:
                self._sync()
                self._t[what] = time.perf_counter()

        return hook

    def _post(self, what: str) -> Any:
        def hook(_m: Any, args: Any, kwargs: Any, _out: Any) -> None:
            call = self.active
            if call is None or what not in self._t:
                return
            self._sync()
            dt = time.perf_counter() - self._t.pop(what)
            if what == "vision":
                call["vision_s"] += dt
                return
            ids = kwargs.get("input_ids", args[0] if args else None)
            if ids is not None and ids.shape[-1] > 1 and call["decode_steps"] == 0:
                call["prefill_s"] += dt
            else:
                call["decode_s"] += dt
                call["decode_steps"] += 1

        return hook

    def begin(self, batch: list[Any]) -> None:
        lens = [len(r.prompt_ids) for r in batch]
        self.active = {
            "batch": len(batch),
            "prompt_max": max(lens),
            "prompt_mean": round(sum(lens) / len(lens), 1),
            "images": sum(len(r.pixel_values) for r in batch),
            "prefill_s": 0.0,
            "decode_s": 0.0,
            "decode_steps": 0,
            "vision_s": 0.0,
        }

    def end(self, results: list[Any], seconds: float, peak_gb: float | None) -> None:
        call, self.active = self.active, None
        if call is None:
            return
        call["new_tokens"] = sum(len(g.ids) for g in results)
        call["seconds"] = round(seconds, 4)
        call["peak_gb"] = peak_gb
        for k in ("prefill_s", "decode_s", "vision_s"):
            call[k] = round(call[k], 4)
        self.calls.append(call)

    def summary(self) -> dict[str, Any]:
        calls = self.calls
        decode = sum(c["decode_s"] for c in calls)
        steps = sum(c["decode_steps"] for c in calls)
        rows = sum(c["batch"] * c["decode_steps"] for c in calls)
        return {
            "generate_calls": len(calls),
            "batch_sizes": [c["batch"] for c in calls],
            "prefill_seconds": round(sum(c["prefill_s"] for c in calls), 3),
            "decode_seconds": round(decode, 3),
            "vision_seconds": round(sum(c["vision_s"] for c in calls), 3),
            "decode_steps": steps,
            "decode_ms_per_step": round(1000 * decode / max(steps, 1), 2),
            "decode_row_tokens_per_s": round(rows / max(decode, 1e-9), 1),
            "new_tokens": sum(c["new_tokens"] for c in calls),
        }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "trainer_gpu"))
    ap.add_argument("--arch", choices=("tiny", "qwen25vl-7b"), default="tiny")
    ap.add_argument("--hidden", type=int, default=1024, help="tiny only")
    ap.add_argument("--layers", type=int, default=12, help="tiny only")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--group", type=int, default=5)
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=128, help="max_response_length (tokens a turn)")
    ap.add_argument("--lora", action="store_true", help="LoRA rank 16 (always on for the 7B)")
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
    from vrag_trainer.lora import peft_config
    from vrag_trainer.policy import Limits
    from vrag_trainer.rollout import RolloutSpec
    from vrag_trainer.trl_trainer import AgentGRPOTrainer, grpo_args

    from vrag_desktop.core.datasets import DatasetItem
    from vrag_desktop.core.embedders.qwen_vl_loading import load_processor
    from vrag_desktop.core.runtime.gpu import detect_gpus
    from vrag_desktop.core.training.config import JudgeConfig, TrainConfig
    from vrag_desktop.core.training.lora import LoraConfig
    from vrag_desktop.core.training.memory import memory_estimate

    cuda = torch.cuda.is_available() and not a.cpu
    dtype = torch.bfloat16 if cuda else torch.float32
    big = a.arch == "qwen25vl-7b"
    image_tokens = 512 if big else 256  # 7B: VRAG's 512·28·28 pixels an image (docs' budget)
    t_build = time.perf_counter()
    if big:
        model_dir, config, model = build_7b(out, image_tokens, "cuda" if cuda else "cpu", dtype)
    else:
        model_dir = build_tiny(out / "model", a.hidden, a.layers, image_tokens)
        config = json.loads((model_dir / "config.json").read_text())
        model = AutoModelForImageTextToText.from_pretrained(str(model_dir), dtype=dtype)
        if cuda:
            model = model.to("cuda")
    build_s = time.perf_counter() - t_build
    n_params = sum(p.numel() for p in model.parameters())
    processor = load_processor(model_dir, "qwen2_vl")
    items = [
        DatasetItem(uid, q, ans, file_name=f"{g.split('_')[0]}.pdf", reference_page=(int(g.split("_")[1]),))
        for uid, q, ans, g in QUESTIONS
    ]
    golden = [(g,) for *_, g in QUESTIONS]
    lora = big or a.lora
    sizes: dict[str, Any] = (  # the docs' 24 GB row for the 7B (docs/trainer.md, Memory)
        {"gradient_checkpointing": True, "micro_batch_rows": 1, "max_model_len": 6144, "max_images": 8}
        if big
        else {"micro_batch_rows": a.group * a.prompts, "max_model_len": 8192, "max_images": 10}
    )
    cfg = TrainConfig(
        model=str(model_dir),
        dataset="x",
        group_size=a.group,
        prompts_per_step=a.prompts,
        max_turns=3,
        max_response_length=a.tokens,
        max_steps=a.steps,
        learning_rate=1e-5,
        warmup_steps=0,
        save_steps=10_000,
        judge=JudgeConfig(kind="exact"),
        tensorboard=False,
        samples_per_step=0,
        device="cuda" if cuda else "cpu",
        lora=LoraConfig(enabled=lora, rank=16, alpha=32, dropout=0.0),
        **sizes,
    )
    est = memory_estimate(
        str(model_dir), cfg, detect_gpus(), config=config, max_pixels=image_tokens * 28 * 28
    )
    args = grpo_args(cfg, str(out / "ckpt"), use_cpu=not cuda, bf16=cuda, logging_dir=None)
    searcher = PageSearcher(out / "pages")
    rng = random.Random(0)
    gen_box: dict[str, Any] = {}
    peaks = {"rollout_gb": 0.0, "update_gb": 0.0}

    def peak_gb() -> float | None:
        return round(torch.cuda.max_memory_allocated() / 2**30, 3) if cuda else None

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
        policy = trainer.accelerator.unwrap_model(trainer.model)
        inner = HFGenerator(policy, processor)
        base = policy.get_base_model() if hasattr(policy, "get_base_model") else policy
        profile = gen_box.setdefault("profile", Profile(base, cuda))
        batch_fn = inner._generate_batch

        def timed_batch(batch: Any) -> Any:  # time the GPU's generate calls themselves
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            profile.begin(batch)
            t = time.perf_counter()
            results: list[Any] = []
            try:
                results = batch_fn(batch)
                return results
            finally:
                dt = time.perf_counter() - t
                gen_box["generate_s"] = gen_box.get("generate_s", 0.0) + dt
                peak = peak_gb()
                profile.end(results, dt, peak)
                peaks["rollout_gb"] = max(peaks["rollout_gb"], peak or 0.0)

        inner._generate_batch = timed_batch  # type: ignore[method-assign]
        gen_box["gen"] = Mixed(inner)
        gen_box["inner"] = inner
        return RolloutSpec(
            "vrag",
            processor,
            gen_box["gen"],
            lambda: searcher,
            Limits(cfg.max_model_len, a.tokens, cfg.max_images, cfg.max_prompt_length),
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
        peft_config=peft_config(model, cfg.lora) if lora else None,
    )
    watched = "lora_" if lora else "lm_head"
    named = trainer.model.named_parameters()
    before = {k: v.detach().float().cpu().clone() for k, v in named if watched in k and v.requires_grad}
    times: list[float] = []
    orig_step = trainer.training_step

    def timed(*args_: Any, **kw: Any) -> Any:  # the update (rollouts happen before it, in prepare)
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        r = orig_step(*args_, **kw)
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        peaks["update_gb"] = max(peaks["update_gb"], peak_gb() or 0.0)
        return r

    trainer.training_step = timed  # type: ignore[method-assign]
    t0 = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - t0
    after = {k: v.detach().float().cpu() for k, v in trainer.model.named_parameters() if k in before}
    mixed = gen_box["gen"]
    history = [h for h in trainer.state.log_history if "reward" in h]
    profile = gen_box["profile"].summary()
    peak = max(peaks.values()) if cuda else None
    import resource

    result = {
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "torch": torch.__version__,
        "arch": a.arch,
        "params_M": round(n_params / 1e6, 1),
        "dtype": str(dtype),
        "lora": lora,
        "config": {k: getattr(cfg, k) for k in ("group_size", "prompts_per_step", "max_response_length")}
        | sizes
        | {"image_tokens": image_tokens},
        "build_seconds": round(build_s, 1),
        "steps": a.steps,
        "rollouts_per_step": a.group * a.prompts,
        "step_seconds": [round(t, 3) for t in times],
        "wall_seconds": round(wall, 2),
        "model_tokens": mixed.model_tokens,
        "generate_seconds": round(gen_box.get("generate_s", 0.0), 2),
        "generated_tokens_per_s_per_gpu": round(
            mixed.model_tokens / max(gen_box.get("generate_s", 0.0), 1e-9), 1
        ),
        "profile": profile,
        "generate_calls_detail": gen_box["profile"].calls,
        "peak_gpu_memory_gb": peak,
        "peak_rollout_gb": peaks["rollout_gb"] if cuda else None,
        "peak_update_gb": peaks["update_gb"] if cuda else None,
        "estimate_gb": round(est.per_device_bytes / 2**30, 2) if est.params else None,
        "estimate_parts_gb": {
            part: {w: round(b / 2**30, 3) for w, b in items}
            for part, items in (("kept", est.kept), ("training", est.training), ("rollouts", est.rollout))
        },
        "estimate_device": est.device,
        "peak_over_estimate": round(peak / (est.per_device_bytes / 2**30), 3)
        if peak and est.params
        else None,
        "max_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
        "weights_changed": any(not torch.equal(before[k], after[k]) for k in before),
        "log": history,
    }
    (out / "trainer_gpu.json").write_text(json.dumps(result, indent=2, default=str))
    print(
        json.dumps({k: v for k, v in result.items() if k not in ("log", "generate_calls_detail")}, indent=2)
    )
    return 0


if __name__ == "__main__":
    asyncio.set_event_loop_policy(None)
    sys.exit(main())
