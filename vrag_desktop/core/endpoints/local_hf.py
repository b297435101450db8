"""`TransformersChatModel`: a :class:`~.base.ChatModel` over a local Hugging Face vision-language
model, so the agents run fully offline, with no server (Qwen2-VL, Qwen2.5-VL and Qwen3-VL families,
loaded with ``AutoModelForImageTextToText``; other image-text-to-text checkpoints whose processor
takes ``{"type": "image"}`` content parts may work too, untested).

What it does per call, mirroring what an OpenAI-compatible server does with the same messages:

* OpenAI messages → the processor's chat format: text parts stay text parts, ``image_url`` parts
  (``data:`` URIs, as the agents send, or ``file://`` URLs) are decoded to RGB PIL images and become
  ``{"type": "image"}`` parts; the chat template is applied with ``add_generation_prompt=True``
  and the processor expands each image into its vision tokens.
* Greedy decoding unless ``temperature > 0`` is passed (then ``top_p``/``top_k`` of the call, or
  1.0/off). ``max_tokens`` (or ``max_completion_tokens``), ``repetition_penalty``, ``seed``,
  ``stop`` (cut OpenAI-style: the stop text is not returned) and vLLM's ``min_tokens`` and
  ``ignore_eos`` are honoured; the checkpoint's ``generation_config`` supplies eos/pad ids and its
  ``repetition_penalty``; other params (``model``, vLLM extras) are ignored.
* Generation runs in a worker thread; text is decoded incrementally by a ``transformers``
  ``TextStreamer`` (the decoding ``TextIteratorStreamer`` is built on; its blocking iterator is not
  used, the text is handed to the event loop with ``call_soon_threadsafe`` instead) and delivered as
  ``on_delta("content", text)`` on the loop's thread. The loop stays free the whole time.
* Cancelling the awaiting task sets a flag that a ``StoppingCriteria`` checks after every token, so
  the worker stops after the token in flight (a long prefill cannot be interrupted). One generation
  runs at a time per model; a new call waits for a cancelled one to wind down.
* ``ChatResult`` carries prompt/completion token counts (image tokens included, as vLLM counts),
  ``finish_reason`` (``stop``/``length``) and ``model_seconds`` (the whole call, a first-call model
  load included, like the HTTP client counts its retries).

The model loads on first use (in a worker thread) or eagerly with :meth:`load`/:meth:`aload`.
torch and transformers are imported only then. Device: CUDA when available (bf16, or fp16 where
bf16 is unsupported), else CPU (fp32); both overridable.

Errors are :class:`~.base.EndpointError`: ``not_found`` (model directory missing), ``bad_request``
(not a model directory, not a vision-language chat model, a checkpoint without a language-model
head such as an embedding model, no chat template, undecodable image, bad parameter; all permanent,
so the agents end the run), ``other`` (a failure while generating, e.g. out of memory, or the
model closed mid-answer). A failure after text was streamed raises
:class:`~.client.StreamInterrupted` (``stream_cut``) carrying the partial answer, as the HTTP client does.
"""

from __future__ import annotations

import asyncio
import copy
import gc
import importlib.util
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from vrag_desktop.core.endpoints.base import AsyncClosing, ChatResult, DeltaCallback, EndpointError, Messages
from vrag_desktop.core.endpoints.client import StreamInterrupted
from vrag_desktop.core.endpoints.hf_generation import (
    Cancelled,
    Control,
    Settings,
    decoding_settings,
    runtime_classes,
)
from vrag_desktop.core.endpoints.hf_messages import bad_request as _bad
from vrag_desktop.core.endpoints.hf_messages import openai_to_hf_messages

__all__ = ["TransformersChatModel", "openai_to_hf_messages"]

log = logging.getLogger(__name__)

#: Families this class is built and tested for (others go through the same generic path).
QWEN_VL_TYPES = frozenset({"qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe"})

_CLOSED = "the generation was stopped (the local model was closed or the call cancelled)"


# ---- the model ---------------------------------------------------------------------------------


