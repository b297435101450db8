"""The Models view with real parts: the catalogue with its fit verdicts, downloads from the fake hub
on loopback (progress, pause and resume after a "restart", cancel, a wrong checksum, a 404), delete,
a local folder, offline mode, and Serve… into the Runtime panel's Local vLLM server. Never the
internet; blocking dialogs replaced as the corpora panel's tests do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_hub import FakeHub
from models_support import BIG, drain, online, tiny_files

from vrag_desktop.core.endpoints.profiles import LOCAL_VLLM
from vrag_desktop.core.models import (
    Machine,
    ModelSettings,
    ModelStore,
    catalogue,
    load_settings,
    pull,
    update_settings,
)
from vrag_desktop.core.runtime.gpu import GiB, GPUInfo, GPUReport
from vrag_desktop.core.runtime.settings import load_vllm_settings, save_vllm_settings
from vrag_desktop.qt.context import AppContext
from vrag_desktop.qt.main_window import MainWindow
from vrag_desktop.qt.models.models_view import ModelsView
from vrag_desktop.qt.models.texts import VERDICT_TEXT, eta_text, progress_text

__all__ = ["online"]  # the fixture, used by name

REPO = "tiny-org/tiny-model"
H200 = GPUReport((GPUInfo(0, "NVIDIA H200", 141 * GiB, 139 * GiB),), "560", "12.8")
NO_GPU = GPUReport(error="no NVIDIA driver")


def machine(gpus: GPUReport = H200) -> Any:
    return lambda root: Machine(gpus, 64 * GiB, 60 * GiB, int(500e9), Path(root))


@pytest.fixture
def make_view(qtbot: Any, ctx: AppContext) -> Any:
    """A shown Models view on ``ctx`` (an H200 machine unless told), its dialogs answered yes."""
    made: list[ModelsView] = []

    def make(gpus: GPUReport = H200, context: AppContext | None = None) -> ModelsView:
        view = ModelsView(context or ctx)
        view.downloads.probe = machine(gpus)
        view.confirm = lambda _title, _text: True
        qtbot.addWidget(view)
        view.resize(1000, 780)
        with qtbot.waitSignal(view.listed, timeout=10_000):
            view.show()
        made.append(view)
        return view

    yield make
    for view in made:
        assert view.downloads.shutdown(10)


def _serve_hub(hub: FakeHub, ctx: AppContext, **files: bytes) -> dict[str, bytes]:
    content = tiny_files(**files) if files else tiny_files()
    hub.repo(REPO).commit(content)
    update_settings(ctx.layout, endpoint=hub.url)
    return content


def _download(qtbot: Any, view: ModelsView, spec: str = REPO) -> None:
    view.id_edit.setText(spec)
    view.id_button.click()


def _line(view: ModelsView, spec: str = REPO) -> str:
    card = view.card(spec)
    return card.line.text() if card is not None and card.line.isVisibleTo(card) else ""


def _state(view: ModelsView, spec: str = REPO) -> str:
    card = view.card(spec)
    return card.row.state if card is not None else ""


# ---------------------------------------------------------------- the words


def test_progress_line_says_bytes_speed_time_left_and_file() -> None:
    from vrag_desktop.core.models import DownloadProgress

    p = DownloadProgress("download", 3_200_000_000, 16_600_000_000, 45e6, 298, "", repo_id=REPO,
                         file="model-00002.safetensors", files_done=1, files_total=5)  # fmt: skip
    assert (
        progress_text(p)
        == "3.2 GB of 16.6 GB · 45.0 MB/s · 5 min left · model-00002.safetensors · file 2 of 5"
    )
    assert eta_text(40) == "40 s left" and eta_text(4800) == "1 h 20 min left" and eta_text(None) == ""
    check = DownloadProgress("verify", 10, 20, file="model.safetensors", files_total=1)
    assert progress_text(check) == "10 B of 20 B · checking model.safetensors"


# ---------------------------------------------------------------- the list


def test_the_catalogue_is_listed_with_sizes_licences_and_fit_for_this_machine(make_view: Any) -> None:
    view = make_view(H200)
    assert "NVIDIA H200" in view.machine.text() and "free for models" in view.machine.text()
    answers = [e for e in catalogue() if e.kind == "answer"]
    embedders = [e for e in catalogue() if e.kind == "embedder"]
    assert view.tabs.tabText(0) == f"Answer models ({len(answers)})"
    assert view.tabs.tabText(1) == f"Embedders ({len(embedders)})"
    rerankers = [e for e in catalogue() if e.kind == "reranker"]
    assert rerankers and view.tabs.tabText(2) == f"Rerankers ({len(rerankers)})"
    for entry in catalogue():
        card = view.card(entry.id)
        assert card is not None, entry.id
        assert view.lists[entry.kind].indexOf(card) >= 0  # in its own section
        assert card.fit.text() in VERDICT_TEXT.values() and "•" in card.fit.toolTip()
        if not entry.builtin:
            assert f"{entry.size_text} download" in card.details.text() and "licence:" in card.details.text()
            assert card.state.text() == "Not downloaded" and card.download_button.isVisibleTo(card)
    vrag = view.card("autumncc/Qwen2.5-VL-7B-VRAG")
    assert vrag is not None and vrag.fit.text() == "Fits this machine" and vrag.fit.property("chip") == "ok"
    assert "vLLM needs" in vrag.fit.toolTip() and vrag.recommended.isVisibleTo(vrag)
    big = view.card("Qwen/Qwen2.5-VL-72B-Instruct")
    assert big is not None and big.fit.text() == "Does not fit" and big.fit.property("chip") == "error"
    minilm = view.card("minilm")
    assert minilm is not None and minilm.state.text() == "Built in"
    assert not minilm.download_button.isVisibleTo(minilm) and not minilm.delete_button.isVisibleTo(minilm)
    assert minilm.in_use.text() == "Embedder for new corpora" and not minilm.use_button.isVisibleTo(minilm)


def test_without_a_gpu_the_verdicts_say_so(make_view: Any) -> None:
    view = make_view(NO_GPU)
    assert "no NVIDIA GPU" in view.machine.text()
    vrag = view.card("autumncc/Qwen2.5-VL-7B-VRAG")
    assert vrag is not None and vrag.fit.text() == "Does not fit"
    assert "no NVIDIA GPU, so vLLM cannot serve it" in vrag.fit.toolTip()


# ---------------------------------------------------------------- downloads


def test_a_download_shows_progress_then_is_downloaded_and_served_from_the_runtime_panel(
    qtbot: Any, ctx: AppContext, online: FakeHub
) -> None:
    files = _serve_hub(online, ctx, weights=BIG)
    online.throttle["model.safetensors"] = 40 * 1024 * 1024
    w = MainWindow(ctx, first_run=False)
    qtbot.addWidget(w)
    w.show()
    view = w.models.open()
    view.downloads.probe = machine()
    qtbot.waitUntil(lambda: view.listing is not None, timeout=10_000)
    lines: list[str] = []
    view.downloads.progress.connect(lambda _k, _p: lines.append(_line(view)))
    _download(qtbot, view)
    card = view.card(REPO)
    assert card is not None and card.title.text() == f"<b>{REPO}</b>"  # a row of its own at once
    qtbot.waitUntil(lambda: any(" MB/s" in t and "model.safetensors" in t for t in lines), timeout=15_000)
    assert w.models.badge.isVisible() and "tiny-model" in w.models.badge.text()
    assert card.pause_button.isVisible() and card.cancel_button.isVisible() and card.bar.isVisible()
    qtbot.waitUntil(lambda: _state(view) == "downloaded", timeout=20_000)
    card = view.card(REPO)
    assert card is not None and card.state.text().startswith("Downloaded · ")
    assert "every file checked" in _line(view) and card.line.property("role") == "ok"
    assert not card.bar.isVisible() and not w.models.badge.isVisible()
    folder = ModelStore(ctx.layout).downloaded_path(REPO)
    assert folder is not None and (folder / "model.safetensors").read_bytes() == files["model.safetensors"]

    card.use_button.click()  # Serve…: the Runtime panel's Local vLLM server, ready to start
    runtime = w.runtime
    assert card.use_button.text() == "Serve…"
    assert runtime.vllm.model_edit.text() == REPO and runtime.vllm.served_edit.text() == ""
    assert w.runtime_dock.isVisible() and runtime.tabs.tabText(runtime.tabs.currentIndex()) == "Local vLLM"
    assert load_vllm_settings(ctx.data_dir)[0].model == REPO  # Start serves it from the models folder
    cfg = load_vllm_settings(ctx.data_dir)[0].to_config(ctx.data_dir)
    assert cfg.model == str(folder) and cfg.model_name == REPO
    assert "press Start there" in view.notice.text()
    assert card.in_use.text() == "Set in Local vLLM"
    w.models.shutdown()


def test_pause_then_resume_after_a_restart(
    qtbot: Any, ctx: AppContext, online: FakeHub, make_view: Any
) -> None:
    files = _serve_hub(online, ctx, weights=BIG)
    online.throttle["model.safetensors"] = 12 * 1024 * 1024
    view = make_view()
    _download(qtbot, view)
    dl = view.downloads
    qtbot.waitUntil(
        lambda: (
            dl.active is not None and dl.active.progress is not None and dl.active.progress.done > 4_000_000
        ),
        timeout=15_000,
    )
    card, other = view.card(REPO), view.card("autumncc/Qwen2.5-VL-7B-VRAG")
    assert card is not None and other is not None
    assert (
        not other.download_button.isEnabled() and "One download at a time" in other.download_button.toolTip()
    )
    card.pause_button.click()
    qtbot.waitUntil(lambda: not dl.busy and _state(view) == "partial", timeout=15_000)
    card = view.card(REPO)
    assert card is not None and card.state.text().startswith("Paused · ")
    assert "Paused:" in _line(view) and card.download_button.text() == "Resume" and card.bar.isVisible()
    partial = ModelStore(ctx.layout).partials()
    assert len(partial) == 1 and 0 < partial[0].have_bytes < partial[0].total_bytes
    kept = (partial[0].path / "model.safetensors.incomplete").stat().st_size

    again = make_view()  # the app started again: the partial download is there to resume
    card = again.card(REPO)
    assert card is not None and card.row.state == "partial" and card.download_button.text() == "Resume"
    assert card.line.text() == "Paused. Resume continues from what is here."
    online.throttle.clear()
    requests = len(online.requests)
    card.download_button.click()
    qtbot.waitUntil(lambda: _state(again) == "downloaded", timeout=20_000)
    folder = ModelStore(ctx.layout).downloaded_path(REPO)
    assert folder is not None and (folder / "model.safetensors").read_bytes() == files["model.safetensors"]
    assert f"bytes={kept}-" in online.ranges("model.safetensors")  # continued from what was kept
    assert len(online.requests) > requests


def test_cancel_stops_and_deletes_the_partial_download(
    qtbot: Any, ctx: AppContext, online: FakeHub, make_view: Any
) -> None:
    _serve_hub(online, ctx, weights=BIG)
    online.throttle["model.safetensors"] = 12 * 1024 * 1024
    view = make_view()
    asked: list[str] = []
    view.confirm = lambda _t, text: asked.append(text) or True
    _download(qtbot, view)
    dl = view.downloads
    qtbot.waitUntil(
        lambda: (
            dl.active is not None and dl.active.progress is not None and dl.active.progress.done > 4_000_000
        ),
        timeout=15_000,
    )
    card = view.card(REPO)
    assert card is not None
    card.cancel_button.click()
    assert asked and "Pause keeps them" in asked[0]
    qtbot.waitUntil(lambda: "Download cancelled" in _line(view), timeout=20_000)
    assert not ModelStore(ctx.layout).partials() and not ModelStore(ctx.layout).partial_folder(REPO).exists()
    assert ModelStore(ctx.layout).downloaded_path(REPO) is None


def test_a_wrong_checksum_and_a_missing_repo_say_the_cores_sentence_in_the_row(
    qtbot: Any, ctx: AppContext, online: FakeHub, make_view: Any
) -> None:
    _serve_hub(online, ctx, weights=200_000)
    online.corrupt["model.safetensors"] = bytes(200_000)
    view = make_view()
    _download(qtbot, view)
    qtbot.waitUntil(lambda: "failed its checksum" in _line(view), timeout=15_000)
    card = view.card(REPO)
    assert card is not None and card.line.property("role") == "error" and "discarded" in card.line.text()
    assert ModelStore(ctx.layout).downloaded_path(REPO) is None and not view.downloads.busy
    _download(qtbot, view, "tiny-org/nope")
    qtbot.waitUntil(lambda: "No model 'tiny-org/nope'" in _line(view, "tiny-org/nope"), timeout=15_000)
    assert "check the id" in _line(view, "tiny-org/nope")


def test_offline_mode_refuses_every_download_with_its_reason(
    qtbot: Any, ctx: AppContext, online: FakeHub, make_view: Any
) -> None:
    _serve_hub(online, ctx)
    view = make_view()
    assert not view.offline.isVisible()
    view.tabs.setCurrentIndex(view.tabs.count() - 1)  # Hub and offline, the last tab
    view.settings_box.offline_check.setChecked(True)  # Hub and offline → Offline
    qtbot.waitUntil(lambda: load_settings(ctx.layout).offline and view.offline.isVisible(), timeout=5000)
    assert "offline mode is on" in view.offline_label.text()
    before = len(online.requests)
    vrag = view.card("autumncc/Qwen2.5-VL-7B-VRAG")
    assert vrag is not None
    vrag.download_button.click()
    qtbot.waitUntil(lambda: "offline mode is on" in _line(view, "autumncc/Qwen2.5-VL-7B-VRAG"), timeout=5000)
    assert _line(view, "autumncc/Qwen2.5-VL-7B-VRAG").startswith("Cannot look up autumncc/Qwen2.5-VL-7B-VRAG")
    assert len(online.requests) == before  # nothing went to the network
    view.online_button.click()
    qtbot.waitUntil(
        lambda: not load_settings(ctx.layout).offline and not view.offline.isVisible(), timeout=5000
    )


def test_hub_settings_keep_the_token_in_the_keyring_and_never_show_it(
    qtbot: Any, ctx: AppContext, make_view: Any, qt_isolation: Any
) -> None:
    from vrag_desktop.core.endpoints.profiles import KEYRING_SERVICE
    from vrag_desktop.core.models.settings import TOKEN_USERNAME

    view = make_view()
    box = view.settings_box
    box.endpoint_edit.setText("ftp://mirror")
    box.endpoint_button.click()
    assert "must be an http(s) URL" in box.message.text()
    box.endpoint_edit.setText("https://hf-mirror.example/")
    box.endpoint_button.click()
    qtbot.waitUntil(lambda: load_settings(ctx.layout).endpoint == "https://hf-mirror.example", timeout=5000)
    box.token_edit.setText("hf_secret_42")
    box.token_button.click()
    assert box.token_edit.text() == ""
    qtbot.waitUntil(lambda: box.token_state.text() == "A token is saved in the system keyring.", timeout=5000)
    assert qt_isolation.store[(KEYRING_SERVICE, TOKEN_USERNAME)] == "hf_secret_42"
    assert "hf_secret_42" not in (ctx.layout.config / "models.json").read_text()
    box.forget_button.click()
    qtbot.waitUntil(lambda: box.token_state.text().startswith("No token saved"), timeout=5000)


# ---------------------------------------------------------------- the models folder


def test_delete_asks_then_removes_the_files(
    qtbot: Any, ctx: AppContext, online: FakeHub, make_view: Any
) -> None:
    _serve_hub(online, ctx)
    drain(pull(ctx.layout, REPO, settings=ModelSettings(endpoint=online.url)))
    folder = ModelStore(ctx.layout).downloaded_path(REPO)
    assert folder is not None
    view = make_view()
    card = view.card(REPO)
    assert card is not None and card.state.text().startswith("Downloaded") and card.delete_button.isVisible()
    view.confirm = lambda _t, _x: False
    card.delete_button.click()
    assert folder.exists()  # "no" keeps it
    view.confirm = lambda _t, _x: True
    card.delete_button.click()
    qtbot.waitUntil(lambda: view.card(REPO) is None, timeout=5000)
    assert not folder.exists() and view.notice.text().startswith(f"Removed {REPO} (")


def test_a_folder_that_is_not_a_model_gets_the_cores_message_and_a_model_folder_is_listed(
    qtbot: Any, make_view: Any, tmp_path: Path
) -> None:
    view = make_view()
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    view.choose_folder = lambda: str(empty)
    view.add_button.click()
    qtbot.waitUntil(lambda: "no config.json" in view.notice.text(), timeout=5000)
    assert view.notice.property("role") == "error" and view.notice.text().startswith(str(empty))
    model = tmp_path / "my-embedding-model"
    model.mkdir()
    for name, data in tiny_files().items():
        (model / name).write_bytes(data)
    view.choose_folder = lambda: str(model)
    view.add_button.click()
    qtbot.waitUntil(lambda: view.card(str(model.resolve())) is not None, timeout=5000)
    card = view.card(str(model.resolve()))
    assert (
        card is not None
        and card.state.text().startswith("Your folder")
        and view.lists["embedder"].indexOf(card) >= 0
    )
    card.delete_button.click()  # forgets the folder, keeps its files
    qtbot.waitUntil(lambda: view.card(str(model.resolve())) is None, timeout=5000)
    assert (model / "config.json").is_file()


def test_an_embedder_is_chosen_for_new_corpora(
    qtbot: Any, ctx: AppContext, online: FakeHub, make_view: Any
) -> None:
    name = "tiny-org/tiny-gve-embedder"
    online.repo(name).commit(tiny_files())
    update_settings(ctx.layout, endpoint=online.url)
    drain(pull(ctx.layout, name, settings=ModelSettings(endpoint=online.url)))
    view = make_view()
    card = view.card(name)
    assert (
        card is not None and card.row.kind == "embedder" and card.use_button.text() == "Use for new corpora"
    )
    card.use_button.click()
    assert ctx.settings.embedder == name
    assert json.loads((ctx.config_dir / "settings.json").read_text())["embedder"] == name
    assert card.in_use.text() == "Embedder for new corpora" and not card.use_button.isVisibleTo(card)
    assert "existing corpora keep the embedder" in card.line.text()
    minilm = view.card("minilm")
    assert (
        minilm is not None and not minilm.in_use.isVisibleTo(minilm) and minilm.use_button.isVisibleTo(minilm)
    )
    minilm.use_button.click()  # back to the built-in one
    assert ctx.settings.embedder == "minilm" and card.use_button.isVisibleTo(card)


# ---------------------------------------------------------------- the way there


def test_ask_says_the_local_model_is_not_downloaded_and_leads_to_its_row(
    qtbot: Any, ctx: AppContext, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # nothing in Hugging Face's cache either
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    settings = load_vllm_settings(ctx.data_dir)[0]
    settings.model = REPO
    save_vllm_settings(settings, ctx.data_dir)
    ctx.profiles.set_active(LOCAL_VLLM)
    w = MainWindow(ctx, first_run=False)
    qtbot.addWidget(w)
    w.show()
    bar = w.ask.readiness_bar
    qtbot.waitUntil(
        lambda: bar.reason() == f"⚠ The local model {REPO} is not downloaded yet.", timeout=10_000
    )
    assert bar.button.text() == "Download it…" and not w.ask.send_button.isEnabled()
    bar.button.click()
    view = w.models.view
    assert view is not None and view.isVisible()
    qtbot.waitUntil(lambda: view.card(REPO) is not None, timeout=10_000)
    card = view.card(REPO)
    assert card is not None and card.download_button.isVisible() and view.tabs.currentIndex() == 0
    w.models.shutdown()
