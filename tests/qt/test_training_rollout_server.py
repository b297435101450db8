"""The New-run dialog's rollout server (``vllm_mode: app_server``): choosing the app's vLLM server for
the rollouts says whether it runs with what the run needs and offers one button that starts it
through the Runtime dock's own vLLM section with the run's flags (tests/fake_vllm_server.py stands
in for vLLM, as in test_training_serve.py, and reports the command line it was given); a server
running without them is named and restarted; the run's URL follows the server. Bad inputs: LoRA
off (refused on the Rollouts row), the server not running (Start is off, saying so)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from qt.test_training_new_run import _dataset, _dialog, _fake_env, _model, no_trainer_env  # noqa: F401
from vrag_desktop.core.runtime.settings import ENTRYPOINT_ENV
from vrag_desktop.core.runtime.supervisor import ProcessStatus
from vrag_desktop.qt.runtime.runtime_panel import RuntimePanel
from vrag_desktop.qt.training.new_run_dialog import NewRunDialog

pytestmark = pytest.mark.skipif(os.name != "posix", reason="process groups are POSIX here")

FAKE = Path(__file__).resolve().parents[1] / "fake_vllm_server.py"
WAIT = 20000


@pytest.fixture
def runtime(qtbot: Any, ctx: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[RuntimePanel]:
    """The Runtime dock's panel as the app's top-level widget, its vLLM the fake server."""
    monkeypatch.setenv(ENTRYPOINT_ENV, f"{FAKE} --fake-delay 0.3")
    panel = RuntimePanel(ctx)
    qtbot.addWidget(panel)
    panel.vllm.python_edit.setText(sys.executable)
    yield panel
    assert panel.shutdown(10.0)


def _app_server(qtbot: Any, ctx: Any, tmp_path: Path, model: Path | None = None) -> NewRunDialog:
    """The dialog on a dataset and a model, LoRA on, rollouts from the app's server."""
    _fake_env(ctx)
    _dataset(ctx, "atlas", ["robots.pdf"])
    dlg = _dialog(qtbot, ctx, str(model or _model(tmp_path)), judge=None)
    dlg.form.judge_kind.setCurrentIndex(dlg.form.judge_kind.findData("exact"))
    dlg.form.fields["lora.enabled"].setChecked(True)  # type: ignore[attr-defined]
    dlg.form.rollouts.setCurrentIndex(dlg.form.rollouts.findData("app_server"))
    return dlg


def test_the_rollout_server_is_started_from_the_dialog_with_the_runs_flags(
    qtbot: Any, ctx: Any, runtime: RuntimePanel, tmp_path: Path
) -> None:
    dlg = _app_server(qtbot, ctx, tmp_path)
    box, section = dlg.rollout_box, runtime.vllm
    assert box.isVisible() and box.button.isVisible() and box.button.text() == "Start the rollout server"
    assert box.label.text() == "The rollout server (the app's vLLM server) is not running."
    assert "the rollout server (the app's vLLM server) is not running" in dlg.blockers()
    assert not dlg.ok_button.isEnabled()
    assert "needs the running vLLM server's URL" in dlg.form.error_text("vllm_mode")

    box.button.click()
    assert section.server is not None  # started by the Runtime dock's own section
    qtbot.waitUntil(lambda: section.status is ProcessStatus.READY, timeout=WAIT)
    qtbot.waitUntil(
        lambda: dlg.config is not None and dlg.config.vllm_url == section.server.base_url, timeout=WAIT
    )
    cfg = dlg.config
    assert cfg is not None and (cfg.generator, cfg.vllm_mode) == ("vllm", "app_server")
    server = section.server.config
    assert server.model == cfg.model and server.runtime_lora and server.scale_out
    assert server.max_lora_rank == 16 == cfg.lora.rank
    assert server.max_model_len == cfg.max_model_len and server.limit_mm_per_prompt == {
        "image": cfg.max_images
    }
    argv = server.build_command(section.server.port)
    i = argv.index("--enable-lora")
    assert argv[i : i + 3] == ["--enable-lora", "--max-lora-rank", "16"] and "--enable-scale-out" in argv
    assert server.child_env()["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"
    assert not box.button.isVisible() and box.problem is None
    assert box.label.text().startswith(f"Rollouts: the app's vLLM server at {section.server.base_url}")
    assert not any("rollout server" in b for b in dlg.blockers()), dlg.blockers()
    assert f'"vllm_url": "{section.server.base_url}"' in dlg.preview.toPlainText()


def test_a_server_running_without_the_flags_is_named_and_restarted_with_them(
    qtbot: Any, ctx: Any, runtime: RuntimePanel, tmp_path: Path
) -> None:
    section = runtime.vllm
    model = _model(tmp_path)
    section.model_edit.setText(str(model))
    assert section.start()  # the Runtime dock's plain start: no runtime LoRA, no scale-out
    qtbot.waitUntil(lambda: section.status is ProcessStatus.READY, timeout=WAIT)
    first = section.server
    dlg = _app_server(qtbot, ctx, tmp_path, model)
    box = dlg.rollout_box
    problem = box.problem or ""
    assert problem.startswith("the running vLLM server cannot serve this run's rollouts")
    assert "cannot load adapters while it runs" in problem and "--enable-scale-out" in problem
    assert problem in dlg.blockers() and not dlg.ok_button.isEnabled()
    assert box.button.text() == "Restart the rollout server for this run"

    box.button.click()  # stops the plain server, then starts it with the run's flags
    qtbot.waitUntil(
        lambda: section.server is not first and section.status is ProcessStatus.READY, timeout=WAIT
    )
    qtbot.waitUntil(lambda: box.problem is None, timeout=WAIT)
    assert section.server is not None and section.server.config.runtime_lora
    assert dlg.config is not None and dlg.config.vllm_url == section.server.base_url


def test_lora_off_is_refused_on_the_rollouts_row(
    qtbot: Any, ctx: Any, runtime: RuntimePanel, tmp_path: Path
) -> None:
    """The server serves adapters it is sent after each step: full fine-tuning cannot use it."""
    dlg = _app_server(qtbot, ctx, tmp_path)
    dlg.rollout_box.button.click()
    qtbot.waitUntil(lambda: dlg.config is not None, timeout=WAIT)  # the server runs, the run is valid
    dlg.form.fields["lora.enabled"].setChecked(False)  # type: ignore[attr-defined]
    error = dlg.form.error_text("vllm_mode")
    assert "app_server loads the trained LoRA adapter" in error and "lora.enabled" in error, error
    assert dlg.config is None and not dlg.ok_button.isEnabled()
