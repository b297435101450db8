"""Without torchvision, a Qwen-VL model's processor is built without its video part, and the log
says so in one line: transformers' six-line ImportError ("… Check out the instructions on the
installation page … Please note that you may need to restart your runtime after installation.")
opened every training run's log and read like a failure (issue 31's walk-through, item 7)."""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

import pytest
from tiny_vl_models import build_tiny_qwen2_vl

from vrag_desktop.core.embedders.qwen_vl_loading import load_processor

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torchvision") is not None,
    reason="torchvision is installed: AutoProcessor works",
)


def test_a_processor_built_without_video_is_said_in_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = build_tiny_qwen2_vl(tmp_path / "tiny")
    with caplog.at_level(logging.INFO, logger="vrag_desktop.core.embedders.qwen_vl_loading"):
        processor = load_processor(model, "qwen2_vl")
    assert processor.image_processor is not None
    notes = [r.getMessage() for r in caplog.records if "without a video processor" in r.getMessage()]
    assert len(notes) == 1, caplog.text
    note = notes[0]
    assert "\n" not in note, note
    assert "Torchvision" in note  # what is missing, still named
    assert "restart your runtime" not in note and "installation page" not in note, note
