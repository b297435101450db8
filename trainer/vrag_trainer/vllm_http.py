"""Rollouts on the app's own vLLM server over HTTP, with the trained LoRA adapter loaded into it
after every optimiser step (``generator: vllm``, ``vllm_mode: app_server``; OpenPipe ART's way).

Why: vLLM pins its own torch and transformers, so it cannot live in the trainer's environment; the
app already supervises a vLLM server in its own environment (``VLLMServer``). The trainer talks to
it as any client does, and the adapter it trains is then served by that same server.

Token in, token out: ``POST /v1/completions`` with ``prompt`` = the segment's token ids (exactly
what the policy's forward pass will see), ``return_token_ids`` for the sampled ids and
``logprobs: 0`` for their log-probabilities (the sampler's, recorded for the importance-sampling
ratio in :mod:`.offpolicy`). Nothing is re-tokenised.

Weights: LoRA only. Before the first rollout of step N > 0 the policy's adapter is saved, its
module names written in the form vLLM's Qwen2-VL *and* a plain Qwen2 accept (``model.layers.…``:
``language_model.`` dropped) and loaded with ``POST /v1/load_lora_adapter`` (the server needs
``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`` and ``--enable-lora``: ``VLLMConfig(runtime_lora=True)``);
requests then name that adapter. Step 0 of a new run samples from the base (the adapter is zero).
The server must read the trainer's run folder (same machine or a shared path).

Failures: the agents turn any model error into a rollout error, which would let a step train on
nothing. So the first server failure (connection lost, an HTTP error, an adapter it cannot load)
is kept in :attr:`ServerGenerator.failure` and the trainer raises it after the step's rollouts:
the run fails with that message and resumes from its last complete checkpoint.

Images: ``/v1/completions`` takes token ids *or* chat messages with images, never both. A turn
with images goes to ``POST /inference/v1/generate`` (vLLM ≥ 0.32, server started with
``--enable-scale-out``: ``VLLMConfig(scale_out=True)``) with ``token_ids`` and the images as
``content_parts``. vLLM expands each image's single ``<|image_pad|>`` itself, so every image block
is sent collapsed to one pad, and each image at the size the policy's (PIL) processor resized it
to, with its resampling, so vLLM's own (torchvision) resize is the identity and its pixels are the
policy's (a torchvision processor resizes as vLLM's does: the image is sent as it is). The
expanded prompt vLLM returns must equal the policy's token for token, or the step fails naming
both lengths (a server with other image-processor settings).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

from vrag_trainer.policy import Generated

__all__ = [
    "NO_SCALE_OUT",
    "ServerGenerator",
    "ServerRolloutError",
    "collapse_images",
    "load_adapter",
    "served_adapter",
]

NO_SCALE_OUT = (
    "image turns are sampled through POST /inference/v1/generate (token ids with images), which "
    "needs vLLM >= 0.32 started with --enable-scale-out (VLLMConfig(scale_out=True); the app's "
    "'Start the rollout server' adds it)"
)


class ServerRolloutError(RuntimeError):
    """The rollout server failed (gone, an HTTP error, an adapter it cannot load): the step fails."""


def collapse_images(ids: list[int], pad: int) -> tuple[list[int], list[int]]:
    """``ids`` with each run of the image pad token cut to one (what vLLM expands itself), and
    the length of each run (the policy's tokens per image)."""
    out: list[int] = []
    runs: list[int] = []
    for i, t in enumerate(ids):
        if t == pad and i and ids[i - 1] == pad:
            runs[-1] += 1
            continue
        if t == pad:
            runs.append(1)
        out.append(t)
    return out, runs


def _image_url(image: Any, grid: Any, patch: int, resample: int | None) -> str:
    """``image`` as a lossless data URL, resized with PIL's ``resample`` to the size the processor
    resized it to (grid × patch); as it is when ``resample`` is None."""
    import base64
    import io

    _, h, w = (int(x) for x in grid)
    size = (w * patch, h * patch)
    img = image.convert("RGB")
    if resample is not None and img.size != size:
        img = img.resize(size, resample)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _served_name(module: str) -> str:
    return module.replace("language_model.", "", 1)


def served_adapter(src: Path, out: Path) -> Path:
    """A PEFT adapter folder rewritten for vLLM: module paths without ``language_model.`` (which
    vLLM's Qwen2-VL maps back to its language model, and a text-only Qwen2 reads as is)."""
    from safetensors.torch import load_file, save_file

    out.mkdir(parents=True, exist_ok=True)
    cfg = json.loads((src / "adapter_config.json").read_text(encoding="utf-8"))
    targets = cfg.get("target_modules")
    if isinstance(targets, list):
        cfg["target_modules"] = sorted({_served_name(t) for t in targets})
    (out / "adapter_config.json").write_text(json.dumps(cfg, indent=1), encoding="utf-8")
    tensors = load_file(str(src / "adapter_model.safetensors"))
    save_file(
        {_served_name(k): v.contiguous() for k, v in tensors.items()}, str(out / "adapter_model.safetensors")
    )
    return out


def _root(base_url: str) -> str:
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def _message(resp: Any) -> str:
    try:
        body = resp.json()
    except ValueError:
        return resp.text[:500]
    err = body.get("error", body) if isinstance(body, dict) else body
    msg = err.get("message", err) if isinstance(err, dict) else err
    return str(msg)[:500]


def load_adapter(
    base_url: str, name: str, path: str | os.PathLike[str], *, api_key: str | None = None
) -> None:
    """Load the adapter folder ``path`` into the server at ``base_url`` under ``name`` (synchronous:
    also for tests and tools); raises :class:`ServerRolloutError` with the server's reason."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        resp = httpx.post(
            f"{_root(base_url)}/v1/load_lora_adapter",
            json={"lora_name": name, "lora_path": str(path)},
            headers=headers,
            timeout=300,
            trust_env=False,
        )
    except httpx.HTTPError as exc:
        raise ServerRolloutError(f"the vLLM server at {base_url} is not reachable: {exc}") from exc
    if resp.status_code == 404:
        raise ServerRolloutError(
            f"the vLLM server at {base_url} cannot load adapters at run time: start it with "
            "--enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True (VLLMConfig(runtime_lora=True))"
        )
    if resp.status_code >= 400:
        raise ServerRolloutError(f"vLLM could not load the adapter {path}: {_message(resp)}")


class ServerGenerator:
    """A :class:`~vrag_trainer.policy.Generator` on a running vLLM server (see the module doc).
    ``trainer`` gives the step and the PEFT model; ``adapters`` is where served adapters go;
    ``processor`` (the policy's) gives the image pad token, patch size and resampling for image turns."""

    def __init__(
        self,
        trainer: Any,
        base_url: str,
        adapters: Path,
        *,
        name: str = "policy",
        timeout: float = 600.0,
        processor: Any = None,
    ) -> None:
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # every process would load its own adapter
            raise ServerRolloutError("vllm_mode app_server trains in one process; set gpus: 1")
        self.trainer = trainer
        self.base_url = base_url.rstrip("/")
        self.adapters = Path(adapters)
        self.name = name
        self.timeout = timeout
        self.processor = processor
        self.api_key = os.environ.get("VLLM_API_KEY") or None
        self.failure: ServerRolloutError | None = None
        self.model: str | None = None  # the served name requests use (base, then the adapter)
        self.adapter_step = 0  # the optimiser step whose adapter is loaded (0: the base)
        self._synced = -1
        self._base: str | None = None
        self._lock: asyncio.Lock | None = None
        self._client: Any = None
        self.requests = 0
        self.tokens = 0
        self.scored = 0  # generated tokens that came with a log-probability
        self.image_requests = 0

    # ---- the server ------------------------------------------------------------------------------
    def _http(self) -> Any:
        import httpx

        if self._client is None:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            self._client = httpx.AsyncClient(
                base_url=_root(self.base_url), timeout=self.timeout, headers=headers, trust_env=False
            )
        return self._client

    async def _base_model(self) -> str:
        if self._base is None:
            resp = await self._http().get("/v1/models")
            if resp.status_code >= 400:
                raise ServerRolloutError(f"GET /v1/models answered {resp.status_code}: {_message(resp)}")
            models = [m for m in resp.json().get("data", []) if not m.get("parent")]
            if not models:
                raise ServerRolloutError(f"the vLLM server at {self.base_url} serves no base model")
            self._base = str(models[0]["id"])
        return self._base

    async def _sync(self) -> None:
        """Bring the adapter of the last optimiser step to the server (once per step)."""
        step = int(self.trainer.state.global_step)
        if step == self._synced:
            return
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if step == self._synced:
                return
            base = await self._base_model()
            if step == 0:  # a new run: the adapter is still zero, the base samples the same
                self.model, self.adapter_step, self._synced = base, 0, 0
                return
            name = f"{self.name}-step-{step}"
            folder = self.adapters / f"step-{step}"
            await self._unload(name, keep_folder=True)  # a resume may find its old copy loaded
            await asyncio.to_thread(self._save_adapter, folder)
            await asyncio.to_thread(load_adapter, self.base_url, name, folder, api_key=self.api_key)
            previous = self.model
            self.model, self.adapter_step, self._synced = name, step, step
            if previous and previous != base:
                await self._unload(previous)

    def _save_adapter(self, folder: Path) -> None:
        policy = self.trainer.accelerator.unwrap_model(self.trainer.model)
        if not hasattr(policy, "peft_config"):
            raise ServerRolloutError("vllm_mode app_server needs a LoRA policy (lora.enabled)")
        raw = folder.with_name(folder.name + ".peft")
        shutil.rmtree(raw, ignore_errors=True)
        policy.save_pretrained(str(raw))
        shutil.rmtree(folder, ignore_errors=True)
        served_adapter(raw, folder)
        shutil.rmtree(raw, ignore_errors=True)

    async def _unload(self, name: str, *, keep_folder: bool = False) -> None:
        """Drop an earlier step's adapter from the server (and its folder): errors are ignored,
        an adapter left loaded costs only memory."""
        try:
            await self._http().post("/v1/unload_lora_adapter", json={"lora_name": name})
        except Exception:
            return
        if not keep_folder:
            shutil.rmtree(self.adapters / f"step-{name.rsplit('-', 1)[-1]}", ignore_errors=True)

    # ---- the Generator protocol --------------------------------------------------------------------
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
        if self.failure is not None:
            raise self.failure
        try:
            await self._sync()
            if len(pixel_values or []):
                return await self._generate_images(
                    prompt_ids, list(image_grid_thw), list(images or []), max_new_tokens, temperature
                )
            return await self._complete(prompt_ids, max_new_tokens, temperature)
        except ServerRolloutError as exc:
            self.failure = self.failure or exc
            raise
        except Exception as exc:  # httpx errors: the server went away mid-rollout
            self.failure = self.failure or ServerRolloutError(
                f"the vLLM server at {self.base_url} failed during a rollout: {type(exc).__name__}: {exc}"
            )
            raise self.failure from exc

    async def _complete(self, prompt_ids: list[int], max_new_tokens: int, temperature: float) -> Generated:
        body = {
            "model": self.model,
            "prompt": list(prompt_ids),
            "max_tokens": max_new_tokens,
            "temperature": temperature,
            "top_p": 1.0,
            "logprobs": 0,
            "return_token_ids": True,
            "skip_special_tokens": False,
        }
        resp = await self._http().post("/v1/completions", json=body)
        if resp.status_code >= 400:
            raise ServerRolloutError(
                f"the vLLM server refused a rollout request ({resp.status_code}): {_message(resp)}"
            )
        choice = resp.json()["choices"][0]
        ids = [int(t) for t in choice.get("token_ids") or []]
        if not ids and choice.get("text"):
            raise ServerRolloutError(
                "the vLLM server returned no token ids (needs return_token_ids: vLLM ≥ 0.10)"
            )
        raw = (choice.get("logprobs") or {}).get("token_logprobs") or []
        lps = [float(x) if x is not None else math.nan for x in raw][: len(ids)]
        self.requests += 1
        self.tokens += len(ids)
        self.scored += sum(1 for x in lps if math.isfinite(x))
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        return Generated(ids, lps if len(lps) == len(ids) else None, finish)

    def _image_settings(self) -> tuple[int, int, int | None]:
        """The image pad token id, patch size and PIL resampling of the policy's processor. A
        PIL-backend processor (``…ImageProcessorPil``: no torchvision here) resizes with PIL, vLLM's
        with torchvision: the picture is sent already resized by PIL. A torchvision one resizes as
        vLLM's does: the picture is sent as it is (resampling None)."""
        proc = self.processor
        if proc is None:
            raise ServerRolloutError("vllm_mode app_server needs the policy's processor for image turns")
        ip = proc.image_processor
        pad = proc.tokenizer.convert_tokens_to_ids("<|image_pad|>")
        pil = type(ip).__name__.endswith("Pil")
        return int(pad), int(getattr(ip, "patch_size", 14)), int(getattr(ip, "resample", 3)) if pil else None

    async def _generate_images(
        self,
        prompt_ids: list[int],
        grids: list[Any],
        images: list[Any],
        max_new_tokens: int,
        temperature: float,
    ) -> Generated:
        """One turn with images: token ids + images in, the policy's exact prompt checked (module doc)."""
        pad, patch, resample = self._image_settings()
        if len(images) != len(grids):
            raise ServerRolloutError(f"{len(grids)} processed images but {len(images)} pictures to send")
        short, runs = collapse_images(list(prompt_ids), pad)
        if len(runs) != len(images):
            raise ServerRolloutError(f"the prompt has {len(runs)} image blocks for {len(images)} images")
        parts = await asyncio.to_thread(
            lambda: [
                {"type": "image_url", "url": _image_url(im, g, patch, resample)}
                for im, g in zip(images, grids, strict=True)
            ]
        )
        body = {
            "model": self.model,
            "token_ids": short,
            "content_parts": parts,
            "sampling_params": {
                "max_tokens": max_new_tokens,
                "temperature": temperature,
                "top_p": 1.0,
                "logprobs": 0,
            },
            "return_token_ids": True,
            "output_mode": "tokens",
        }
        resp = await self._http().post("/inference/v1/generate", json=body)
        if resp.status_code in (403, 404):
            raise ServerRolloutError(
                f"the vLLM server at {self.base_url} refused an image turn ({resp.status_code}: "
                f"{_message(resp)}): {NO_SCALE_OUT}"
            )
        if resp.status_code >= 400:
            raise ServerRolloutError(
                f"the vLLM server refused an image turn ({resp.status_code}): {_message(resp)}"
            )
        out = resp.json()
        theirs = out.get("prompt_token_ids")
        if theirs != list(prompt_ids):
            placed = [int(p["length"]) for p in (out.get("mm_placeholders") or {}).get("image", [])]
            raise ServerRolloutError(
                "vLLM expanded the images into other tokens than the policy's processor "
                f"(policy: {len(prompt_ids)} tokens, {runs} per image; vLLM: "
                f"{len(theirs or [])} tokens, {placed} per image): serve the run's base model "
                "with its own preprocessor_config.json and no --mm-processor-kwargs"
            )
        choice = out["choices"][0]
        ids = [int(t) for t in choice.get("token_ids") or []]
        content = (choice.get("logprobs") or {}).get("content") or []
        lps = [float(c.get("logprob", math.nan)) for c in content][: len(ids)]
        self.requests += 1
        self.image_requests += 1
        self.tokens += len(ids)
        self.scored += sum(1 for x in lps if math.isfinite(x))
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        return Generated(ids, lps if len(lps) == len(ids) else None, finish)

    def take_stats(self) -> dict[str, float]:
        """This step's counters for the metrics (reset on read)."""
        out = {
            "vllm/requests": float(self.requests),
            "vllm/tokens": float(self.tokens),
            "vllm/scored_tokens": float(self.scored),
            "vllm/image_requests": float(self.image_requests),
            "vllm/adapter_step": float(self.adapter_step),
        }
        self.requests = self.tokens = self.scored = self.image_requests = 0
        return out

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
