"""Serve… in the Training dock's run view: the Runtime dock's own vLLM section starts the run's export
(tests/fake_vllm_server.py stands in for vLLM, as in test_runtime_panel.py) and an endpoint profile
named after the run points at it once the server is ready; plus the bad inputs (nothing to serve:
the button is off; an export that is not a model, only a checkpoint → export first, the vLLM
environment missing, vLLM crashing at start: the classified reason shown and no profile left)."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from toy_training import make_export

from vrag_desktop.core.endpoints.profiles import LOCAL_VLLM, ProfileError
from vrag_desktop.core.runtime.settings import ENTRYPOINT_ENV
from vrag_desktop.core.runtime.supervisor import ProcessStatus
from vrag_desktop.core.training.rundir import TrainRun
from vrag_desktop.qt.context import AppContext
from vrag_desktop.qt.runtime.runtime_panel import RuntimePanel
from vrag_desktop.qt.training import run_serving
from vrag_desktop.qt.training.run_view import RunView

pytestmark = pytest.mark.skipif(os.name != "posix", reason="process groups are POSIX here")

FAKE = Path(__file__).resolve().parents[1] / "fake_vllm_server.py"
S = ProcessStatus


@pytest.fixture
def runtime(qtbot: Any, ctx: AppContext) -> Iterator[RuntimePanel]:
    panel = RuntimePanel(ctx)
    qtbot.addWidget(panel)
    yield panel
    assert panel.shutdown(10.0)


@pytest.fixture
def view(qtbot: Any, runtime: RuntimePanel) -> Iterator[RunView]:
    v = RunView()
    qtbot.addWidget(v)
    v.runtime_panel = runtime
    yield v
    v.shutdown()


def use_fake_vllm(runtime: RuntimePanel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENTRYPOINT_ENV, f"{FAKE} --fake-delay 0.3")
    runtime.vllm.python_edit.setText(sys.executable)


def test_serve_starts_the_runtime_vllm_on_the_export_and_adds_a_profile(
    qtbot: Any,
    ctx: AppContext,
    runtime: RuntimePanel,
    view: RunView,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    use_fake_vllm(runtime, monkeypatch)
    root = tmp_path / "grpo tiny"
    export = make_export(root)
    view.set_run(root)
    v = runtime.vllm
    qtbot.waitUntil(view.serve_button.isEnabled, timeout=5000)  # the poll found the export
    assert view.serve_button.text() == "Serve…"
    with qtbot.waitSignal(runtime.profilesChanged, timeout=20000):
        view.serve_button.click()
        # the Runtime section's own start path got the run's model folder and served name
        assert v.model_edit.text() == str(export) and v.served_edit.text() == "grpo-tiny"
        assert v.busy and v.server is not None and v.server.config.model == str(export)
        assert "grpo tiny" not in ctx.profiles.names()  # not before the server is ready
        assert "added once it is ready" in view.detail.text()
    assert v.status is S.READY
    profile = ctx.profiles.get("grpo tiny")
    assert (profile.kind, profile.base_url, profile.model) == ("local-vllm", v.server.base_url, "grpo-tiny")
    assert "grpo tiny" in runtime.editor.store.names()
    assert "Serving" in view.detail.text()
    qtbot.waitUntil(lambda: v.status is S.READY, timeout=20000)
    qtbot.waitUntil(lambda: ctx.profiles.get(LOCAL_VLLM).model == "grpo-tiny", timeout=5000)
    assert ctx.profiles.get("grpo tiny").base_url == v.server.base_url
    # a second Serve of the same run while it is served only re-points the profile
    assert view.serve()
    # another run while the server is busy is refused with a clear message
    other = tmp_path / "other"
    make_export(other)
    view.set_run(other)
    assert not view.serve()
    assert "busy with grpo-tiny" in view.detail.text()
    with pytest.raises(ProfileError):
        ctx.profiles.get("other")


def test_nothing_to_serve_and_an_export_that_is_not_a_model_are_explained(
    qtbot: Any, ctx: AppContext, runtime: RuntimePanel, view: RunView, tmp_path: Path
) -> None:
    (tmp_path / "empty").mkdir()
    view.set_run(tmp_path / "empty")
    qtbot.waitUntil(lambda: not view._polling.running, timeout=5000)  # the first poll is shown
    qtbot.wait(50)
    assert not view.serve_button.isEnabled()  # nothing to serve: off, and its tooltip says why
    assert "no exported model and no complete checkpoint" in view.serve_button.toolTip()
    assert not view.serve()
    assert "no exported model and no complete checkpoint" in view.detail.text()
    broken = tmp_path / "broken"
    TrainRun(broken).export_dir.mkdir(parents=True)
    view.set_run(broken)
    qtbot.waitUntil(view.serve_button.isEnabled, timeout=5000)  # an export is there: on
    view.serve_button.click()
    assert "not a model folder" in view.detail.text()
    assert not runtime.vllm.busy and runtime.vllm.model_edit.text() == ""
    assert "broken" not in ctx.profiles.names()


def test_only_a_checkpoint_is_exported_first_then_served(
    qtbot: Any,
    ctx: AppContext,
    runtime: RuntimePanel,
    view: RunView,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    use_fake_vllm(runtime, monkeypatch)
    run = TrainRun(tmp_path / "ckpt-run")
    run.checkpoint_dir(3).mkdir(parents=True)
    run.mark_complete(run.checkpoint_dir(3), 3)
    view.set_run(run.root)
    qtbot.waitUntil(view.serve_button.isEnabled, timeout=5000)  # a complete checkpoint: on
    monkeypatch.setattr(run_serving, "ask_export", lambda *_a: False)
    view.serve_button.click()
    assert "export checkpoint 3 first" in view.detail.text() and not runtime.vllm.busy

    asked: list[Path] = []

    def exporting(root: Path) -> None:  # what the Training panel's Export does, in short
        asked.append(root)
        view.set_busy(False, ours=True)

    view.exportRequested.connect(exporting)
    monkeypatch.setattr(run_serving, "ask_export", lambda *_a: True)
    view.serve_button.click()
    assert asked == [run.root] and "served once the export is written" in view.detail.text()
    view.poll_now()
    qtbot.wait(200)
    assert not runtime.vllm.busy  # still exporting
    make_export(run.root)
    view.set_busy(False, ours=False)  # the export ended
    qtbot.waitUntil(lambda: runtime.vllm.busy, timeout=5000)
    assert runtime.vllm.model_edit.text() == str(run.export_dir)
    qtbot.waitUntil(lambda: "ckpt-run" in ctx.profiles.names(), timeout=20000)
    assert ctx.profiles.get("ckpt-run").model == "ckpt-run"


def test_without_the_vllm_environment_the_runtime_dock_says_so(
    qtbot: Any,
    ctx: AppContext,
    runtime: RuntimePanel,
    view: RunView,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here")
    monkeypatch.delenv(ENTRYPOINT_ENV, raising=False)
    runtime.vllm.python_edit.setText(sys.executable)
    root = tmp_path / "run-x"
    make_export(root)
    view.set_run(root)
    qtbot.waitUntil(view.serve_button.isEnabled, timeout=5000)
    view.serve_button.click()
    v = runtime.vllm
    qtbot.waitUntil(lambda: not v.busy, timeout=20000)
    assert v.status_head.text() == "Could not start: vLLM not installed"
    qtbot.waitUntil(lambda: "could not serve run-x" in view.detail.text(), timeout=5000)
    assert (
        "vLLM not installed" in view.detail.text() and "No endpoint profile was added" in view.detail.text()
    )
    assert "run-x" not in ctx.profiles.names()


def test_vllm_crashing_at_start_shows_its_reason_and_leaves_no_profile(
    qtbot: Any,
    ctx: AppContext,
    runtime: RuntimePanel,
    view: RunView,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv(ENTRYPOINT_ENV, f"{FAKE} --fake-mode oom --fake-delay 0.3")
    runtime.vllm.python_edit.setText(sys.executable)
    root = tmp_path / "oom-run"
    make_export(root)
    view.set_run(root)
    qtbot.waitUntil(view.serve_button.isEnabled, timeout=5000)
    before = set(ctx.profiles.names())
    assert view.serve()
    v = runtime.vllm
    qtbot.waitUntil(lambda: "could not serve oom-run" in view.detail.text(), timeout=20000)
    assert not v.busy and v.status is S.CRASHED
    assert "Crashed: out of GPU memory" in view.detail.text()
    assert "No endpoint profile was added" in view.detail.text()
    assert set(ctx.profiles.names()) == before and "oom-run" not in runtime.editor.store.names()
    # the button stays usable: once the cause is fixed, Serve again works
    assert view.serve_button.isEnabled()
