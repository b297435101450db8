"""The OpenAI-compatible client and endpoint profiles, over real HTTP to the scripted server."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import keyring
import pytest
from conftest import free_port
from doubles import MemoryKeyring
from keyring.backends import fail
from PIL import Image
from scripted_openai import ScriptedOpenAI

from vrag_desktop.core.endpoints.base import ChatResult, EndpointError
from vrag_desktop.core.endpoints.client import (
    OpenAIChatModel,
    StreamInterrupted,
    image_data_uri,
    image_part,
    redact,
)
from vrag_desktop.core.endpoints.profiles import (
    DASHSCOPE,
    DASHSCOPE_BASE_URL,
    KEYRING_SERVICE,
    LOCAL_VLLM,
    EndpointProfile,
    NoSecureStoreError,
    ProfileError,
    ProfileStore,
)

pytestmark = pytest.mark.timeout(60)

KEY = "sk-test-7f3a9c1e5b2d4f60"
MODEL = "scripted-model"
USER = [{"role": "user", "content": "What is on page 3?"}]


def model(srv: ScriptedOpenAI, key: str | None = KEY, **kw: Any) -> OpenAIChatModel:
    opts: dict[str, Any] = {"backoff_base": 0.01, "backoff_max": 0.05, "total_timeout": 10.0, **kw}
    return OpenAIChatModel(srv.base_url, MODEL, key, **opts)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def chat(m: OpenAIChatModel, **kw: Any) -> ChatResult:
    try:
        return await m.chat(USER, **kw)
    finally:
        await m.aclose()


# ---- streaming and plain answers ---------------------------------------------------------------


def test_streaming_delivers_reasoning_then_content_in_order() -> None:
    turn = {
        "reasoning": "The user asks about page 3.",
        "content": "<answer>Beijing</answer>",
        "chunk": 5,
    }
    deltas: list[tuple[str, str]] = []
    with ScriptedOpenAI([turn], api_key=KEY) as srv:
        res = run(chat(model(srv), on_delta=lambda k, t: deltas.append((k, t))))
        body = srv.chat_bodies[0]
    kinds = [k for k, _ in deltas]
    assert kinds == sorted(kinds, key=lambda k: k != "think") and set(kinds) == {"think", "content"}
    assert "".join(t for k, t in deltas if k == "think") == turn["reasoning"] == res.reasoning
    assert "".join(t for k, t in deltas if k == "content") == turn["content"] == res.content
    assert all(len(t) <= 5 for _, t in deltas) and len(deltas) > 4
    assert res.finish_reason == "stop" and res.completion_tokens == len(deltas) and res.prompt_tokens > 0
    assert res.model_seconds > 0
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["model"] == MODEL and body["messages"] == USER


def test_reasoning_field_variant_and_server_ignoring_include_usage() -> None:
    turn = {"reasoning": "hmm", "content": "ok", "reasoning_field": "reasoning"}
    deltas: list[tuple[str, str]] = []
    with ScriptedOpenAI([turn], honor_include_usage=False) as srv:
        res = run(chat(model(srv, key=None), on_delta=lambda k, t: deltas.append((k, t))))
        auth = srv.chat_requests[0].headers.get("authorization")
    assert deltas == [("think", "hmm"), ("content", "ok")]
    assert (res.prompt_tokens, res.completion_tokens, res.finish_reason) == (0, 0, "stop")
    assert auth == "Bearer EMPTY"


def test_openai_env_key_never_sent_to_other_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-users-real-openai-key")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-private")
    with ScriptedOpenAI([{"content": "x"}]) as srv:
        run(chat(model(srv, key=None)))
        headers = srv.chat_requests[0].headers
    assert headers["authorization"] == "Bearer EMPTY"
    assert "openai-organization" not in headers


def test_non_streaming() -> None:
    deltas: list[tuple[str, str]] = []
    with ScriptedOpenAI([{"content": "plain answer", "reasoning": "brief thought"}], api_key=KEY) as srv:
        res = run(chat(model(srv), stream=False, on_delta=lambda k, t: deltas.append((k, t))))
        body = srv.chat_bodies[0]
    assert (res.content, res.reasoning, res.finish_reason) == (
        "plain answer",
        "brief thought",
        "stop",
    )
    assert res.prompt_tokens > 0 and res.completion_tokens > 0
    assert deltas == [("think", "brief thought"), ("content", "plain answer")]
    assert not body.get("stream") and "stream_options" not in body


def test_params_and_extra_body_pass_through() -> None:
    with ScriptedOpenAI([{"content": "a"}, {"content": "b"}]) as srv:
        m = model(
            srv,
            extra_body={"chat_template_kwargs": {"enable_thinking": True}},
            default_params={"temperature": 0.6},
        )

        async def go() -> None:
            await m.chat(
                USER,
                temperature=0.0,
                top_p=0.95,
                max_tokens=64,
                top_k=20,
                extra_body={"chat_template_kwargs": {"enable_thinking": False}},
            )
            await m.chat(USER, stream=False)
            await m.aclose()

        run(go())
        first, second = srv.chat_bodies
    assert first["temperature"] == 0.0 and first["top_p"] == 0.95 and first["max_tokens"] == 64
    assert first["top_k"] == 20
    assert first["chat_template_kwargs"] == {"enable_thinking": False}
    assert second["temperature"] == 0.6 and second["chat_template_kwargs"] == {"enable_thinking": True}


# ---- images ------------------------------------------------------------------------------------


def test_images_travel_as_typed_data_uris(tmp_path: Path) -> None:
    png = tmp_path / "page.png"
    Image.new("RGBA", (40, 30), (200, 10, 10, 128)).save(png)
    pil = Image.new("L", (20, 20), 128)
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Describe."},
                image_part(png),
                image_part(pil),
                {"type": "image_url", "image_url": {"url": image_data_uri(pil, fmt="png")}},
            ],
        }
    ]
    with ScriptedOpenAI([{"content": "a red page"}]) as srv:
        m = model(srv)

        async def go() -> None:
            await m.chat(messages)
            await m.aclose()

        run(go())
        urls = srv.chat_requests[0].image_urls()
    assert len(urls) == 3
    assert urls[0].startswith("data:image/jpeg;base64,") and urls[1].startswith("data:image/jpeg;base64,")
    assert urls[2].startswith("data:image/png;base64,")
    jpeg = base64.b64decode(urls[0].split(",", 1)[1])
    assert jpeg[:3] == b"\xff\xd8\xff"
    assert base64.b64decode(urls[2].split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError):
        image_data_uri(pil, fmt="bmp")


# ---- retries -----------------------------------------------------------------------------------


def test_429_then_success_honours_retry_after() -> None:
    retries: list[tuple[int, float, str]] = []
    with ScriptedOpenAI([{"status": 429, "retry_after": 0.4}, {"content": "done"}]) as srv:
        t0 = time.monotonic()
        res = run(chat(model(srv, on_retry=lambda n, d, e: retries.append((n, d, e.kind)))))
        elapsed = time.monotonic() - t0
        statuses = [r.status for r in srv.chat_requests]
    assert res.content == "done" and statuses == [429, 200]
    assert 0.4 <= elapsed < 3.0
    assert retries and retries[0][0] == 1 and retries[0][1] >= 0.4 and retries[0][2] == "rate_limit"


def test_500_twice_then_success() -> None:
    with ScriptedOpenAI([{"status": 500, "times": 2}, {"content": "third time lucky"}]) as srv:
        res = run(chat(model(srv, max_attempts=3)))
        assert [r.status for r in srv.chat_requests] == [500, 500, 200]
    assert res.content == "third time lucky"


def test_500_forever_gives_up_after_n_attempts_in_bounded_time() -> None:
    with ScriptedOpenAI([{"status": 503, "forever": True}]) as srv:
        t0 = time.monotonic()
        with pytest.raises(EndpointError) as err:
            run(chat(model(srv, max_attempts=3, backoff_base=0.1, backoff_max=0.2)))
        elapsed = time.monotonic() - t0
        n = len(srv.chat_requests)
    assert err.value.kind == "server" and err.value.status == 503 and n == 3
    assert "after 3 attempts" in str(err.value)
    assert elapsed < 2.0


def test_429_asking_too_long_gives_up_at_once() -> None:
    with ScriptedOpenAI([{"status": 429, "retry_after": 3600, "forever": True}]) as srv:
        with pytest.raises(EndpointError) as err:
            run(chat(model(srv, max_retry_after=5)))
        assert len(srv.chat_requests) == 1
    assert err.value.kind == "rate_limit" and "3600" in str(err.value)


@pytest.mark.parametrize(
    ("turn", "kind"),
    [
        ({"status": 400, "message": "messages too long"}, "bad_request"),
        ({"status": 403}, "auth"),
        ({"status": 404}, "not_found"),
        ({"status": 400, "message": "The model `x` does not exist."}, "not_found"),
    ],
)
def test_client_errors_are_not_retried(turn: dict[str, Any], kind: str) -> None:
    with ScriptedOpenAI([{**turn, "forever": True}]) as srv:
        with pytest.raises(EndpointError) as err:
            run(chat(model(srv)))
        assert len(srv.chat_requests) == 1
    assert err.value.kind == kind and err.value.status == turn["status"]


def test_a_conversation_longer_than_the_context_says_so_and_what_to_change() -> None:
    """vLLM's own words for a prompt past ``--max-model-len``: the run ends saying what to change."""
    vllm_words = (
        "This model's maximum context length is 4096 tokens. However, your prompt contains at least "
        "4097 input tokens, which exceeds this limit even without any output tokens."
    )
    with (
        ScriptedOpenAI([{"status": 400, "message": vllm_words, "forever": True}]) as srv,
        pytest.raises(EndpointError) as err,
    ):
        run(chat(model(srv)))
    text = str(err.value)
    assert err.value.kind == "bad_request" and "no longer fits the model's context" in text
    assert "longer context" in text and "fewer steps" in text and "4096 tokens" in text


