"""A scripted OpenAI-compatible HTTP server for tests: real HTTP on 127.0.0.1, replaying a script.

Why: model clients and agents must be tested against real sockets (streaming, dropped connections,
hangs, cancellation) without a GPU or network. This server speaks just enough of the OpenAI API
(what vLLM and DashScope's compatible mode serve) and does exactly what the script says.

Endpoints: ``GET /health`` (200, no auth), ``GET /v1/models``, ``POST /v1/chat/completions``
(``stream: true`` -> SSE ``data: {...}`` chunks, a final usage chunk when
``stream_options.include_usage`` is asked for, then ``data: [DONE]``; otherwise one JSON body).
The ``/v1`` prefix is optional.

Script = a list of **turns**; each chat request consumes the next one. A turn is a dict, or a
callable ``f(request_body: dict) -> dict`` (decide from the messages, e.g. answer after a
search). Keys:

Reply (any turn without ``status``)
    ``content`` (str), ``reasoning`` (str, streamed before the content), ``chunk`` (chars per
    SSE chunk, default 8), ``delay`` (seconds before each chunk, default 0), ``reasoning_field``
    (``"reasoning_content"`` (default) or ``"reasoning"``), ``finish_reason`` (default ``"stop"``),
    ``usage`` (``{"prompt_tokens": .., "completion_tokens": ..}``; default: prompt = len(json of
    messages)//4, completion = number of content+reasoning chunks; ``False`` = never send usage),
    ``model`` (reported model name; default: the requested one).
Faults
    ``status`` (int): answer with that HTTP status and an OpenAI-style error body; ``retry_after``
    (seconds, sets ``Retry-After``); ``body`` (dict or str, replaces the error body); ``echo_auth``
    (True: the error message repeats the received ``Authorization`` header, as careless servers do);
    ``headers`` (extra response headers).
    ``hang`` (seconds): wait this long before answering (watching for the client going away); then
    the rest of the turn runs (a reply, with the default content if none is given).
    ``cut_after_chunks`` (int): stream that many content/reasoning chunks, then drop the connection
    (no final chunk, no ``[DONE]``; the chunked body is left unterminated). With ``cut_clean: True``
    the HTTP body is terminated properly but still without a finish chunk or ``[DONE]``. For a
    non-streaming request, half the JSON body is sent and the connection dropped.
    ``hang_after_chunks`` (int) with ``hang``: stream that many chunks, then stall ``hang`` seconds.
    ``error_after_chunks`` (int): stream that many chunks, then an in-stream error event
    (``data: {"error": {"message": <message>}}``) and ``[DONE]``, as vLLM does on engine failures.
Repetition
    ``times`` (int, default 1): the turn serves that many requests; ``forever: True``: all of them.

When the script runs out: ``default`` (a turn given to the constructor) if any, else the script
again from the start if ``cycle=True``, else HTTP 500 "scripted server: script exhausted".

Recording: ``srv.requests`` holds a :class:`Recorded` per request (method, path, headers with
lower-case names, parsed JSON body, the turn served, status, whether the client disconnected
early). ``srv.chat_bodies`` lists the chat request bodies; ``Recorded.image_urls()`` the image
URLs of a request; ``srv.wait_disconnect(timeout)`` blocks until some client dropped a connection
mid-answer; ``srv.wait_requests(n)`` until ``n`` chat requests arrived; ``srv.push(turn)`` adds
turns while a test runs.

Auth: with ``api_key="k"`` every request but ``/health`` needs ``Authorization: Bearer k``, else 401
with a body that repeats the wrong key (so clients' redaction gets tested).

Usage::

    with ScriptedOpenAI([{"content": "hi", "reasoning": "r"}, {"status": 500}], api_key="k") as srv:
        client = OpenAIChatModel(srv.base_url, "scripted-model", api_key="k")

Standalone (for trying the CLI or the app by hand)::

    python tests/scripted_openai.py --port 8011 --script turns.json [--api-key K] [--cycle]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import select
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Turn = dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]

DEFAULT_MODEL = "scripted-model"
DEFAULT_CONTENT = "This is a scripted reply from the test server."
_STATUS_TYPES = {
    400: "BadRequestError",
    401: "AuthenticationError",
    403: "PermissionDeniedError",
    404: "NotFoundError",
    408: "RequestTimeout",
    413: "PayloadTooLarge",
    422: "UnprocessableEntity",
    429: "RateLimitError",
    500: "InternalServerError",
    502: "BadGateway",
    503: "ServiceUnavailable",
}


@dataclass
class Recorded:
    """One request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: Any = None  # parsed JSON (or the raw text when it is not JSON)
    turn: dict[str, Any] | None = None
    status: int | None = None
    disconnected: bool = False  # the client went away before the answer was complete
    completed: bool = False  # the answer was sent in full
    received_at: float = field(default_factory=time.monotonic)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", [])) if isinstance(self.body, dict) else []

    def image_urls(self) -> list[str]:
        """Every ``image_url.url`` in the request's messages, in order."""
        urls = []
        for msg in self.messages:
            content = msg.get("content")
            if isinstance(content, list):
                for part in content:
                    if isinstance(part, dict) and part.get("type") == "image_url":
                        img = part.get("image_url")
                        urls.append(img.get("url") if isinstance(img, dict) else img)
        return urls


