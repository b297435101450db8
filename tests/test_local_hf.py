"""`TransformersChatModel`: the real loading and inference code on tiny random Qwen-VL checkpoints.

The weights are random, so the answers are noise; what is checked is the plumbing: the agents'
message format goes in (text, a page image as a data URI), the image reaches the vision tower,
text streams back and adds up, usage is counted, cancellation stops the worker, errors are typed,
and a whole VRAG agent run over a real MiniLM index ends gracefully with the local model."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import index_paths
from PIL import Image, ImageDraw
from tiny_vl_models import build_tiny_qwen2_vl, build_tiny_qwen3_vl, build_tiny_qwen25_vl

from vrag_desktop.core.agents import vrag_protocol as vp
from vrag_desktop.core.agents.events import (
    AgentError,
    Answer,
    ContentDelta,
    ImageShown,
    MaxSteps,
    Usage,
)
from vrag_desktop.core.endpoints.base import ChatResult, EndpointError
from vrag_desktop.core.endpoints.client import StreamInterrupted
from vrag_desktop.core.endpoints.local_hf import TransformersChatModel, openai_to_hf_messages

QUESTION = "What was the revenue in 2023?"


# ====================================================================== fixtures


def _qwen2_vl_with_head(out: Path) -> Path:
    """The tiny Qwen2-VL, re-saved in the chat layout (the builder saves the headless base model)."""
    import torch
    from transformers import Qwen2VLForConditionalGeneration

    build_tiny_qwen2_vl(out)
    torch.manual_seed(0)
    model = Qwen2VLForConditionalGeneration.from_pretrained(out)
    for f in out.glob("*.safetensors*"):
        f.unlink()
    model.save_pretrained(out)
    return out


BUILDERS: dict[str, Callable[[Path], Path]] = {
    "qwen2_vl": _qwen2_vl_with_head,
    "qwen2_5_vl": lambda out: build_tiny_qwen25_vl(out, with_lm_head=True),
    "qwen3_vl": lambda out: build_tiny_qwen3_vl(out, with_lm_head=True),
}


@pytest.fixture(scope="module")
def tiny_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny-vl-chat")
    return {name: build(root / name) for name, build in BUILDERS.items()}


@pytest.fixture(scope="module")
def models(tiny_dirs: dict[str, Path]) -> dict[str, TransformersChatModel]:
    """One loaded model per family, shared by the module (each chat() runs in its own loop)."""
    out = {name: TransformersChatModel(d, device="cpu", max_new_tokens=16) for name, d in tiny_dirs.items()}
    for m in out.values():
        m.load()
    yield out
    for m in out.values():
        m.close()


def page_image(w: int = 120, h: int = 160) -> Image.Image:
    img = Image.new("RGB", (w, h), "white")
    draw = ImageDraw.Draw(img)
    draw.text((6, 6), "Annual report", fill="black")
    draw.rectangle((6, 30, w - 6, 70), outline="black")
    draw.text((10, 40), "Revenue 2023: 12.4M", fill="black")
    return img


def vrag_messages(img: Image.Image | None = None) -> list[dict[str, Any]]:
    """Exactly what VRAGAgent sends after one search: prompt turn, the model's reply, the page."""
    obs: list[dict[str, Any]] = []
    if img is not None:  # the agent's own encoding: JPEG bytes as a data URI in one image_url part
        obs.append({"type": "image_url", "image_url": {"url": vp.data_uri(vp.jpeg_bytes(img))}})
    return [
        {"role": "user", "content": [{"type": "text", "text": vp.build_prompt(QUESTION)}]},
        {"role": "assistant", "content": "<think>I need the report.</think>\n<search>revenue 2023</search>"},
        {"role": "user", "content": obs},
    ]


def run(coro: Any, timeout: float = 60) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def chat_collect(
    model: TransformersChatModel, messages: Sequence[dict[str, Any]], **params: Any
) -> tuple[ChatResult, list[tuple[str, str]]]:
    deltas: list[tuple[str, str]] = []
    result = await model.chat(messages, on_delta=lambda k, t: deltas.append((k, t)), **params)
    return result, deltas


def vision_tower(model: TransformersChatModel) -> Any:
    return next(m for name, m in model.hf_model.named_modules() if name.split(".")[-1] == "visual")


# ====================================================================== answers