def test_unknown_model_is_not_found() -> None:
    with (
        ScriptedOpenAI([], models=["served-a"], strict_models=True) as srv,
        pytest.raises(EndpointError) as err,
    ):
        run(chat(model(srv)))
    assert err.value.kind == "not_found" and "does not exist" in str(err.value)


# ---- auth and redaction ------------------------------------------------------------------------


def test_401_is_auth_and_the_key_is_redacted() -> None:
    wrong = "sk-wrong-0123456789abcdef"
    with ScriptedOpenAI([], api_key=KEY) as srv:  # the 401 body repeats the wrong key
        with pytest.raises(EndpointError) as err:
            run(chat(model(srv, key=wrong)))
        assert len(srv.chat_requests) == 1  # never retried
    exc = err.value
    assert exc.kind == "auth" and exc.status == 401
    assert "Incorrect API key provided: ***" in str(exc)
    for text in (str(exc), repr(exc), *map(str, exc.args)):
        assert wrong not in text


def test_key_echoed_in_any_error_body_is_redacted() -> None:
    turns = [{"status": 500, "echo_auth": True, "forever": True}]
    with ScriptedOpenAI(turns, api_key=KEY) as srv, pytest.raises(EndpointError) as err:
        run(chat(model(srv, max_attempts=2)))
    assert err.value.kind == "server"
    assert KEY not in str(err.value) and KEY not in repr(err.value)
    assert "Authorization: Bearer ***" in str(err.value)
    assert KEY not in repr(model(srv))


