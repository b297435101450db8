"""Run in the trainer environment by tests/test_vllm_rollouts.py: two agent turns with images (a
page, then a crop of it, as VRAG's observations come) through ``PolicyChat`` and the app-server
generator against a real vLLM server, then the policy's own log-probabilities of the sampled tokens
from a Hugging Face forward pass over the recorded sequence (ids, pixels, grids).

Prints one JSON object: the segment's tokens and images, vLLM's and the policy's log-probs of
every generated token, the generator's counters, and the pixels the policy saw (a ``.pt`` file)
so the test can compare them with what vLLM computed. Usage:
``python vllm_image_turns.py BASE_URL MODEL_DIR OUT_DIR``.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import math
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any


def page() -> Any:
    """A deterministic 90 × 61 picture (not a multiple of the patch: the processor resizes it)."""
    from PIL import Image

    img = Image.new("RGB", (90, 61))
    img.putdata([((x * 7) % 256, (y * 11) % 256, (x * y) % 256) for y in range(61) for x in range(90)])
    return img


def data_url(img: Any) -> str:
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


async def turns(chat: Any) -> None:
    first = page()
    crop = first.crop((10, 5, 70, 50)).resize((120, 90))
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "Answer from the page."},
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": data_url(first)}},
                {"type": "text", "text": "What is on the page?"},
            ],
        },
    ]
    r1 = await chat.chat(msgs, stream=False, max_tokens=6)
    msgs += [
        {"role": "assistant", "content": r1.content},
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": data_url(crop)}},
                {"type": "text", "text": "And here?"},
            ],
        },
    ]
    await chat.chat(msgs, stream=False, max_tokens=6)


def main() -> int:
    import torch
    from transformers import AutoModelForImageTextToText
    from vrag_trainer.generation import vision_inputs
    from vrag_trainer.policy import PolicyChat
    from vrag_trainer.vllm_http import ServerGenerator, _image_url

    from vrag_desktop.core.embedders.qwen_vl_loading import load_processor

    base_url, model_dir, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    out.mkdir(parents=True, exist_ok=True)
    processor = load_processor(model_dir, "qwen2_vl")
    trainer = SimpleNamespace(state=SimpleNamespace(global_step=0))  # step 0: the base model samples
    gen = ServerGenerator(trainer, base_url, out / "adapters", processor=processor)
    chat = PolicyChat(processor, gen, temperature=1.0)

    async def run() -> None:
        try:
            await turns(chat)
        finally:
            await gen.aclose()

    asyncio.run(run())
    stats = gen.take_stats()
    (seg,) = chat.segments
    model = AutoModelForImageTextToText.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    ids = torch.tensor([seg.input_ids])
    with torch.no_grad():
        logits = model(
            input_ids=ids, **vision_inputs(model, ids, seg.pixel_values, seg.image_grid_thw)
        ).logits
    logp = torch.log_softmax(logits[0, :-1].float(), dim=-1).gather(1, ids[0, 1:, None])[:, 0]
    gen_at = [i for i, m in enumerate(seg.loss_mask) if m]
    torch.save([p.clone() for p in seg.pixel_values], out / "policy_pixels.pt")
    _, patch, resample = gen._image_settings()
    urls = [_image_url(im, g, patch, resample) for im, g in zip(seg.images, seg.image_grid_thw, strict=True)]
    (out / "sent_images.json").write_text(json.dumps(urls), encoding="utf-8")  # as the turns sent them
    pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    print(
        json.dumps(
            {
                "tokens": len(seg.input_ids),
                "image_tokens": [int(g.prod()) // 4 for g in seg.image_grid_thw],
                "pad_tokens": sum(1 for t in seg.input_ids if t == pad),
                "grids": [g.tolist() for g in seg.image_grid_thw],
                "generated": len(gen_at),
                "vllm_logprobs": [seg.logprobs[i] for i in gen_at],
                "policy_logprobs": [float(logp[i - 1]) for i in gen_at],
                "finite": all(math.isfinite(seg.logprobs[i]) for i in gen_at),
                "stats": stats,
                "crop_size": list(seg.images[1].size),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
