"""What the model-download tests share: a fake hub reachable with the suite's offline switches lifted
for it alone, a keyring double, and tiny model repositories."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_hub import FakeHub

BIG = 24 * 1024 * 1024  # over huggingface_hub's 10 MB download chunk: a partial file really is partial
CONFIG = {
    "model_type": "qwen2",
    "architectures": ["Qwen2ForCausalLM"],
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 256,
    "max_position_embeddings": 512,
    "torch_dtype": "float32",
}


def tiny_files(weights: int = 4096, seed: int = 0, **extra: bytes) -> dict[str, bytes]:
    """A model repository's files: config, tokenizer bits, a README and ``weights`` bytes of
    safetensors (random: any byte error shows in the checksum)."""
    rnd = hashlib.sha256(str(seed).encode()).digest()
    blob = (rnd * (weights // len(rnd) + 1))[:weights] if weights < 1_000_000 else os.urandom(weights)
    return {
        "config.json": json.dumps({**CONFIG, "seed": seed}).encode(),
        "tokenizer_config.json": b'{"model_max_length": 512}',
        "README.md": b"# tiny\n",
        "logo.png": b"\x89PNG not needed",
        "model.safetensors": blob,
        **extra,
    }


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


@pytest.fixture
def online(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeHub]:
    """A running fake hub; the suite's HF_HUB_OFFLINE lifted for this test, no token anywhere but
    where the test puts one, a keyring that lives in memory."""
    import huggingface_hub.constants as hub_constants
    import keyring
    from doubles import MemoryKeyring

    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN", "HF_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub_constants, "HF_TOKEN_PATH", str(tmp_path / "hf-home" / "token"))
    monkeypatch.setattr(hub_constants, "HF_STORED_TOKENS_PATH", str(tmp_path / "hf-home" / "stored_tokens"))
    previous = keyring.get_keyring()
    keyring.set_keyring(MemoryKeyring())
    try:
        with FakeHub() as hub:
            yield hub
    finally:
        keyring.set_keyring(previous)


def cli_env(hub: FakeHub, data_dir: Path, tmp: Path) -> dict[str, str]:
    """The environment a ``vrag-desktop models`` subprocess gets: the fake hub, no offline switch,
    no token, no keyring, a private HF home."""
    return {
        "VRAG_DESKTOP_DATA_DIR": str(data_dir),
        "HF_ENDPOINT": hub.url,
        "HF_HUB_OFFLINE": "0",
        "TRANSFORMERS_OFFLINE": "0",
        "HF_TOKEN": "",
        "HF_HOME": str(tmp / "hf-home"),
        "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",
    }


def drain(gen: Any) -> tuple[list[Any], Any]:
    """Every progress report of a generator, and its return value."""
    seen = []
    while True:
        try:
            seen.append(next(gen))
        except StopIteration as stop:
            return seen, stop.value