class _Disconnected(Exception):
    """The client closed the connection."""


class _Stopping(Exception):
    """The server is shutting down: abandon the answer."""


class ScriptedOpenAI:
    """The server; see the module docstring. Use as ``with`` (or :meth:`start` / :meth:`stop`)."""

    def __init__(
        self,
        script: Iterable[Turn] = (),
        *,
        api_key: str | None = None,
        models: Sequence[str] = (DEFAULT_MODEL,),
        strict_models: bool = False,
        models_endpoint: bool = True,
        honor_include_usage: bool = True,
        default: Turn | None = None,
        cycle: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        """``strict_models``: chat requests for a model not in ``models`` get vLLM's 404.
        ``models_endpoint=False``: ``/v1/models`` answers 404 (servers without it).
        ``honor_include_usage=False``: ignore ``stream_options`` (never send a usage chunk)."""
        self.script: list[Turn] = list(script)
        self.api_key = api_key
        self.models = list(models)
        self.strict_models = strict_models
        self.models_endpoint = models_endpoint
        self.honor_include_usage = honor_include_usage
        self.default = default
        self.cycle = cycle
        self.requests: list[Recorded] = []
        self._host, self._port = host, port
        self._pos = 0
        self._used = 0  # requests served by the turn at _pos (for "times")
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle ------------------------------------------------------------------------------
    def start(self) -> ScriptedOpenAI:
        owner = self

        class Handler(_Handler):
            server_ref = owner

        self._httpd = ThreadingHTTPServer((self._host, self._port), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            daemon=True,
            name=f"scripted-openai-{self.port}",
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}"

    @property
    def base_url(self) -> str:
        """What an OpenAI client takes as ``base_url``."""
        return f"{self.url}/v1"

    # ---- script ---------------------------------------------------------------------------------
    def push(self, *turns: Turn) -> None:
        """Append turns to the script (e.g. while a test runs)."""
        with self._cond:
            self.script.extend(turns)

    def _next_turn(self, body: dict[str, Any]) -> dict[str, Any] | None:
        with self._cond:
            if self._pos >= len(self.script) and self.cycle and self.script:
                self._pos, self._used = 0, 0
            if self._pos < len(self.script):
                turn = self.script[self._pos]
                spec = turn if isinstance(turn, dict) else {}
                self._used += 1
                if not spec.get("forever") and self._used >= int(spec.get("times", 1)):
                    self._pos, self._used = self._pos + 1, 0
            elif self.default is not None:
                turn = self.default
            else:
                return None
        return dict(turn(body)) if callable(turn) else dict(turn)

    # ---- recording ------------------------------------------------------------------------------
    def _record(self, rec: Recorded) -> None:
        with self._cond:
            self.requests.append(rec)
            self._cond.notify_all()

    def _mark(self, rec: Recorded, **changes: Any) -> None:
        with self._cond:
            for k, v in changes.items():
                setattr(rec, k, v)
            self._cond.notify_all()

    @property
    def chat_requests(self) -> list[Recorded]:
        with self._cond:
            return [r for r in self.requests if r.method == "POST" and r.path.endswith("/chat/completions")]

    @property
    def chat_bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.chat_requests]

    def wait_disconnect(self, timeout: float = 5.0) -> bool:
        """Block until some request saw its client disconnect; return whether one did."""
        with self._cond:
            return self._cond.wait_for(lambda: any(r.disconnected for r in self.requests), timeout)

    def wait_requests(self, n: int, timeout: float = 5.0) -> bool:
        """Block until ``n`` chat requests have arrived."""
        with self._cond:
            return self._cond.wait_for(lambda: len(self.chat_requests) >= n, timeout)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_ref: ScriptedOpenAI
    timeout = 120

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read records instead
        pass

    # ---- plumbing -------------------------------------------------------------------------------
    @property
    def srv(self) -> ScriptedOpenAI:
        return type(self).server_ref

    def _send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        data = obj.encode() if isinstance(obj, str) else json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _error(
        self,
        rec: Recorded,
        status: int,
        message: str,
        headers: dict[str, str] | None = None,
        body: Any = None,
    ) -> None:
        kind = _STATUS_TYPES.get(status, "Error")
        payload = (
            body
            if body is not None
            else {"error": {"message": message, "type": kind, "param": None, "code": status}}
        )
        self.srv._mark(rec, status=status)
        self._send_json(status, payload, headers)
        self.srv._mark(rec, completed=True)

    def _wait(self, seconds: float, rec: Recorded) -> None:
        """Sleep, but notice at once when the client closes the connection (or the server stops)."""
        deadline = time.monotonic() + seconds
        sock = self.connection
        while not self.srv._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            readable, _, _ = select.select([sock], [], [], min(left, 0.02))
            if readable:
                try:
                    peek = sock.recv(1, socket.MSG_PEEK)
                except OSError:
                    peek = b""
                if not peek:
                    raise _Disconnected
                time.sleep(min(left, 0.02))  # the client sent more (pipelining): not a disconnect
        raise _Stopping

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _authorized(self, rec: Recorded) -> bool:
        key = self.srv.api_key
        if key is None:
            return True
        got = self.headers.get("Authorization", "")
        if got == f"Bearer {key}":
            return True
        provided = got.removeprefix("Bearer ").strip() or "(none)"
        self._error(
            rec,
            401,
            f"Incorrect API key provided: {provided}. You can find your API key in your account settings.",
        )
        return False

    def _begin(self) -> tuple[Recorded, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        rec = Recorded(
            self.command,
            self.path.split("?", 1)[0],
            {k.lower(): v for k, v in self.headers.items()},
            body,
        )
        self.srv._record(rec)
        return rec, body

    def _guard(self, rec: Recorded, fn: Callable[[], None]) -> None:
        try:
            fn()
        except (_Disconnected, BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.srv._mark(rec, disconnected=True)
            self.close_connection = True
        except _Stopping:
            self.close_connection = True

    # ---- routes ---------------------------------------------------------------------------------
    def do_GET(self) -> None:
        rec, _ = self._begin()
        path = rec.path.removeprefix("/v1")
        if path == "/health":
            self.srv._mark(rec, status=200)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
            self.srv._mark(rec, completed=True)
            return
        if not self._authorized(rec):
            return
        if path == "/models" and self.srv.models_endpoint:
            data = [
                {"id": m, "object": "model", "created": 0, "owned_by": "scripted"} for m in self.srv.models
            ]
            self.srv._mark(rec, status=200)
            self._guard(rec, lambda: self._send_json(200, {"object": "list", "data": data}))
            self.srv._mark(rec, completed=True)
            return
        self._error(rec, 404, f"Not found: {rec.path}")

    def do_POST(self) -> None:
        rec, body = self._begin()
        if rec.path.removeprefix("/v1") != "/chat/completions":
            self._error(rec, 404, f"Not found: {rec.path}")
            return
        if not self._authorized(rec):
            return
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            self._error(rec, 400, "request body must be a JSON object with a 'messages' list")
            return
        model = body.get("model")
        if self.srv.strict_models and model not in self.srv.models:
            self._error(rec, 404, f"The model `{model}` does not exist.")
            return
        turn = self.srv._next_turn(body)
        self.srv._mark(rec, turn=turn)
        if turn is None:
            self._error(rec, 500, "scripted server: script exhausted")
            return
        self._guard(rec, lambda: self._serve_turn(rec, body, turn))

    def _serve_turn(self, rec: Recorded, body: dict[str, Any], turn: dict[str, Any]) -> None:
        if "hang" in turn and "hang_after_chunks" not in turn:
            self._wait(float(turn["hang"]), rec)
        if "status" in turn:
            status = int(turn["status"])
            headers = {k: str(v) for k, v in (turn.get("headers") or {}).items()}
            if "retry_after" in turn:
                headers["Retry-After"] = f"{float(turn['retry_after']):g}"
            message = turn.get("message") or f"scripted error {status}"
            if turn.get("echo_auth"):
                message += f" (request had Authorization: {self.headers.get('Authorization', '')})"
            self._error(rec, status, message, headers, turn.get("body"))
            return
        if body.get("stream"):
            self._stream_reply(rec, body, turn)
        else:
            self._plain_reply(rec, body, turn)

    # ---- replies --------------------------------------------------------------------------------
    @staticmethod
    def _pieces(text: str, size: int) -> list[str]:
        return [text[i : i + size] for i in range(0, len(text), size)] if text else []

    def _usage(self, body: dict[str, Any], turn: dict[str, Any], n_chunks: int) -> dict[str, int] | None:
        usage = turn.get("usage")
        if usage is False:
            return None
        if isinstance(usage, dict):
            u = {"prompt_tokens": 0, "completion_tokens": 0, **usage}
        else:
            u = {
                "prompt_tokens": len(json.dumps(body.get("messages", []))) // 4,
                "completion_tokens": n_chunks,
            }
        u["total_tokens"] = u["prompt_tokens"] + u["completion_tokens"]
        return u

    def _plain_reply(self, rec: Recorded, body: dict[str, Any], turn: dict[str, Any]) -> None:
        content = turn.get("content", DEFAULT_CONTENT if "reasoning" not in turn else "")
        reasoning = turn.get("reasoning", "")
        size = int(turn.get("chunk", 8))
        n = len(self._pieces(reasoning, size)) + len(self._pieces(content, size))
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if reasoning:
            message[turn.get("reasoning_field", "reasoning_content")] = reasoning
        obj: dict[str, Any] = {
            "id": f"chatcmpl-scripted-{len(self.srv.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": turn.get("model", body.get("model")),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": turn.get("finish_reason", "stop"),
                }
            ],
        }
        usage = self._usage(body, turn, n)
        if usage:
            obj["usage"] = usage
        if "delay" in turn:
            self._wait(float(turn["delay"]) * max(n, 1), rec)
        self.srv._mark(rec, status=200)
        if "cut_after_chunks" in turn:  # promise the full body, send half, drop the line
            data = json.dumps(obj).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self._drop()
            return
        self._send_json(200, obj)
        self.srv._mark(rec, completed=True)

    def _drop(self) -> None:
        """Close the connection now (FIN, not RST: the request body was read in full)."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _stream_reply(self, rec: Recorded, body: dict[str, Any], turn: dict[str, Any]) -> None:
        model = turn.get("model", body.get("model"))
        cid, created = f"chatcmpl-scripted-{len(self.srv.requests)}", int(time.time())
        size = max(1, int(turn.get("chunk", 8)))
        delay = float(turn.get("delay", 0))
        cut = turn.get("cut_after_chunks")
        if cut is not None and "content" not in turn and "reasoning" not in turn:
            content = DEFAULT_CONTENT * 3
        else:
            content = turn.get("content", DEFAULT_CONTENT if "reasoning" not in turn else "")
        rfield = turn.get("reasoning_field", "reasoning_content")
        deltas = [{rfield: p} for p in self._pieces(turn.get("reasoning", ""), size)]
        deltas += [{"content": p} for p in self._pieces(content, size)]

        def event(choices: list[dict[str, Any]], **extra: Any) -> bytes:
            obj = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": choices,
                **extra,
            }
            return b"data: " + json.dumps(obj).encode() + b"\n\n"

        def choice(delta: dict[str, Any], finish: str | None = None) -> list[dict[str, Any]]:
            return [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]

        self.srv._mark(rec, status=200)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._write_chunk(event(choice({"role": "assistant", "content": ""})))
        for i, delta in enumerate(deltas):
            if cut is not None and i >= int(cut):
                if turn.get("cut_clean"):
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                self._drop()
                return
            if turn.get("error_after_chunks") is not None and i >= int(turn["error_after_chunks"]):
                message = turn.get("message") or "scripted in-stream error"
                self._write_chunk(
                    b"data: " + json.dumps({"error": {"message": message, "code": 500}}).encode() + b"\n\n"
                )
                break
            if turn.get("hang_after_chunks") is not None and i == int(turn["hang_after_chunks"]):
                self._wait(float(turn.get("hang", 30)), rec)
            if delay:
                self._wait(delay, rec)
            self._write_chunk(event(choice(delta)))
        else:
            self._write_chunk(event(choice({}, turn.get("finish_reason", "stop"))))
        opts = body.get("stream_options") or {}
        usage = self._usage(body, turn, len(deltas))
        if usage and self.srv.honor_include_usage and opts.get("include_usage"):
            self._write_chunk(event([], usage=usage))
        self._write_chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        self.srv._mark(rec, completed=True)


def _load_script(path: str | None) -> list[Turn]:
    if not path:
        return []
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    turns = data.get("turns", []) if isinstance(data, dict) else data
    if not isinstance(turns, list):
        raise SystemExit('--script must hold a JSON list of turns (or {"turns": [...]})')
    return turns


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        description="Scripted OpenAI-compatible server (for tests and trying things by hand)."
    )
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8011)
    ap.add_argument("--script", help="JSON file: a list of turns (see the module docstring)")
    ap.add_argument("--api-key", help="require this key (Authorization: Bearer ...)")
    ap.add_argument("--models", default=DEFAULT_MODEL, help="comma-separated served model names")
    ap.add_argument("--strict-models", action="store_true", help="404 for models not in --models")
    ap.add_argument("--cycle", action="store_true", help="replay the script from the start when it runs out")
    ap.add_argument(
        "--default-reply",
        default=None,
        help="content of the reply once the script runs out (default: HTTP 500)",
    )
    args = ap.parse_args(argv)
    default = {"content": args.default_reply} if args.default_reply is not None else None
    srv = ScriptedOpenAI(
        _load_script(args.script),
        api_key=args.api_key,
        models=[m for m in args.models.split(",") if m],
        strict_models=args.strict_models,
        default=default,
        cycle=args.cycle,
        host=args.host,
        port=args.port,
    )
    with srv:
        print(
            f"scripted OpenAI server at {srv.base_url} ({len(srv.script)} turns); Ctrl-C stops it",
            flush=True,
        )
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)


if __name__ == "__main__":
    main()