@pytest.mark.parametrize("family", list(BUILDERS))
def test_answers_the_agents_message_format(models: dict[str, TransformersChatModel], family: str) -> None:
    model = models[family]
    seen: list[Any] = []
    hook = vision_tower(model).register_forward_pre_hook(
        lambda mod, args, kwargs: seen.append((args, kwargs)), with_kwargs=True
    )
    try:
        with_image, deltas = run(
            chat_collect(model, vrag_messages(page_image()), max_tokens=12, min_tokens=8)
        )
    finally:
        hook.remove()
    assert isinstance(with_image.content, str) and with_image.content
    assert deltas and {k for k, _ in deltas} == {"content"}
    assert "".join(t for _, t in deltas) == with_image.content
    assert with_image.prompt_tokens > 0 and 8 <= with_image.completion_tokens <= 12
    assert with_image.finish_reason in ("stop", "length") and with_image.model_seconds > 0
    assert model.model_name == family
    # the image reached the vision tower once, and its tokens are in the prompt
    assert len(seen) == 1
    text_only, _ = run(chat_collect(model, vrag_messages(None), max_tokens=2))
    image_tokens = with_image.prompt_tokens - text_only.prompt_tokens
    assert image_tokens >= 4 + 2  # >= 4 merged patches (min_pixels) + vision start/end


def test_conversion_keeps_order_and_decodes_images() -> None:
    img = page_image(50, 40)
    conv, images = openai_to_hf_messages(
        [
            {"role": "system", "content": "sys"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "a"},
                    {"type": "image_url", "image_url": {"url": vp.encode_image(img)}},
                    {"type": "image", "image": page_image(30, 20).convert("RGBA")},
                ],
            },
            {"role": "assistant", "content": None},
        ]
    )
    assert [m["role"] for m in conv] == ["system", "user", "assistant"]
    assert conv[0]["content"] == "sys" and conv[2]["content"] == ""
    assert [p["type"] for p in conv[1]["content"]] == ["text", "image", "image"]
    assert [i.size for i in images] == [(50, 40), (30, 20)] and all(i.mode == "RGB" for i in images)
    _, small = openai_to_hf_messages(
        [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": vp.encode_image(page_image(400, 300))}}
                ],
            }
        ],
        max_pixels=10_000,
    )
    assert small[0].width * small[0].height <= 10_000


def test_stream_off_stop_seed_and_greedy(models: dict[str, TransformersChatModel]) -> None:
    model = models["qwen2_5_vl"]
    msgs = vrag_messages(page_image())

    async def go() -> dict[str, Any]:
        out: dict[str, Any] = {}
        out["greedy"] = await model.chat(msgs, max_tokens=24, ignore_eos=True)
        out["greedy2"] = await model.chat(msgs, max_tokens=24, ignore_eos=True)
        deltas: list[tuple[str, str]] = []
        out["plain"] = await model.chat(
            msgs, stream=False, on_delta=lambda k, t: deltas.append((k, t)), max_tokens=24, ignore_eos=True
        )
        out["plain_deltas"] = deltas
        out["s1"] = await model.chat(msgs, temperature=1.0, top_p=0.9, top_k=50, seed=7, max_tokens=10)
        out["s2"] = await model.chat(msgs, temperature=1.0, top_p=0.9, top_k=50, seed=7, max_tokens=10)
        text = out["greedy"].content
        cut = next((i for i, ch in enumerate(text) if i > 0 and ch.isascii() and ch.isalnum()), None)
        out["stop_char"] = None if cut is None else text[cut]
        if cut is not None:
            out["stopped"] = await model.chat(msgs, max_tokens=24, ignore_eos=True, stop=[text[cut]])
        return out

    out = run(go())
    greedy = out["greedy"]
    assert greedy.completion_tokens == 24 and greedy.finish_reason == "length"
    assert out["greedy2"].content == greedy.content  # greedy is deterministic
    assert out["plain"].content == greedy.content and out["plain_deltas"] == [("content", greedy.content)]
    assert out["s1"].content == out["s2"].content  # same seed, same sample
    if out["stop_char"] is not None:  # the stop text is cut, OpenAI-style, and generation ends early
        stopped = out["stopped"]
        assert stopped.content == greedy.content[: greedy.content.find(out["stop_char"])]
        assert stopped.finish_reason == "stop" and stopped.completion_tokens < 24


def test_cancel_mid_generation_is_prompt(models: dict[str, TransformersChatModel]) -> None:
    model = models["qwen2_5_vl"]
    msgs = vrag_messages(page_image())

    async def go() -> tuple[float, int, ChatResult, float]:
        first = asyncio.Event()
        count = 0

        def on_delta(kind: str, text: str) -> None:
            nonlocal count
            count += 1
            first.set()

        task = asyncio.ensure_future(model.chat(msgs, on_delta=on_delta, max_tokens=50_000, ignore_eos=True))
        await asyncio.wait_for(first.wait(), 30)
        t = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        cancel_s = time.monotonic() - t
        seen = count
        await asyncio.sleep(0.2)
        assert count == seen  # nothing delivered after the cancellation
        # the worker really stopped: it leaves, and the next call is not stuck behind it
        t = time.monotonic()
        while any(th.name.startswith("local-hf-generate") for th in threading.enumerate()):
            assert time.monotonic() - t < 2, "the generation thread kept running after cancel"
            await asyncio.sleep(0.02)
        t = time.monotonic()
        after = await model.chat(msgs, max_tokens=3)
        return cancel_s, seen, after, time.monotonic() - t

    cancel_s, seen, after, after_s = run(go())
    assert seen >= 1 and cancel_s < 1.0
    assert after.completion_tokens <= 3 and after_s < 5