def test_redact_helper() -> None:
    quoted = KEY.replace("-", "%2D")
    text = f'key={KEY} url=https://u:{KEY}@h/x json="{KEY}" q={quoted} Bearer abcdefgh'
    out = redact(text, [KEY, None, ""])
    assert KEY not in out and "abcdefgh" not in out and "u:" not in out
    assert redact("plain", ["EMPTY"]) == "plain" and redact("key", ["k"]) == "key"


# ---- transport failures ------------------------------------------------------------------------


def test_unreachable_port_fails_quickly() -> None:
    port = free_port()
    m = OpenAIChatModel(f"http://127.0.0.1:{port}/v1", MODEL, KEY, max_attempts=2, backoff_base=0.01)
    t0 = time.monotonic()
    with pytest.raises(EndpointError) as err:
        run(chat(m))
    assert err.value.kind == "unreachable" and time.monotonic() - t0 < 5
    assert "after 2 attempts" in str(err.value)


def test_hanging_server_times_out_within_the_bound() -> None:
    async def go(srv: ScriptedOpenAI) -> tuple[EndpointError, float, bool]:
        m = model(srv, total_timeout=0.8)
        t0 = time.monotonic()
        with pytest.raises(EndpointError) as err:
            await m.chat(USER)
        elapsed = time.monotonic() - t0
        closed = await asyncio.to_thread(srv.wait_disconnect, 1.0)  # abandoned, not left hanging
        await m.aclose()
        return err.value, elapsed, closed

    with ScriptedOpenAI([{"hang": 30}]) as srv:
        exc, elapsed, closed = run(go(srv))
        assert len(srv.chat_requests) == 1  # a timeout is not retried
    assert exc.kind == "timeout" and 0.8 <= elapsed < 2.5 and closed