class TransformersChatModel(AsyncClosing):
    """A :class:`~.base.ChatModel` answering with a local Hugging Face vision-language model.

    ``model_dir``: a local checkpoint directory (``config.json``, safetensors, tokenizer, processor
    config, chat template). ``device``: ``"cuda"``, ``"cuda:1"``, ``"cpu"``...; default CUDA when
    available. ``dtype``: ``"bfloat16"``/``"float16"``/``"float32"`` or a torch dtype; default bf16
    on CUDA (fp16 where unsupported), fp32 on CPU. ``max_new_tokens``: the default answer length
    (a call's ``max_tokens`` wins). ``max_pixels``: downscale larger images before the processor
    (its own bounds still apply). ``default_params``: applied to every call (call params win).
    ``model_name``: what :attr:`model_name` says (default: the directory's name).

    Construction checks the directory (cheap); the weights load on first use or with :meth:`load`.
    """

    def __init__(
        self,
        model_dir: str | os.PathLike[str],
        *,
        device: str | None = None,
        dtype: Any = None,
        max_new_tokens: int = 512,
        max_pixels: int | None = None,
        default_params: Mapping[str, Any] | None = None,
        model_name: str | None = None,
    ) -> None:
        path = Path(model_dir).expanduser()
        if not path.is_dir():
            raise EndpointError(f"model directory not found: {path}", kind="not_found")
        config_file = path / "config.json"
        try:
            config = json.loads(config_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise _bad(f"{path} is not a Hugging Face model directory (no config.json)") from None
        except (OSError, ValueError) as exc:
            raise _bad(f"cannot read {config_file}: {exc}") from exc
        if not isinstance(config, dict):
            raise _bad(f"{config_file} is not a JSON object")
        if max_new_tokens < 1:
            raise ValueError("max_new_tokens must be at least 1")
        if max_pixels is not None and max_pixels < 1:
            raise ValueError("max_pixels must be positive")
        self.model_dir = path
        self.model_type: str = str(config.get("model_type") or "")
        self.model_name = model_name or path.resolve().name
        self.requested_device = device
        self.requested_dtype = dtype
        self.max_new_tokens = max_new_tokens
        self.max_pixels = max_pixels
        self.default_params = dict(default_params or {})
        self.device: str | None = None  # resolved on load
        self.dtype: Any = None
        self.load_seconds: float | None = None
        self._model: Any = None
        self._processor: Any = None
        self._eos_ids: set[int] = set()
        self._load_lock = threading.Lock()
        self._gen_lock = threading.Lock()
        self._active: set[Control] = set()

    def __repr__(self) -> str:
        return (
            f"TransformersChatModel({str(self.model_dir)!r}, device={self.device or self.requested_device!r})"
        )

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def hf_model(self) -> Any:
        """The loaded ``transformers`` model (None before :meth:`load`)."""
        return self._model

    @property
    def processor(self) -> Any:
        """The loaded processor (None before :meth:`load`)."""
        return self._processor

    # ---- loading --------------------------------------------------------------------------------
    def _resolve_device_dtype(self) -> tuple[str, Any]:
        import torch

        from vrag_desktop.core.embedders.base import pick_device, pick_dtype

        device = pick_device(self.requested_device)
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise _bad(f"device {device!r} was asked for, but torch sees no CUDA GPU")
        try:
            dt = pick_dtype(self.requested_dtype, device)
        except ValueError as exc:
            raise _bad(str(exc)) from None
        return device, dt

    def load(self) -> None:
        """Load processor and weights now (blocking; idempotent, thread-safe)."""
        with self._load_lock:
            if self._model is not None:
                return
            started = time.monotonic()
            self._check_model_type()
            device, dt = self._resolve_device_dtype()
            processor = self._load_processor()
            model = self._load_model(device, dt)
            self._eos_ids = self._eos_token_ids(model, processor)
            self.device, self.dtype = device, dt
            self._processor, self._model = processor, model
            self.load_seconds = time.monotonic() - started
            log.info(
                "loaded %s (%s) on %s as %s in %.1f s",
                self.model_dir,
                type(model).__name__,
                device,
                dt,
                self.load_seconds,
            )

    async def aload(self) -> None:
        """:meth:`load` in a worker thread (the event loop stays free)."""
        if self._model is None:
            await asyncio.to_thread(self.load)

    def _check_model_type(self) -> None:
        from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

        if self.model_type not in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES:
            raise _bad(
                f"{self.model_dir} is not a vision-language chat model (model_type "
                f"{self.model_type or '?'!r}); use a Qwen2-VL, Qwen2.5-VL or Qwen3-VL checkpoint"
            )

    def _load_processor(self) -> Any:
        from vrag_desktop.core.embedders.base import EmbedderError
        from vrag_desktop.core.embedders.qwen_vl_loading import load_processor

        try:
            processor = load_processor(self.model_dir, self.model_type)
        except EmbedderError as exc:
            raise _bad(f"cannot load the processor of {self.model_dir}: {exc}") from exc
        except Exception as exc:  # OSError (files missing), ValueError (unknown processor)...
            raise _bad(
                f"cannot load the processor of {self.model_dir} "
                f"({type(exc).__name__}: {exc}); is it a vision-language model?"
            ) from exc
        if not hasattr(processor, "image_processor"):
            raise _bad(f"{self.model_dir} has no image processor: not a vision-language model")
        return processor

    def _load_model(self, device: str, dt: Any) -> Any:
        import torch
        from transformers import AutoModelForImageTextToText

        kwargs: dict[str, Any] = {"dtype": dt, "output_loading_info": True}
        if device != "cpu" and importlib.util.find_spec("accelerate") is not None:
            kwargs["device_map"] = device  # straight onto the GPU, no full copy in host memory
        try:
            # (model, loading info) with output_loading_info, which the stubs do not know
            loaded: Any = AutoModelForImageTextToText.from_pretrained(str(self.model_dir), **kwargs)
            model, info = loaded
        except ValueError as exc:
            if "Unrecognized configuration class" in str(exc) or "model_type" in str(exc):
                raise _bad(
                    f"{self.model_dir} is not a vision-language chat model (model_type "
                    f"{self.model_type or '?'!r}); use a Qwen2-VL, Qwen2.5-VL or Qwen3-VL checkpoint"
                ) from exc
            raise _bad(f"cannot load {self.model_dir}: {exc}") from exc
        except (OSError, KeyError, RuntimeError, TypeError) as exc:
            raise _bad(f"cannot load the weights in {self.model_dir}: {type(exc).__name__}: {exc}") from exc
        missing = set(info.get("missing_keys") or ())
        if any(k == "lm_head.weight" or k.endswith(".lm_head.weight") for k in missing):
            raise _bad(
                f"{self.model_dir} has no language-model head (lm_head): an embedding or base-model "
                "checkpoint cannot write answers; use an instruction-tuned chat checkpoint"
            )
        try:
            model = model.to(device).eval()
        except (RuntimeError, AssertionError) as exc:  # OOM, CUDA missing in this torch build...
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
            raise EndpointError(f"cannot move the model to {device}: {exc}", kind="other") from exc
        return model

    @staticmethod
    def _eos_token_ids(model: Any, processor: Any) -> set[int]:
        """Every id that ends an answer: the generation config's, the tokenizer's, <|im_end|>."""
        ids: set[int] = set()
        eos = getattr(model.generation_config, "eos_token_id", None)
        for value in eos if isinstance(eos, (list, tuple)) else [eos]:
            if isinstance(value, int):
                ids.add(value)
        tok = processor.tokenizer
        if isinstance(tok.eos_token_id, int):
            ids.add(tok.eos_token_id)
        im_end = tok.convert_tokens_to_ids("<|im_end|>")
        if isinstance(im_end, int) and im_end != tok.unk_token_id and im_end >= 0:
            ids.add(im_end)
        return ids

    # ---- closing --------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop any generation and free the weights (a later call loads them again)."""
        for control in list(self._active):
            control.cancelled.set()
        with self._load_lock:
            was_loaded = self._model is not None
            self._model = self._processor = None
        if was_loaded:
            gc.collect()
            if (self.device or "").startswith("cuda"):
                import torch

                torch.cuda.empty_cache()

    async def aclose(self) -> None:
        self.close()

    # ---- chat -----------------------------------------------------------------------------------
    def _settings(self, params: Mapping[str, Any]) -> Settings:
        return decoding_settings({**self.default_params, **params}, self.max_new_tokens)

    async def chat(
        self, messages: Messages, *, stream: bool = True, on_delta: DeltaCallback | None = None, **params: Any
    ) -> ChatResult:
        """One answer. Streams ``on_delta("content", text)`` on the loop's thread (``stream=False``:
        one delta with the whole answer at the end, as the HTTP client does). Cancelling the awaiting
        task stops the generation after the token in flight. Raises :class:`EndpointError`."""
        started = time.monotonic()
        settings = self._settings(params)
        messages = list(messages)  # the caller's list may grow while we work
        await self.aload()
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        control = Control()

        def post(item: tuple[str, Any]) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the loop is closed: nobody is listening any more
                control.cancelled.set()

        emit = (lambda text: post(("delta", text))) if stream else None
        self._active.add(control)
        worker = threading.Thread(
            target=self._work,
            args=(lambda: self._generate(messages, settings, control, emit), post),
            name=f"local-hf-generate-{self.model_name}",
            daemon=True,
        )
        delivered: list[str] = []
        try:
            worker.start()
            while True:
                kind, payload = await queue.get()
                if kind == "delta":
                    delivered.append(payload)
                    if on_delta is not None:
                        on_delta("content", payload)
                elif kind == "error":
                    if delivered:  # text already reached the caller: hand it over, as the client does
                        partial = ChatResult("".join(delivered), model_seconds=time.monotonic() - started)
                        raise StreamInterrupted(str(payload), "stream_cut", partial) from payload
                    raise payload
                else:
                    result: ChatResult = payload
                    break
        except BaseException:  # cancelled, or on_delta raised: stop generating now
            control.cancelled.set()
            raise
        finally:
            self._active.discard(control)
        if not stream and on_delta is not None and result.content:
            on_delta("content", result.content)
        result.model_seconds = time.monotonic() - started
        return result

    def _work(self, generate: Callable[[], ChatResult], post: Callable[[tuple[str, Any]], None]) -> None:
        """(Worker thread.) Generate and post ``("done", result)`` or ``("error", EndpointError)``."""
        try:
            post(("done", generate()))
        except Cancelled:  # the caller gave up (nobody is waiting) or close() was called
            post(("error", EndpointError(_CLOSED, kind="other")))
        except EndpointError as exc:
            post(("error", exc))
        except Exception as exc:
            log.exception("local generation failed")
            post(("error", self._classify(exc)))

    @staticmethod
    def _classify(exc: Exception) -> EndpointError:
        name = type(exc).__name__
        if "OutOfMemory" in name or "out of memory" in str(exc).lower():
            err = EndpointError(f"the local model ran out of memory: {exc}", kind="other")
        else:
            err = EndpointError(f"local generation failed: {name}: {exc}", kind="other")
        err.__cause__ = exc
        return err

    def _generation_config(self, model: Any, s: Settings) -> Any:
        gc_ = copy.deepcopy(model.generation_config)
        gc_.max_new_tokens = s.max_new_tokens
        gc_.max_length = None
        gc_.eos_token_id = sorted(self._eos_ids) or gc_.eos_token_id
        if gc_.pad_token_id is None:
            pad = self._processor.tokenizer.pad_token_id
            gc_.pad_token_id = pad if pad is not None else next(iter(sorted(self._eos_ids)), None)
        for name in ("temperature", "top_p", "top_k", "min_p", "typical_p"):
            if hasattr(gc_, name):
                setattr(gc_, name, None)
        if s.temperature:  # > 0: sample; top_p/top_k only as the call asks
            gc_.do_sample = True
            gc_.temperature = s.temperature
            gc_.top_p = s.top_p
            gc_.top_k = s.top_k or None
        else:
            gc_.do_sample = False
        gc_.num_beams = 1
        if s.repetition_penalty is not None:
            gc_.repetition_penalty = s.repetition_penalty
        if s.min_tokens:
            gc_.min_new_tokens = min(s.min_tokens, s.max_new_tokens)
        if s.ignore_eos:  # vLLM's extension: write max_tokens tokens whatever the model says
            gc_.min_new_tokens = s.max_new_tokens
        # Stops generation at the token level; the sink cuts the text (a word can lag in the sink).
        gc_.stop_strings = list(s.stop) or None
        return gc_

    def _generate(
        self,
        messages: list[dict[str, Any]],
        s: Settings,
        control: Control,
        emit: Callable[[str], None] | None,
    ) -> ChatResult:
        import torch

        model, processor = self._model, self._processor
        if model is None or processor is None:
            raise EndpointError("the local model was closed", kind="other")
        conversation, images = openai_to_hf_messages(messages, self.max_pixels)
        try:
            prompt = processor.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
        except Exception as exc:  # jinja errors: the template refuses these messages
            raise _bad(f"the chat template refused the messages: {type(exc).__name__}: {exc}") from exc
        try:
            inputs = processor(text=[prompt], images=images or None, return_tensors="pt")
        except Exception as exc:  # e.g. image tokens typed into the text, unusable image sizes
            raise _bad(f"the processor refused the input: {type(exc).__name__}: {exc}") from exc
        inputs = inputs.to(self.device, dtype=self.dtype)
        prompt_tokens = int(inputs["input_ids"].shape[1])
        sink_cls, halt_cls = runtime_classes()
        sink = sink_cls(processor.tokenizer, s.stop, control, emit)
        gen_config = self._generation_config(model, s)
        with self._gen_lock:  # one generation at a time; a cancelled one frees this promptly
            if control.cancelled.is_set():
                raise Cancelled
            if s.seed is not None:
                torch.manual_seed(s.seed)
            with torch.inference_mode():
                out = model.generate(
                    **inputs,
                    generation_config=gen_config,
                    streamer=sink,
                    stopping_criteria=halt_cls(control),
                    tokenizer=processor.tokenizer if s.stop else None,
                )
        if (
            control.cancelled.is_set()
        ):  # halted half-way: not an answer (the caller may be waiting on close())
            raise Cancelled
        new = out[0, prompt_tokens:].tolist()
        if sink.stop_hit or (new and new[-1] in self._eos_ids):
            finish = "stop"
        elif len(new) >= s.max_new_tokens:
            finish = "length"
        else:
            finish = "stop"
        return ChatResult(
            content="".join(sink.parts),
            prompt_tokens=prompt_tokens,
            completion_tokens=len(new),
            finish_reason=finish,
        )