def _no_generation_thread_within(seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not any(th.name.startswith("local-hf-generate") for th in threading.enumerate()):
            return True
        time.sleep(0.02)
    return False


def test_close_mid_stream_and_failing_callback(tiny_dirs: dict[str, Path]) -> None:
    model = TransformersChatModel(tiny_dirs["qwen2_5_vl"], device="cpu")
    msgs = vrag_messages(page_image())

    async def close_mid_stream() -> tuple[list[str], BaseException]:
        deltas: list[str] = []
        got = asyncio.Event()

        def on_delta(kind: str, text: str) -> None:
            deltas.append(text)
            got.set()

        task = asyncio.ensure_future(model.chat(msgs, on_delta=on_delta, max_tokens=50_000, ignore_eos=True))
        await asyncio.wait_for(got.wait(), 30)
        await model.aclose()
        try:
            await asyncio.wait_for(task, 5)
        except BaseException as exc:  # what it raises is the point
            return deltas, exc
        raise AssertionError("a closed model returned an answer")

    deltas, exc = run(close_mid_stream())
    # text had reached the caller: the partial answer comes with the error, like the HTTP client's
    assert isinstance(exc, StreamInterrupted) and exc.kind == "stream_cut"
    assert exc.partial_text == "".join(deltas) and deltas
    assert not model.loaded and _no_generation_thread_within(2)

    def boom(kind: str, text: str) -> None:
        raise RuntimeError("UI gone")

    with pytest.raises(RuntimeError, match="UI gone"):  # a failing callback stops the generation too
        run(model.chat(msgs, on_delta=boom, max_tokens=50_000, ignore_eos=True))
    assert _no_generation_thread_within(2)
    model.close()


# ====================================================================== errors


def test_errors_are_typed_and_clear(
    tmp_path: Path, tiny_dirs: dict[str, Path], models: dict[str, TransformersChatModel]
) -> None:
    with pytest.raises(EndpointError) as e:
        TransformersChatModel(tmp_path / "nope")
    assert e.value.kind == "not_found" and "model directory not found" in str(e.value)

    (tmp_path / "empty").mkdir()
    with pytest.raises(EndpointError) as e:
        TransformersChatModel(tmp_path / "empty")
    assert e.value.kind == "bad_request" and "config.json" in str(e.value)

    text_only = tmp_path / "llm"
    text_only.mkdir()
    (text_only / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    with pytest.raises(EndpointError) as e:
        run(TransformersChatModel(text_only).chat([{"role": "user", "content": "hi"}]))
    assert e.value.kind == "bad_request" and "not a vision-language chat model" in str(e.value)

    headless = build_tiny_qwen25_vl(tmp_path / "gve-like")  # an embedding checkpoint: no lm_head
    with pytest.raises(EndpointError) as e:
        TransformersChatModel(headless, device="cpu").load()
    assert e.value.kind == "bad_request" and "lm_head" in str(e.value)

    for dtype, needle in (("float8", "unknown dtype 'float8'"), (16, "must be a string or a torch dtype")):
        with pytest.raises(EndpointError) as e:
            TransformersChatModel(tiny_dirs["qwen2_vl"], device="cpu", dtype=dtype).load()
        assert e.value.kind == "bad_request" and needle in str(e.value)

    model = models["qwen2_vl"]
    bad_inputs: list[tuple[list[dict[str, Any]], dict[str, Any], str]] = [
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA"}}],
                }
            ],
            {},
            "cannot decode the image",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "image_url", "image_url": {"url": "https://x.org/a.png"}}],
                }
            ],
            {},
            "data: URIs",
        ),
        ([{"role": "tool", "content": "x"}], {}, "unsupported role"),
        ([{"role": "user", "content": [{"type": "audio", "audio": "x"}]}], {}, "unsupported content part"),
        ([{"role": "user", "content": "hi"}], {"temperature": -1}, "temperature"),
        ([{"role": "user", "content": "hi"}], {"max_tokens": 0}, "max_tokens"),
        ([], {}, "no messages"),
    ]
    for messages, params, needle in bad_inputs:
        with pytest.raises(EndpointError) as e:
            run(model.chat(messages, **params))
        assert e.value.kind == "bad_request" and needle in str(e.value), (needle, str(e.value))
    # the model still works after refusing bad input
    ok = run(model.chat([{"role": "user", "content": "hi"}], max_tokens=2))
    assert ok.prompt_tokens > 0


