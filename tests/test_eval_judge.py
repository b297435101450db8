"""The model judge over real HTTP to the scripted OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from scripted_openai import ScriptedOpenAI

from vrag_desktop.core.endpoints.client import OpenAIChatModel
from vrag_desktop.core.eval.judge import Judge, Verdict, judge_messages, parse_judgement
from vrag_desktop.core.run.assemble import Endpoint, close_model

pytestmark = pytest.mark.timeout(30)

MODEL = "judge-model"
TRUE, FALSE = {"content": "<judge>True</judge>"}, {"content": "<judge>False</judge>"}
NEITHER = {"content": "The answer looks plausible."}


def client(srv: ScriptedOpenAI, key: str | None = None, **kw: Any) -> OpenAIChatModel:
    opts: dict[str, Any] = {"backoff_base": 0.01, "backoff_max": 0.05, "total_timeout": 10.0, **kw}
    return OpenAIChatModel(srv.base_url, MODEL, key, **opts)


def judge_once(judge: Judge, answer: str | None = "Paris") -> Verdict:
    async def go() -> Verdict:
        made = judge.client
        try:
            return await judge.verdict("Capital of France?", "Paris", answer)
        finally:
            await judge.aclose()  # closes a client made from an endpoint
            await close_model(made)  # and the test's own client

    return asyncio.run(go())


def test_parse_judgement_is_lenient() -> None:
    assert parse_judgement("<judge>True</judge>") is True
    assert parse_judgement("<judge> false </judge>") is False
    assert parse_judgement("<think>hmm</think>\n<JUDGE>TRUE</JUDGE>") is True
    assert parse_judgement("<judge>False</judge> wait <judge>True</judge>") is True  # last tag wins
    assert parse_judgement("True") is True
    assert parse_judgement(" false.\n") is False
    assert parse_judgement("True or False") is None
    assert parse_judgement("<judge>maybe</judge>") is None
    assert parse_judgement("It is true that...") is None
    assert parse_judgement("") is None


def test_prompt_sections() -> None:
    (msg,) = judge_messages("Q?", "ref", "gen")
    text = msg["content"]
    assert msg["role"] == "user"
    assert "## Query\nQ?" in text and "## Reference Answer\nref" in text
    assert text.rstrip().endswith("## Generated Answer\ngen")
    assert "<judge>True</judge>" in text and "<judge>False</judge>" in text


def test_true_and_false_at_temperature_zero() -> None:
    with ScriptedOpenAI([TRUE, FALSE]) as srv:
        j = Judge(client(srv), backoff_s=0.01)
        v1, v2 = judge_once(j), judge_once(j)
        assert (v1.correct, v1.attempts, v1.error, v1.raw) == (True, 1, None, "<judge>True</judge>")
        assert (v2.correct, v2.attempts, v2.error) == (False, 1, None)
        body = srv.chat_bodies[0]
        assert body["temperature"] == 0 and body["model"] == MODEL and not body.get("stream")
        assert "## Generated Answer\nParis" in body["messages"][0]["content"]


def test_no_answer_is_false_without_a_call() -> None:
    with ScriptedOpenAI([TRUE]) as srv:
        j = Judge(client(srv))
        assert judge_once(j, None) == Verdict(False, "", 0, None, 0.0)
        assert judge_once(j, "  \n") == Verdict(False, "", 0, None, 0.0)
        assert srv.chat_requests == []


def test_neither_then_true_is_retried() -> None:
    with ScriptedOpenAI([NEITHER, TRUE]) as srv:
        v = judge_once(Judge(client(srv), backoff_s=0.01))
        assert (v.correct, v.attempts, v.error) == (True, 2, None)
        assert len(srv.chat_requests) == 2


def test_neither_every_time_ends_with_none_and_an_error() -> None:
    with ScriptedOpenAI([{**NEITHER, "forever": True}]) as srv:
        v = judge_once(Judge(client(srv), retries=2, backoff_s=0.01))
        assert v.correct is None and v.attempts == 3  # 1 + 2 retries, then it stops
        assert v.error is not None and "neither True nor False" in v.error and "3 attempts" in v.error
        assert v.raw == NEITHER["content"]
        assert v.error_kind == "unparsed" and not v.refused
        assert len(srv.chat_requests) == 3


def test_timeout_is_retried() -> None:
    # the timeout leaves the answer that follows the hang room on a loaded machine (at 0.3 s a CI-like
    # load made the second attempt time out too); the hang is far longer than the timeout
    with ScriptedOpenAI([{"hang": 30}, TRUE]) as srv:
        started = time.monotonic()
        v = judge_once(Judge(client(srv), timeout_s=2.0, backoff_s=0.01))
        assert (v.correct, v.attempts) == (True, 2)
        assert time.monotonic() - started < 15  # did not wait for the hang
        assert srv.wait_disconnect(2)  # the late call was abandoned, not left running


def test_timeout_every_time() -> None:
    with ScriptedOpenAI([{"hang": 5, "forever": True}]) as srv:
        v = judge_once(Judge(client(srv), timeout_s=0.2, retries=1, backoff_s=0.01))
        assert v.correct is None and v.attempts == 2
        assert v.error is not None and "within 0.2 s" in v.error


def test_429_then_success_through_an_endpoint_honours_retry_after() -> None:
    # The endpoint's client retries a 429 itself, waiting what Retry-After says (0.3 s).
    with ScriptedOpenAI([{"status": 429, "retry_after": 0.3}, TRUE]) as srv:
        j = Judge(Endpoint.from_url(srv.base_url, MODEL), backoff_s=0.01)
        started = time.monotonic()
        v = judge_once(j)
        assert v.correct is True and time.monotonic() - started >= 0.3
        assert [r.status for r in srv.chat_requests] == [429, 200]


def test_429_and_5xx_the_client_gave_up_on_are_retried_by_the_judge() -> None:
    script = [{"status": 429, "retry_after": 0}, {"status": 503}, TRUE]
    with ScriptedOpenAI(script) as srv:
        v = judge_once(Judge(client(srv, max_attempts=1), backoff_s=0.01))
        assert (v.correct, v.attempts, v.error) == (True, 3, None)


def test_401_is_not_retried_and_says_the_key_is_wrong() -> None:
    with ScriptedOpenAI([TRUE], api_key="right-key") as srv:
        v = judge_once(Judge(client(srv, key="sk-wrong-123456"), retries=3, backoff_s=0.01))
        assert v.correct is None and v.attempts == 1
        assert v.error is not None and "API key" in v.error and "401" in v.error
        assert "sk-wrong-123456" not in v.error
        assert v.error_kind == "auth" and v.refused  # an evaluation stops on this, not on the wording
        assert len(srv.chat_requests) == 1


def test_model_override() -> None:
    with ScriptedOpenAI([TRUE]) as srv:
        judge_once(Judge(client(srv), model="other-judge"))
        assert srv.chat_bodies[0]["model"] == "other-judge"


def test_concurrency_bound_is_respected_at_the_server() -> None:
    lock, now, peak = threading.Lock(), [0], [0]

    def slow_true(body: dict[str, Any]) -> dict[str, Any]:
        with lock:
            now[0] += 1
            peak[0] = max(peak[0], now[0])
        time.sleep(0.15)  # the handler thread holds the request open
        with lock:
            now[0] -= 1
        generated = body["messages"][0]["content"].rsplit("## Generated Answer", 1)[1]
        return TRUE if "True" in generated else FALSE

    items = [(f"q{i}", "True", "True" if i % 2 == 0 else "no") for i in range(6)]
    with ScriptedOpenAI(default=slow_true) as srv:
        j = Judge(client(srv), concurrency=2, backoff_s=0.01)

        async def go() -> list[Verdict]:
            try:
                return await j.verdicts(items)
            finally:
                await close_model(j.client)

        verdicts = asyncio.run(go())
        assert [v.correct for v in verdicts] == [True, False, True, False, True, False]  # in order
        assert peak[0] == 2  # two at a time, never more
        assert len(srv.chat_requests) == 6


def test_an_endpoint_client_is_made_once_and_closed() -> None:
    made: list[OpenAIChatModel] = []

    def by_answer(body: dict[str, Any]) -> dict[str, Any]:  # the two verdicts run concurrently
        text = str(body["messages"][-1]["content"])
        return TRUE if text.rstrip().endswith("a") else FALSE

    with ScriptedOpenAI(default=by_answer) as srv:

        def make() -> OpenAIChatModel:
            made.append(client(srv))
            return made[-1]

        j = Judge(Endpoint.from_factory(make, MODEL))

        async def go() -> list[Verdict]:
            async with j:
                return await j.verdicts([("q", "r", "a"), ("q", "r", "b")])

        assert [v.correct for v in asyncio.run(go())] == [True, False]
        assert len(made) == 1 and made[0]._sdk is None  # closed by the judge


@pytest.mark.parametrize("kw", [{"timeout_s": 0}, {"retries": -1}, {"concurrency": 0}, {"backoff_s": -1}])
def test_arguments_validated(kw: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Judge(OpenAIChatModel("http://127.0.0.1:9/v1", MODEL), **kw)
