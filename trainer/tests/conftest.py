"""Fixtures of the trainer's tests (run in the trainer's environment: ``.venv-trainer``).

Everything is real but the model's words where a test needs them fixed: a tiny random Qwen2-VL
built here, a corpus indexed with the real pipeline and the offline MiniLM embedder, the project's
HTTP search server, TRL's trainer. :class:`ScriptedGenerator` replaces sampling with fixed replies
(as the app's tests use a scripted OpenAI server) so masks and rewards can be checked exactly.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Kept page views (core/agents/page_views.py) go to a throwaway folder, never the user's cache.
os.environ.setdefault("VRAG_DESKTOP_VIEW_CACHE", tempfile.mkdtemp(prefix="vrag-views-"))

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from toy_training import (  # noqa: E402 - after the sys.path entry
    DOCS,
    EXAMPLES,
    TAGS,
    VOCAB_SIZE,
    build_toy_data,
    vocabulary,
)

__all__ = ["DOCS", "EXAMPLES", "TAGS", "ScriptedGenerator", "write_config"]


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import tiny_vl_models

    return tiny_vl_models.build_tiny_qwen2_vl(
        tmp_path_factory.mktemp("models") / "tiny-qwen2-vl",
        with_lm_head=True,
        extra_tokens=TAGS,
        vocabulary=vocabulary(),  # the prompts' words as tokens: sequences ~3x shorter
        vocab_size=VOCAB_SIZE,
    )


@pytest.fixture(scope="session")
def processor(tiny_model_dir: Path) -> Any:
    from vrag_desktop.core.embedders.qwen_vl_loading import load_processor

    return load_processor(tiny_model_dir, "qwen2_vl")


@pytest.fixture(scope="session")
def toy_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory with corpus ``toy`` (two small PDFs) indexed with MiniLM."""
    return build_toy_data(tmp_path_factory.mktemp("toy"))


@pytest.fixture(scope="session")
def dataset_file(toy_data: Path) -> Path:
    return toy_data.parent / "dataset.json"


@pytest.fixture(scope="session")
def search_url(toy_data: Path) -> Iterator[str]:
    from vrag_trainer.data import serve_search

    url, stop = serve_search(toy_data, ["toy"])
    yield url
    stop()


def _drain(gen: Any) -> Any:
    while True:
        try:
            next(gen)
        except StopIteration as stop:
            return stop.value


class ScriptedGenerator:
    """A :class:`~vrag_trainer.policy.Generator` replying from a script: ``reply(prompt_text,
    n_images, call_no)`` gives the text; its token ids (plus eos) are returned, as a model would.
    ``calls`` records (prompt_ids, n_images) per call."""

    def __init__(self, processor: Any, reply: Callable[[str, int, int], str]) -> None:
        self.tok = processor.tokenizer
        self.reply = reply
        self.calls: list[tuple[list[int], int]] = []
        self.per_prompt: dict[str, int] = defaultdict(int)

    async def generate(
        self,
        prompt_ids: list[int],
        pixel_values: Any,
        image_grid_thw: Any,
        *,
        max_new_tokens: int,
        temperature: float,
        images: Any = None,
    ) -> Any:
        from vrag_trainer.policy import Generated

        text = self.tok.decode(prompt_ids, skip_special_tokens=False)
        self.calls.append((list(prompt_ids), len(pixel_values)))
        ids = self.tok.encode(self.reply(text, len(pixel_values), len(self.calls)), add_special_tokens=False)
        ids = [*ids[: max_new_tokens - 1], self.tok.eos_token_id]
        return Generated(ids, None, "stop")


def write_config(path: Path, **fields: Any) -> Path:
    path.write_text(json.dumps(fields), encoding="utf-8")
    return path