def test_lazy_load_and_aclose(tiny_dirs: dict[str, Path]) -> None:
    model = TransformersChatModel(tiny_dirs["qwen2_5_vl"], device="cpu", dtype="float32", model_name="tiny")
    assert not model.loaded and model.model_name == "tiny"

    async def go() -> ChatResult:
        async with model:
            result = await model.chat([{"role": "user", "content": "hello"}], max_tokens=2)
            assert model.loaded and model.device == "cpu"
        return result

    result = run(go())
    assert result.completion_tokens <= 2 and not model.loaded
    assert model.load_seconds is not None and result.model_seconds >= model.load_seconds


# ====================================================================== the VRAG agent, end to end

DOCS = {
    "alpine.pdf": [
        "Edelweiss grows above the tree line. Its leaves are covered in white woolly hairs that protect "
        "the plant from cold, drying wind and strong ultraviolet light."
    ],
    "harbor.pdf": ["The harbor lighthouse was built in 1871 from local granite."],
}


@pytest.fixture
def searcher(library, minilm, make_pdf):  # type: ignore[no-untyped-def]
    from vrag_desktop.core.agents.searchers import EngineSearcher
    from vrag_desktop.core.search import SearchEngine

    paths = [make_pdf(name, pages) for name, pages in DOCS.items()]
    index_paths(library, "docs", paths, minilm)
    engine = SearchEngine(library, ["docs"], embedder=minilm)
    yield EngineSearcher(engine)
    engine.close()


def collect(agent: Any, question: str) -> list[Any]:
    async def go() -> list[Any]:
        return [ev async for ev in agent.run(question)]

    return run(go(), 120)


def test_vrag_agent_runs_on_the_local_model(
    models: dict[str, TransformersChatModel], searcher: Any, tmp_path: Path
) -> None:
    from vrag_desktop.core.agents.vrag import VRAGAgent

    agent = VRAGAgent(models["qwen2_5_vl"], searcher, image_dir=tmp_path / "img", max_steps=2, max_tokens=12)
    events = collect(agent, "Why is edelweiss woolly?")
    assert isinstance(events[-1], Answer) and events[-1].forced
    assert events[-1].content == vp.FALLBACK_ANSWER
    assert any(isinstance(e, MaxSteps) for e in events)
    assert any(isinstance(e, AgentError) and e.kind == "parse" and e.recoverable for e in events)
    assert not any(isinstance(e, AgentError) and not e.recoverable for e in events)
    usages = [e for e in events if isinstance(e, Usage)]
    assert usages and all(u.prompt_tokens > 0 and 0 < u.completion_tokens <= 12 for u in usages)
    assert [u.prompt_tokens for u in usages] == sorted(u.prompt_tokens for u in usages)  # the context grows
    assert any(isinstance(e, ContentDelta) for e in events)


class _SearchFirst:
    """The real local model, except that its first reply is a scripted search, so the agent shows it
    a real page (the random model never writes tags itself)."""

    def __init__(self, inner: TransformersChatModel) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.calls: list[tuple[list[dict[str, Any]], ChatResult]] = []

    async def chat(
        self, messages: Sequence[dict[str, Any]], *, stream: bool = True, on_delta: Any = None, **params: Any
    ) -> ChatResult:
        if not self.calls:
            result = ChatResult("<think>Look it up.</think>\n<search>edelweiss woolly hairs</search>")
        else:
            result = await self.inner.chat(messages, stream=stream, on_delta=on_delta, **params)
        self.calls.append((list(messages), result))
        return result


def test_vrag_agent_shows_a_real_page_to_the_local_model(
    models: dict[str, TransformersChatModel], searcher: Any, tmp_path: Path
) -> None:
    from vrag_desktop.core.agents.model_turn import TurnPolicy
    from vrag_desktop.core.agents.vrag import VRAGAgent

    local = models["qwen2_vl"]
    model = _SearchFirst(local)
    seen: list[Any] = []
    hook = vision_tower(local).register_forward_pre_hook(lambda mod, args: seen.append(args))
    try:
        events = collect(
            VRAGAgent(
                model,
                searcher,
                image_dir=tmp_path / "img",
                max_steps=2,
                max_tokens=8,
                turns=TurnPolicy(max_invalid=0),
            ),
            "Why is edelweiss woolly?",
        )
    finally:
        hook.remove()
    assert any(isinstance(e, ImageShown) for e in events)
    assert isinstance(events[-1], Answer)
    assert not any(isinstance(e, AgentError) and not e.recoverable for e in events)
    messages, result = model.calls[1]  # the local model's first call: prompt, search, the page
    parts = messages[-1]["content"]
    assert parts[0]["type"] == "image_url" and parts[0]["image_url"]["url"].startswith(
        "data:image/jpeg;base64,"
    )
    assert result.prompt_tokens > 0 and seen  # the page went through the vision tower