def test_read_timeout_mid_stream_keeps_the_partial_text() -> None:
    turn = {"content": "abcdefghijklmnop", "chunk": 4, "hang_after_chunks": 2, "hang": 30}
    with ScriptedOpenAI([turn]) as srv:
        t0 = time.monotonic()
        with pytest.raises(StreamInterrupted) as err:
            run(chat(model(srv, read_timeout=0.5), on_delta=lambda k, t: None))
        assert time.monotonic() - t0 < 2.5
    assert err.value.kind == "timeout" and err.value.partial_text == "abcdefgh"


@pytest.mark.parametrize("clean", [False, True])
def test_stream_cut_raises_with_partial_text(clean: bool) -> None:
    turn = {
        "reasoning": "rrrr",
        "content": "abcdefghijklmnop",
        "chunk": 4,
        "cut_after_chunks": 3,
        "cut_clean": clean,
    }
    seen: list[str] = []
    with ScriptedOpenAI([turn, {"content": "never asked for"}]) as srv:
        with pytest.raises(StreamInterrupted) as err:
            run(chat(model(srv), on_delta=lambda k, t: seen.append(t)))
        assert len(srv.chat_requests) == 1  # the caller saw text: no second answer
    exc = err.value
    assert isinstance(exc, EndpointError) and exc.kind == "stream_cut"
    assert exc.partial_reasoning == "rrrr" and exc.partial_text == "abcdefgh" == "".join(seen[1:])


def test_stream_cut_before_anyone_saw_text_is_retried() -> None:
    turns = [
        {"content": "abcdefghijklmnop", "chunk": 4, "cut_after_chunks": 2},
        {"content": "whole answer"},
    ]
    with ScriptedOpenAI(turns) as srv:
        res = run(chat(model(srv)))  # no on_delta: nobody saw the partial text
        assert len(srv.chat_requests) == 2
    assert res.content == "whole answer"


def test_non_streaming_truncated_body_is_retried_then_reported() -> None:
    with ScriptedOpenAI([{"content": "x" * 200, "cut_after_chunks": 0, "forever": True}]) as srv:
        with pytest.raises(EndpointError) as err:
            run(chat(model(srv, max_attempts=2), stream=False))
        assert len(srv.chat_requests) == 2
    assert err.value.kind == "stream_cut" and "after 2 attempts" in str(err.value)


