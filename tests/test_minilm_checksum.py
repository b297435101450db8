"""The offline MiniLM's files are checked by SHA-256 before use: a damaged or swapped file is a
clear error naming it; a file checked once is not hashed again until it changes."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from vrag_desktop.core.embedders import minilm_files
from vrag_desktop.core.embedders.minilm import MiniLMEmbedder, _model_dir
from vrag_desktop.core.embedders.minilm_files import SHA256, CorruptModelFile, verify_minilm


@pytest.fixture()
def copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private copy of the installed model's files, and a private check cache."""
    monkeypatch.setenv(minilm_files.CACHE_ENV, str(tmp_path / "verified.json"))
    monkeypatch.setattr(minilm_files, "_MEMO", set())
    out = tmp_path / "model"
    out.mkdir()
    for name in SHA256:
        shutil.copy2(_model_dir() / name, out / name)
    return out


def _flip_byte(path: Path, offset: int) -> None:
    with path.open("r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x01]))


def test_the_installed_weights_pass_and_a_check_is_remembered(
    copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    verify_minilm(copy)
    assert (tmp_path / "verified.json").is_file()
    hashed: list[Path] = []
    real = minilm_files._sha256
    monkeypatch.setattr(minilm_files, "_sha256", lambda p: hashed.append(p) or real(p))
    monkeypatch.setattr(minilm_files, "_MEMO", set())  # a new process: only the cache file knows
    verify_minilm(copy)
    assert hashed == []
    MiniLMEmbedder(device="cpu", model_dir=copy)  # loads after the check


def test_a_corrupted_copy_is_a_clear_error(copy: Path) -> None:
    weights = copy / "model.safetensors"
    _flip_byte(weights, weights.stat().st_size // 2)  # one bit, deep in the weights: loads fine otherwise
    with pytest.raises(
        CorruptModelFile, match=r"model\.safetensors is damaged .* expected 53aa5117.*--no-deps"
    ):
        MiniLMEmbedder(device="cpu", model_dir=copy)


def test_a_file_changed_after_its_check_is_checked_again(copy: Path) -> None:
    verify_minilm(copy)
    tok = copy / "tokenizer.json"
    before = tok.stat()
    _flip_byte(tok, 100)
    os.utime(tok, ns=(before.st_atime_ns, before.st_mtime_ns))  # even with its old time
    with pytest.raises(CorruptModelFile, match=r"tokenizer\.json is damaged"):
        verify_minilm(copy)


def test_a_missing_file_is_named(copy: Path) -> None:
    (copy / "config.json").unlink()
    with pytest.raises(CorruptModelFile, match=r"incomplete: .*config\.json is missing"):
        verify_minilm(copy)
