"""A stand-in for ``python -m vllm.entrypoints.openai.api_server`` (stdlib only).

It accepts vLLM's arguments (unknown ones are ignored), prints vLLM-like log lines (a ``\\r``
progress bar included), and after ``--fake-delay`` seconds serves ``GET /health``,
``GET /v1/models`` and a canned ``POST /v1/chat/completions``. ``--fake-mode`` makes it fail
like vLLM does: ``oom`` (CUDA OOM traceback while loading), ``unsupported`` (``Model
architectures ['Foo'] are not supported``), ``hang`` (never ready), ``exit-later`` (dies
``--fake-exit-after`` s after ready). ``--fake-ignore-sigterm`` ignores SIGTERM (inherited by the
grandchild), ``--fake-grandchild`` spawns a sleeping grandchild in the same process group and
prints ``EngineCore pid=N``. As vLLM, it requires an API key on ``/v1/*`` (401 without
``Authorization: Bearer KEY``) when ``--api-key`` or ``$VLLM_API_KEY`` gives one;
``--fake-echo-key`` prints that key (as a careless server might), to test masking.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def log(msg: str, level: str = "INFO") -> None:
    print(f"{level} {time.strftime('%m-%d %H:%M:%S')} [fake_vllm.py] {msg}", flush=True)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="fake-model")
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--fake-mode", default="ok", choices=["ok", "oom", "unsupported", "hang", "exit-later"])
    p.add_argument("--fake-delay", type=float, default=0.5)
    p.add_argument("--fake-exit-after", type=float, default=1.0)
    p.add_argument("--fake-ignore-sigterm", action="store_true")
    p.add_argument("--fake-grandchild", action="store_true")
    p.add_argument("--fake-echo-key", action="store_true")
    p.add_argument("--api-key", default=None)
    args, unknown = p.parse_known_args()
    served = args.served_model_name or args.model
    api_key = args.api_key or os.environ.get("VLLM_API_KEY") or None

    if args.fake_ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        log("ignoring SIGTERM")
    else:

        def on_term(signum: int, frame: object) -> None:
            log("Shutting down FastAPI HTTP server.")
            sys.exit(0)

        signal.signal(signal.SIGTERM, on_term)

    log("vLLM API server version 0.0.0-fake")
    log(f"non-default args: model={args.model!r} served={served!r} port={args.port} extra={unknown}")
    if api_key:
        log("API key required on /v1 (" + ("--api-key" if args.api_key else "VLLM_API_KEY") + ")")
        if args.fake_echo_key:
            log(f"the key is {api_key}")
    if args.fake_grandchild:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        log(f"EngineCore pid={child.pid}")

    steps = 5
    for i in range(steps + 1):
        sys.stdout.write(
            f"\rLoading safetensors checkpoint shards: {i * 100 // steps:3d}% Completed | {i}/{steps}"
        )
        sys.stdout.flush()
        time.sleep(args.fake_delay / steps)
    sys.stdout.write("\n")
    sys.stdout.flush()

    if args.fake_mode == "oom":
        log("EngineCore failed to start.", "ERROR")
        print(
            "Traceback (most recent call last):\n"
            '  File "/venv/lib/python3.11/site-packages/vllm/v1/engine/core.py", line 691, '
            "in run\n"
            "    engine_core = EngineCoreProc(*args, **kwargs)\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.02 GiB. GPU 0 has a "
            "total capacity of 23.57 GiB of which 498.56 MiB is free. Including non-PyTorch "
            "memory, this process has 23.07 GiB memory in use.",
            flush=True,
        )
        print("RuntimeError: Engine core initialization failed. See root cause above.", flush=True)
        return 1
    if args.fake_mode == "unsupported":
        print(
            "Traceback (most recent call last):\n"
            '  File "/venv/lib/python3.11/site-packages/vllm/model_executor/models/registry.py", '
            "line 512, in inspect_model_cls\n"
            "ValueError: Model architectures ['Foo'] are not supported for now. Supported "
            "architectures: dict_keys(['Qwen2ForCausalLM', "
            "'Qwen2_5_VLForConditionalGeneration'])",
            flush=True,
        )
        return 1
    if args.fake_mode == "hang":
        while True:
            log("still loading model weights...")
            time.sleep(0.5)

    class Handler(BaseHTTPRequestHandler):
        def _json(self, code: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _refused(self) -> bool:
            """vLLM's rule: with a key, every /v1 path needs it as a bearer token."""
            if (
                api_key
                and self.path.startswith("/v1")
                and self.headers.get("Authorization") != f"Bearer {api_key}"
            ):
                self._json(401, {"error": "Unauthorized"})
                return True
            return False

        def do_GET(self) -> None:
            if self._refused():
                return
            if self.path == "/health":
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif self.path == "/v1/models":
                self._json(
                    200,
                    {
                        "object": "list",
                        "data": [{"id": served, "object": "model", "owned_by": "vllm", "root": args.model}],
                    },
                )
            else:
                self._json(404, {"detail": "Not Found"})

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self._refused():
                return
            if self.path != "/v1/chat/completions":
                self._json(404, {"detail": "Not Found"})
                return
            self._json(
                200,
                {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": served,
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": "fake answer"},
                        }
                    ],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
                },
            )

        def log_message(self, fmt: str, *a: object) -> None:
            print(
                f'INFO:     {self.client_address[0]}:{self.client_address[1]} - "{a[0]}" {a[1]}', flush=True
            )

    try:
        server = ThreadingHTTPServer((args.host, args.port), Handler)
    except OSError as exc:
        print(
            f"ERROR:    [Errno {exc.errno}] error while attempting to bind on address "
            f"('{args.host}', {args.port}): address already in use",
            flush=True,
        )
        return 1
    print(f"INFO:     Started server process [{os.getpid()}]", flush=True)
    print(f"INFO:     Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)", flush=True)
    if args.fake_mode == "exit-later":

        def die() -> None:
            time.sleep(args.fake_exit_after)
            print("RuntimeError: fake engine core died unexpectedly", flush=True)
            os._exit(1)

        import threading

        threading.Thread(target=die, daemon=True).start()
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