def test_error_event_mid_stream() -> None:
    turn = {
        "content": "abcdefghijkl",
        "chunk": 4,
        "error_after_chunks": 2,
        "message": "engine died",
    }
    with ScriptedOpenAI([turn, turn, {"content": "recovered"}]) as srv:
        with pytest.raises(StreamInterrupted) as err:
            run(chat(model(srv), on_delta=lambda k, t: None))
        assert err.value.kind == "stream_cut" and err.value.partial_text == "abcdefgh"
        assert "engine died" in str(err.value)
        assert run(chat(model(srv))).content == "recovered"  # unseen partial text: retried


def test_server_rejecting_stream_options_is_asked_again_without() -> None:
    turns = [
        {"status": 400, "message": "Unrecognized request argument supplied: stream_options"},
        {"content": "fine"},
    ]
    with ScriptedOpenAI(turns) as srv:
        m = model(srv, max_attempts=1)
        assert run(chat(m)).content == "fine"
        assert "stream_options" in srv.chat_bodies[0] and "stream_options" not in srv.chat_bodies[1]
        assert not m.include_usage


def test_cancel_mid_stream_closes_the_connection_promptly() -> None:
    turn = {"content": "x" * 400, "chunk": 4, "delay": 0.05}

    async def go(srv: ScriptedOpenAI) -> float:
        m = model(srv)
        first = asyncio.Event()
        task = asyncio.create_task(m.chat(USER, on_delta=lambda k, t: first.set()))
        await asyncio.wait_for(first.wait(), 5)
        t0 = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        took = time.monotonic() - t0
        # the server notices while this loop and the client's pool are still alive
        assert await asyncio.to_thread(srv.wait_disconnect, 1.0)
        seen = time.monotonic() - t0
        await m.aclose()
        assert seen < 1.0
        return took

    with ScriptedOpenAI([turn]) as srv:
        took = run(go(srv))
        rec = srv.chat_requests[0]
        assert rec.disconnected and not rec.completed
    assert took < 0.5


# ---- models and connection check ---------------------------------------------------------------


def test_list_models_and_check_verdicts() -> None:
    async def probe(m: OpenAIChatModel) -> Any:
        try:
            return await m.check(timeout=3)
        finally:
            await m.aclose()

    with ScriptedOpenAI([], api_key=KEY, models=[MODEL, "other"]) as srv:
        m = model(srv)

        async def names() -> list[str]:
            try:
                return await m.list_models()
            finally:
                await m.aclose()

        assert run(names()) == [MODEL, "other"]
        ok = run(probe(model(srv)))
        assert ok.ok and ok.models == [MODEL, "other"] and ok.latency is not None and MODEL in ok.message
        wrong_model = run(probe(OpenAIChatModel(srv.base_url, "qwen-missing", KEY)))
        assert not wrong_model.ok and wrong_model.kind == "not_found"
        assert "'qwen-missing' is not served" in wrong_model.message and "other" in wrong_model.message
        bad_key = run(probe(model(srv, key="sk-bad-key-987654321")))
        assert not bad_key.ok and bad_key.kind == "auth" and "rejected the API key" in bad_key.message
        assert "sk-bad-key-987654321" not in bad_key.message
        no_key = run(probe(model(srv, key=None)))
        assert no_key.kind == "auth" and "none is set" in no_key.message
    down = run(probe(OpenAIChatModel(f"http://127.0.0.1:{free_port()}/v1", MODEL, KEY)))
    assert not down.ok and down.kind == "unreachable" and "Cannot reach" in down.message


def test_check_without_models_endpoint_falls_back_to_a_tiny_chat() -> None:
    with ScriptedOpenAI([{"content": "p"}], models_endpoint=False) as srv:

        async def go() -> Any:
            m = model(srv)
            try:
                return await m.check(timeout=3)
            finally:
                await m.aclose()

        verdict = run(go())
        assert verdict.ok and "answered" in verdict.message
        assert srv.chat_bodies[0]["max_tokens"] == 1


