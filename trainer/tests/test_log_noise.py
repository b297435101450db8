"""The run's log says what the run does, not every HTTP request its rollouts make: httpx logs each
search of the served corpora at INFO ("HTTP Request: POST …/search "HTTP/1.1 200 OK""), a line per
turn that buried the steps in the Training dock's Log (issue 31's walk-through, item 7). Its
warnings still show, and the levels are given back when the run ends."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from vrag_trainer import runner

from vrag_desktop.core.training.rundir import TrainRun


def test_the_run_log_leaves_out_httpx_requests_but_keeps_its_warnings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VRAG_TRAINER_LOG_CAPTURED", raising=False)
    run = TrainRun(tmp_path / "run")
    before = {name: logging.getLogger(name).level for name in ("httpx", "httpcore")}
    with runner._logging_to(run):
        logging.getLogger("httpx").info('HTTP Request: POST http://127.0.0.1:1/search "HTTP/1.1 200 OK"')
        logging.getLogger("httpcore.connection").info("connect_tcp.started host='127.0.0.1'")
        logging.getLogger("httpx").warning("a real warning still shows")
        logging.getLogger("vrag_trainer").info("finished at step 1")
    text = run.log_path.read_text(encoding="utf-8")
    assert "finished at step 1" in text
    assert "a real warning still shows" in text
    assert "HTTP Request" not in text, text
    assert "connect_tcp" not in text, text
    assert {name: logging.getLogger(name).level for name in ("httpx", "httpcore")} == before


@pytest.mark.parametrize("checkpointing", [True, False])
def test_the_trl_arguments_raise_no_deprecation_warning(tmp_path: Path, checkpointing: bool) -> None:
    """TRL's configs default ``gradient_checkpointing`` (transformers' deprecated name) to True, so
    transformers warned "`gradient_checkpointing` is deprecated … Use `activation_checkpointing`" in
    every run's log; the arguments now set both, and checkpointing still follows the config."""
    import warnings

    from vrag_trainer.sft import sft_args
    from vrag_trainer.trl_trainer import grpo_args

    from vrag_desktop.core.training.config import TrainConfig

    cfg = TrainConfig(model="m", dataset="d", gradient_checkpointing=checkpointing)
    for build in (grpo_args, sft_args):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            args = build(cfg, str(tmp_path), use_cpu=True, bf16=False, logging_dir=None)
        said = [str(w.message) for w in seen if "checkpointing" in str(w.message)]
        assert said == [], said
        assert args.gradient_checkpointing is checkpointing
        assert args.activation_checkpointing is checkpointing