# ---- profiles ----------------------------------------------------------------------------------


@pytest.fixture
def memory_keyring() -> Any:
    previous = keyring.get_keyring()
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    yield backend
    keyring.set_keyring(previous)


@pytest.fixture
def no_keyring() -> Any:
    previous = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    yield
    keyring.set_keyring(previous)


def test_builtin_profiles() -> None:
    store = ProfileStore(Path("/nonexistent/never-written"), environ={})
    assert store.names() == ["DashScope", "Local vLLM", "Custom"]
    ds = store.get(DASHSCOPE)
    assert (ds.kind, ds.base_url, ds.model) == ("dashscope", DASHSCOPE_BASE_URL, "qwen3.5-plus")
    assert ds.env_vars() == ["VRAG_DESKTOP_API_KEY_DASHSCOPE", "DASHSCOPE_API_KEY"]
    assert store.get(LOCAL_VLLM).kind == "local-vllm" and not store.get(LOCAL_VLLM).needs_key
    with pytest.raises(ProfileError):
        store.to_model(LOCAL_VLLM)  # no URL until the app starts the server


def test_profiles_persist_with_keys_in_keyring_only(tmp_path: Path, memory_keyring: MemoryKeyring) -> None:
    secret = "sk-dashscope-abcdef0123456789"
    store = ProfileStore(tmp_path, environ={})
    store.save(
        EndpointProfile(
            "My server",
            "custom",
            "http://10.0.0.5:8000/v1",
            "qwen-vl",
            params={"temperature": 0.2},
            extra_body={"top_k": 5},
        )
    )
    assert store.set_api_key("My server", "sk-custom-key-000111222") == "keyring"
    assert store.set_api_key(DASHSCOPE, secret) == "keyring"
    store.set_local_server("http://127.0.0.1:8002/v1/", "Qwen/Qwen2.5-VL-7B-Instruct")
    store.set_active("My server")
    assert memory_keyring.store[(KEYRING_SERVICE, DASHSCOPE)] == secret

    text = (tmp_path / "endpoints.json").read_text()
    assert secret not in text and "sk-custom-key-000111222" not in text
    json.loads(text)

    again = ProfileStore(tmp_path, environ={})
    assert again.active == "My server"
    mine = again.get("My server")
    assert (mine.base_url, mine.model, mine.params, mine.extra_body) == (
        "http://10.0.0.5:8000/v1",
        "qwen-vl",
        {"temperature": 0.2},
        {"top_k": 5},
    )
    assert again.get(LOCAL_VLLM).base_url == "http://127.0.0.1:8002/v1"
    assert again.api_key(DASHSCOPE) == secret and again.api_key_source(DASHSCOPE) == "keyring"
    m = again.to_model()
    assert m.model_name == "qwen-vl" and m.default_params == {"temperature": 0.2} and m.has_api_key
    again.delete("My server")
    assert "My server" not in ProfileStore(tmp_path, environ={}).names()
    assert (KEYRING_SERVICE, "My server") not in memory_keyring.store
    with pytest.raises(ProfileError):
        again.delete(DASHSCOPE)


def test_env_fallback_and_precedence(tmp_path: Path, memory_keyring: MemoryKeyring) -> None:
    env = {"DASHSCOPE_API_KEY": "sk-from-env-111"}
    store = ProfileStore(tmp_path, environ=env)
    assert store.api_key(DASHSCOPE) == "sk-from-env-111"
    assert store.api_key_source(DASHSCOPE) == "env:DASHSCOPE_API_KEY"
    env["VRAG_DESKTOP_API_KEY_DASHSCOPE"] = "sk-from-profile-env-222"
    assert store.api_key(DASHSCOPE) == "sk-from-profile-env-222"
    store.set_api_key(DASHSCOPE, "sk-stored-333")
    assert store.api_key(DASHSCOPE) == "sk-stored-333"  # a stored key wins over the environment
    assert store.api_key(LOCAL_VLLM) is None


def test_without_keyring_storing_fails_clearly_and_session_keys_work(
    tmp_path: Path, no_keyring: None
) -> None:
    store = ProfileStore(tmp_path, environ={"VRAG_DESKTOP_API_KEY_CUSTOM": "sk-env-custom"})
    with pytest.raises(NoSecureStoreError) as err:
        store.set_api_key(DASHSCOPE, "sk-never-stored-444")
    msg = str(err.value)
    assert "No secure credential store" in msg and "DASHSCOPE_API_KEY" in msg and "session" in msg
    assert "sk-never-stored-444" not in msg
    assert store.api_key(DASHSCOPE) is None
    assert store.set_api_key(DASHSCOPE, "sk-session-555", session_only=True) == "session"
    assert store.api_key(DASHSCOPE) == "sk-session-555" and store.api_key_source(DASHSCOPE) == "session"
    assert ProfileStore(tmp_path, environ={}).api_key(DASHSCOPE) == "sk-session-555"  # same process
    assert store.api_key("Custom") == "sk-env-custom"
    store.save(store.get(DASHSCOPE))
    assert "sk-session-555" not in (tmp_path / "endpoints.json").read_text()
    store.forget_api_key(DASHSCOPE)
    assert store.api_key(DASHSCOPE) is None


def test_profile_validation_and_corrupt_file(tmp_path: Path) -> None:
    store = ProfileStore(tmp_path, environ={})
    with pytest.raises(ProfileError):
        store.save(EndpointProfile("x", "custom", "ftp://nope"))
    with pytest.raises(ProfileError):
        store.save(EndpointProfile("x", "custom", "http://h/v1", "m", extra_body={"api_key": "sk-1"}))
    with pytest.raises(ProfileError):
        store.save(EndpointProfile(DASHSCOPE, "custom"))
    path = tmp_path / "endpoints.json"
    for damaged in (b"{not json", b'{"profiles": {}}', b"\xff\xfe"):
        path.write_bytes(damaged)
        store = ProfileStore(tmp_path, environ={})  # a reader: built-ins, the file left as it is
        assert store.names() == ["DashScope", "Local vLLM", "Custom"] and store.active is None
        assert (
            sorted(p.name for p in tmp_path.iterdir()) == ["endpoints.json"] and path.read_bytes() == damaged
        )
    store.set_active(DASHSCOPE)  # a save: the damaged file is moved aside first, never overwritten
    assert (tmp_path / "endpoints.json.bad").read_bytes() == damaged
    assert ProfileStore(tmp_path, environ={}).active == DASHSCOPE


def test_profile_model_talks_to_the_server(tmp_path: Path, no_keyring: None) -> None:
    with ScriptedOpenAI([{"content": "hello"}], api_key=KEY) as srv:
        store = ProfileStore(tmp_path, environ={"VRAG_DESKTOP_API_KEY_LAB": KEY})
        store.save(EndpointProfile("Lab", "custom", srv.base_url, MODEL, max_attempts=1))
        res = run(chat(store.to_model("Lab")))
    assert res.content == "hello"


def test_profiles_module_imports_neither_openai_nor_keyring() -> None:
    code = (
        "import sys, vrag_desktop.core.endpoints.profiles;"
        "print(sorted(m for m in ('openai', 'keyring', 'httpx', 'PIL') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_scripted_server_script_exhaustion_and_health() -> None:
    import urllib.request

    with ScriptedOpenAI([{"content": "only"}], api_key=KEY) as srv:
        with urllib.request.urlopen(f"{srv.url}/health", timeout=5) as resp:
            assert resp.status == 200
        with pytest.raises(EndpointError) as err:

            async def twice() -> None:
                m = model(srv, max_attempts=1)
                await m.chat(USER)
                try:
                    await m.chat(USER)
                finally:
                    await m.aclose()

            run(twice())
    assert "script exhausted" in str(err.value)
