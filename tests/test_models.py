"""Models as part of the app (issue 28): the catalogue and its fit verdicts, the models folder,
downloads from a real (fake) hub on loopback — revisions, resume after a dropped connection or a
pause, checksums, 404, gated repos, a full disk, offline mode — never the internet."""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path

import pytest
from doubles import tmpfs
from fake_hub import FakeHub, sha256
from models_support import BIG, drain, online, sha256_file, tiny_files

from vrag_desktop.core.models import (
    AccessError,
    ChecksumError,
    DiskSpaceError,
    DownloadProgress,
    Machine,
    ModelBusyError,
    ModelError,
    ModelNotFoundError,
    ModelSettings,
    ModelStore,
    NetworkError,
    NotAModelError,
    OfflineError,
    Verdict,
    catalogue,
    check_model_folder,
    find_entry,
    fits,
    inspect_remote,
    list_models,
    pull,
    set_token,
)
from vrag_desktop.core.paths import DataLayout
from vrag_desktop.core.progress import CancelToken
from vrag_desktop.core.runtime.gpu import GiB, GPUInfo, GPUReport

__all__ = ["online"]  # the fixture, used by name

REPO = "tiny-org/tiny-model"


def _layout(tmp_path: Path) -> DataLayout:
    return DataLayout(tmp_path / "data")


def _settings(hub: FakeHub, **kw: object) -> ModelSettings:
    return ModelSettings(endpoint=hub.url, **kw)  # type: ignore[arg-type]


def _machine(gpus: tuple[int, ...] = (), ram_gib: float = 24, disk_gb: float = 500) -> Machine:
    report = GPUReport(
        tuple(GPUInfo(i, f"GPU{i}", int(g * GiB), int(g * GiB)) for i, g in enumerate(gpus)),
        error=None if gpus else "no NVIDIA driver",
    )
    return Machine(report, int(ram_gib * GiB), int(ram_gib * GiB), int(disk_gb * 1e9), Path("/models"))


# ---------------------------------------------------------------- catalogue and fit


def test_catalogue_names_the_originals_models_with_sizes_from_their_architecture() -> None:
    from vrag_desktop.core.embedders.qwen_vl import GVEEmbedder, Qwen3VLEmbedder
    from vrag_desktop.core.embedders.qwen_vl_inputs import GVE_FAMILY, QWEN3_VL_FAMILY, detect_family

    ids = {e.id: e for e in catalogue()}
    # Published parameter counts (model cards); the sizes are derived from the config, so a wrong
    # architecture number shows here.
    published = {
        "autumncc/Qwen2.5-VL-7B-VRAG": 8.29e9,
        "Qwen/Qwen2.5-VL-3B-Instruct": 3.75e9,
        "Qwen/Qwen2.5-VL-7B-Instruct": 8.29e9,
        "Qwen/Qwen2.5-VL-32B-Instruct": 33.5e9,
        "Qwen/Qwen2.5-VL-72B-Instruct": 73.4e9,
        "Qwen/Qwen3-VL-2B-Instruct": 2.13e9,
        "Qwen/Qwen3-VL-4B-Instruct": 4.44e9,
        "Qwen/Qwen3-VL-8B-Instruct": 8.77e9,
        "Qwen/Qwen3-VL-30B-A3B-Instruct": 31.1e9,
        "Qwen/Qwen3-VL-32B-Instruct": 33.4e9,
    }
    for model_id, params in published.items():
        entry = ids[model_id]
        assert entry.kind == "answer" and entry.licence
        assert abs(entry.params - params) / params < 0.05, (model_id, entry.params)
        assert entry.download_bytes == entry.params * 2 and not entry.measured
    for model_id, family in (
        (GVEEmbedder.default_model, GVE_FAMILY),
        ("Alibaba-NLP/GVE-7B", GVE_FAMILY),
        (Qwen3VLEmbedder.default_model, QWEN3_VL_FAMILY),
        ("Qwen/Qwen3-VL-Embedding-8B", QWEN3_VL_FAMILY),
    ):
        assert ids[model_id].kind == "embedder" and detect_family(model_id) == family
    minilm = find_entry("minilm")
    assert minilm is not None and minilm.builtin and minilm.kind == "embedder"
    assert find_entry("QWEN/qwen2.5-vl-7b-instruct") is ids["Qwen/Qwen2.5-VL-7B-Instruct"]


def test_fit_verdicts_before_anything_is_fetched() -> None:
    vrag = find_entry("autumncc/Qwen2.5-VL-7B-VRAG")
    big = find_entry("Qwen/Qwen2.5-VL-32B-Instruct")
    small = find_entry("Qwen/Qwen2.5-VL-3B-Instruct")
    emb = find_entry("Qwen/Qwen3-VL-Embedding-2B")
    assert vrag and big and small and emb
    assert fits(vrag, _machine((80,))).verdict is Verdict.FITS
    tight = fits(vrag, _machine((24,)))  # the original's issue #8: 7B on a 24 GB card
    assert tight.verdict is Verdict.TIGHT and tight.device == "gpu" and "24.0 GiB" in tight.reasons[0]
    no = fits(vrag, _machine((16,)))
    assert no.verdict is Verdict.NO and "weights alone" in no.summary
    two = fits(big, _machine((80, 80)))  # one 80 GB card is tight; two in tensor parallel fit
    assert two.verdict is Verdict.FITS and "over 2 GPUs" in two.summary
    cpu = fits(small, _machine(ram_gib=24))
    assert cpu.verdict is Verdict.TIGHT and cpu.device == "cpu" and "no NVIDIA GPU" in cpu.summary
    assert fits(vrag, _machine(ram_gib=24)).verdict is Verdict.NO
    assert fits(emb, _machine(ram_gib=64)).verdict is Verdict.FITS
    full = fits(emb, _machine((80,), disk_gb=2))
    assert full.verdict is Verdict.NO and "only 2.0 GB free" in full.reasons[0]
    assert fits(emb, _machine((80,), disk_gb=2), downloaded=True).verdict is Verdict.FITS
    minilm = find_entry("minilm")
    assert minilm and fits(minilm, _machine(ram_gib=1, disk_gb=0)).verdict is Verdict.FITS


def test_a_local_folder_is_a_model_or_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(NotAModelError, match="is not a folder"):
        check_model_folder(tmp_path / "nowhere")
    folder = tmp_path / "m"
    folder.mkdir()
    with pytest.raises(NotAModelError, match=r"no config\.json"):
        check_model_folder(folder)
    (folder / "config.json").write_text("{broken")
    with pytest.raises(NotAModelError, match="cannot be read as JSON"):
        check_model_folder(folder)
    (folder / "config.json").write_text(json.dumps({"hidden_size": 64}))
    with pytest.raises(NotAModelError, match="no weights"):
        check_model_folder(folder)
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "model-1.safetensors"}})
    )
    (folder / "model-2.safetensors").write_bytes(b"x")
    with pytest.raises(NotAModelError, match=r"incomplete.*model-1\.safetensors"):
        check_model_folder(folder)
    (folder / "model-1.safetensors").write_bytes(b"x")
    assert check_model_folder(folder)[0] == folder
    layout = _layout(tmp_path)
    model, entry = ModelStore(layout).add_local(folder)
    assert model.source == "local" and entry.measured
    assert ModelStore(layout).find(str(folder)) is not None
    assert "kept" in ModelStore(layout).remove(str(folder))[0] and (folder / "config.json").is_file()


# ---------------------------------------------------------------- downloads


def test_pull_two_revisions_and_list_delete(online: FakeHub, tmp_path: Path) -> None:
    repo = online.repo(REPO)
    v1 = repo.commit(tiny_files(seed=1), "v1")
    main = repo.commit(tiny_files(seed=2, **{"extra/notes.txt": b"more"}), "main")
    layout = _layout(tmp_path)
    seen, result = drain(pull(layout, REPO, settings=_settings(online)))
    assert result.model is not None and result.model.commit == main and not result.cancelled
    folder = result.model.path
    assert folder == layout.models / "tiny-org" / "tiny-model"
    assert (folder / "extra" / "notes.txt").read_bytes() == b"more"
    assert not (folder / "logo.png").exists()  # pictures of the model card are not fetched
    files = repo.commits[main]
    assert all(sha256_file(folder / p) == sha256(files[p]) for p in files if p != "logo.png")
    marker = json.loads((folder / ".vrag-model.json").read_text())
    assert marker["commit"] == main and set(marker["files"]) == set(files) - {"logo.png"}
    reports = [p for p in seen if isinstance(p, DownloadProgress) and p.phase in ("download", "verify")]
    assert reports and reports[-1].total == sum(len(files[p]) for p in files if p != "logo.png")
    assert {p.file for p in reports} >= {"config.json", "model.safetensors"}

    gets = len(online.requests)
    again = drain(pull(layout, REPO, settings=_settings(online)))[1]
    assert again.up_to_date and len(online.requests) == gets + 1  # only the listing was asked

    older = drain(pull(layout, REPO, "v1", settings=_settings(online)))[1]
    assert older.model is not None and older.model.commit == v1 and older.model.revision == "v1"
    assert json.loads((folder / "config.json").read_text())["seed"] == 1
    assert (
        not (folder / "extra").exists() and not (layout.models / ".partial" / "tiny-org--tiny-model").exists()
    )

    rows = {r.id: r for r in list_models(layout)}
    assert rows[REPO].state == "downloaded" and rows[REPO].size_on_disk > 0 and rows[REPO].fit.reasons
    assert rows["sentence-transformers/all-MiniLM-L6-v2"].state == "builtin"
    assert rows["Qwen/Qwen3-VL-8B-Instruct"].state == "available"
    what, freed = ModelStore(layout).remove(REPO)
    assert "removed" in what and freed > 0 and not folder.exists()
    with pytest.raises(ModelError, match="no downloaded model"):
        ModelStore(layout).remove(REPO)
    with pytest.raises(ModelError, match="ships with the app"):
        ModelStore(layout).remove("minilm")


def test_a_dropped_connection_resumes_where_it_stopped(online: FakeHub, tmp_path: Path) -> None:
    files = tiny_files(weights=BIG)
    online.repo(REPO).commit(files)
    online.drop_after["model.safetensors"] = (15 * 1024 * 1024, 1)  # the socket closes mid-file, once
    result = drain(pull(_layout(tmp_path), REPO, settings=_settings(online)))[1]
    assert result.model is not None
    assert sha256_file(result.model.path / "model.safetensors") == sha256(files["model.safetensors"])
    assert "bytes=10485760-" in online.ranges("model.safetensors")  # continued, not restarted


def test_pause_keeps_the_partial_file_and_the_next_pull_continues(online: FakeHub, tmp_path: Path) -> None:
    files = tiny_files(weights=BIG)
    online.repo(REPO).commit(files)
    online.throttle["model.safetensors"] = 12 * 1024 * 1024
    layout, cancel = _layout(tmp_path), CancelToken()
    partial = layout.models / ".partial" / "tiny-org--tiny-model" / "model.safetensors.incomplete"
    gen = pull(layout, REPO, cancel=cancel, settings=_settings(online))
    for _report in gen:
        if partial.exists() and partial.stat().st_size >= 10 * 1024 * 1024:
            cancel.cancel()  # "pause": the generator stops at its next yield
    assert not ModelStore(layout).downloaded()
    kept = partial.stat().st_size
    assert 0 < kept < BIG
    (row,) = [r for r in list_models(layout) if r.id == REPO]
    assert row.state == "partial" and row.partial and row.partial.have_bytes >= kept
    online.throttle.clear()
    result = drain(pull(layout, REPO, settings=_settings(online)))[1]
    assert result.model is not None and result.kept_bytes >= kept
    assert f"bytes={kept}-" in online.ranges("model.safetensors")
    assert sha256_file(result.model.path / "model.safetensors") == sha256(files["model.safetensors"])


def test_a_revision_that_moved_keeps_the_partial_files_that_still_match(
    online: FakeHub, tmp_path: Path
) -> None:
    files = tiny_files(weights=BIG)
    repo = online.repo(REPO)
    repo.commit(files)
    online.throttle["model.safetensors"] = 12 * 1024 * 1024
    layout, cancel = _layout(tmp_path), CancelToken()
    partial = layout.models / ".partial" / "tiny-org--tiny-model"
    for _report in pull(layout, REPO, cancel=cancel, settings=_settings(online)):
        incomplete = partial / "model.safetensors.incomplete"
        if incomplete.exists() and incomplete.stat().st_size >= 10 * 1024 * 1024:
            cancel.cancel()
    kept = (partial / "model.safetensors.incomplete").stat().st_size
    assert (partial / "config.json").is_file()  # checked before the pause
    moved = repo.commit({**files, "config.json": b'{"model_type": "qwen2", "new": true}'})  # main moves on
    online.throttle.clear()
    result = drain(pull(layout, REPO, settings=_settings(online)))[1]
    assert result.model is not None and result.model.commit == moved
    assert f"bytes={kept}-" in online.ranges("model.safetensors")  # same checksum: continued
    assert (
        json.loads((result.model.path / "config.json").read_text())["new"] is True
    )  # changed: fetched again
    assert sha256_file(result.model.path / "model.safetensors") == sha256(files["model.safetensors"])


def test_a_wrong_checksum_discards_the_file_and_nothing_is_usable(online: FakeHub, tmp_path: Path) -> None:
    files = tiny_files(weights=200_000)
    online.repo(REPO).commit(files)
    online.corrupt["model.safetensors"] = bytes(200_000)  # same size, other bytes than the listing's sha256
    layout = _layout(tmp_path)
    with pytest.raises(ChecksumError, match=r"model.safetensors .*failed its checksum.*discarded"):
        drain(pull(layout, REPO, settings=_settings(online)))
    partial = layout.models / ".partial" / "tiny-org--tiny-model"
    assert not list(partial.glob("model.safetensors*"))
    assert not ModelStore(layout).downloaded() and ModelStore(layout).downloaded_path(REPO) is None
    online.corrupt.clear()
    result = drain(pull(layout, REPO, settings=_settings(online)))[1]
    assert result.model is not None and result.kept_bytes > 0  # the files that passed were kept


def test_missing_repo_revision_and_unreachable_hub_say_so(online: FakeHub, tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    online.repo(REPO).commit(tiny_files())
    with pytest.raises(
        ModelNotFoundError, match=r"no model 'tiny-org/nope' on http://127.0.0.1:\d+: check the id"
    ):
        drain(pull(layout, "tiny-org/nope", settings=_settings(online)))
    with pytest.raises(ModelNotFoundError, match="has no revision 'v9'"):
        drain(pull(layout, REPO, "v9", settings=_settings(online)))
    with pytest.raises(ModelError, match="neither a Hugging Face model id"):
        drain(pull(layout, "not an id!", settings=_settings(online)))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"  # bound, not listening: refused
        with pytest.raises(NetworkError, match="connection refused"):
            drain(pull(layout, REPO, settings=ModelSettings(endpoint=closed)))


def test_a_gated_repo_needs_a_token_with_access(online: FakeHub, tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    online.repo(REPO, gated=True, token="hf_right").commit(tiny_files())
    with pytest.raises(AccessError, match=r"is gated: accept its terms at .*give a token"):
        drain(pull(layout, REPO, settings=_settings(online)))
    set_token(layout, "hf_wrong")
    with pytest.raises(AccessError, match="your token has no access"):
        drain(pull(layout, REPO, settings=_settings(online)))
    set_token(layout, "hf_right")  # the keyring (a memory double here)
    assert drain(pull(layout, REPO, settings=_settings(online)))[1].model is not None
    saved = layout.config / "models.json"
    assert not saved.exists() or "hf_right" not in saved.read_text()  # the token is in the keyring only
    auth = [r.headers.get("authorization") for r in online.requests if "/resolve/" in r.path]
    assert "Bearer hf_right" in auth


def test_offline_mode_never_touches_the_network(
    online: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    layout = _layout(tmp_path)
    online.repo(REPO).commit(tiny_files())
    with pytest.raises(OfflineError, match="cannot download tiny-org/tiny-model: offline mode is on"):
        drain(pull(layout, REPO, settings=_settings(online, offline=True)))
    with pytest.raises(OfflineError, match="cannot look up"):
        inspect_remote(layout, REPO, settings=_settings(online, offline=True))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OfflineError, match="HF_HUB_OFFLINE is set"):
        drain(pull(layout, REPO, settings=_settings(online)))
    assert online.requests == []
    assert any(r.state == "builtin" for r in list_models(layout))  # listing works offline


def test_inspect_remote_sizes_an_unknown_model_from_its_config(online: FakeHub, tmp_path: Path) -> None:
    files = tiny_files(weights=300_000)
    online.repo(REPO).commit(files)
    remote, entry = inspect_remote(_layout(tmp_path), REPO, settings=_settings(online))
    assert remote.total_bytes == sum(len(v) for k, v in files.items() if k != "logo.png")
    assert (
        entry.measured
        and entry.download_bytes == remote.total_bytes
        and entry.config == json.loads(files["config.json"])
    )
    assert fits(entry, _machine((24,))).verdict is Verdict.FITS


def test_one_download_of_a_model_at_a_time(online: FakeHub, tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    online.repo(REPO).commit(tiny_files(seed=1), "v1")
    online.repos[REPO].commit(tiny_files(seed=2))
    assert drain(pull(layout, REPO, "v1", settings=_settings(online)))[1].model is not None
    lock = ModelStore(layout).lock(REPO)  # held as another process's download would hold it
    lock.acquire()
    try:
        with pytest.raises(ModelBusyError, match="being downloaded by another"):
            drain(pull(layout, REPO, settings=_settings(online), lock_wait=0.3))
        with pytest.raises(ModelBusyError, match="stop that download first"):
            ModelStore(layout).remove(REPO)
    finally:
        lock.release()
    assert drain(pull(layout, REPO, settings=_settings(online)))[1].model is not None


def test_the_fake_hub_speaks_what_huggingface_hub_expects(online: FakeHub, tmp_path: Path) -> None:
    """The fake hub is only worth its tests if huggingface_hub's own download accepts it: HEAD with
    X-Repo-Commit/ETag, the LFS redirect with X-Linked-Etag/X-Linked-Size, the blob named by sha256."""
    from huggingface_hub import hf_hub_download

    files = tiny_files(weights=200_000)
    commit = online.repo(REPO).commit(files)
    for name in ("config.json", "model.safetensors"):
        got = Path(
            hf_hub_download(REPO, name, endpoint=online.url, cache_dir=tmp_path / "hf-cache", token=False)
        )
        assert got.read_bytes() == files[name] and commit in str(got)
    blobs = {p.name for p in (tmp_path / "hf-cache").rglob("blobs/*")}
    assert sha256(files["model.safetensors"]) in blobs  # the LFS etag is the sha256, as on the hub


def test_an_unsafe_file_name_in_a_listing_is_refused() -> None:
    from vrag_desktop.core.models.hub import safe_relative, select_files

    for bad in ("../evil", "/etc/passwd", "a/../../b", ".hidden"):
        with pytest.raises(ModelError, match="unsafe file name"):
            safe_relative(bad)
    chosen = select_files(
        ["model.safetensors", "pytorch_model.bin", "onnx/model.onnx", "config.json", "a.png"]
    )
    assert chosen == ["model.safetensors", "config.json"]
    assert "pytorch_model.bin" in select_files(["pytorch_model.bin", "config.json"])


# ---------------------------------------------------------------- a full disk (a real small file system)


def test_a_download_bigger_than_the_free_space_is_refused_first(online: FakeHub, tmp_path: Path) -> None:
    online.repo(REPO).commit(tiny_files(weights=BIG))
    with tmpfs(tmp_path / "small", "40m") as mount:
        layout = DataLayout(mount / "data")
        with pytest.raises(DiskSpaceError, match=r"needs 25.2 MB more .* only .* free at "):
            drain(pull(layout, REPO, settings=_settings(online)))
        assert online.ranges("model.safetensors") == []  # refused before any byte of it


def test_a_disk_that_fills_during_the_download_stops_cleanly(online: FakeHub, tmp_path: Path) -> None:
    files = tiny_files(weights=BIG)
    online.repo(REPO).commit(files)
    with tmpfs(tmp_path / "small", "100m") as mount:
        layout = DataLayout(mount / "data")
        filler = mount / "filler"

        def fill() -> None:  # another program takes the rest of the disk mid-download
            with filler.open("wb") as fh, pytest.raises(OSError):
                while True:
                    fh.write(bytes(1 << 20))
                    fh.flush()

        online.on_sent["model.safetensors"] = (12 * 1024 * 1024, fill)
        with pytest.raises(
            DiskSpaceError, match=r"the disk filled while downloading .* free at .*Nothing was marked usable"
        ):
            drain(pull(layout, REPO, settings=_settings(online)))
        assert not ModelStore(layout).downloaded()
        filler.unlink()
        result = drain(pull(layout, REPO, settings=_settings(online)))[1]
        assert result.model is not None
        assert sha256_file(result.model.path / "model.safetensors") == sha256(files["model.safetensors"])


def test_the_embedders_load_a_pulled_model_from_the_models_folder(
    online: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vrag_desktop.core.embedders.base import EmbedderError
    from vrag_desktop.core.embedders.qwen_vl_loading import resolve_model_dir

    layout = _layout(tmp_path)
    monkeypatch.setenv("VRAG_DESKTOP_DATA_DIR", str(layout.root))
    monkeypatch.chdir(tmp_path)
    online.repo("tiny-org/tiny-GVE").commit(tiny_files())
    drain(pull(layout, "tiny-org/tiny-GVE", settings=_settings(online)))
    assert resolve_model_dir("tiny-org/tiny-GVE") == layout.models / "tiny-org" / "tiny-GVE"
    # `--data-dir` (the app's data directory setting) is passed down, whatever the environment says
    monkeypatch.setenv("VRAG_DESKTOP_DATA_DIR", str(tmp_path / "another"))
    assert resolve_model_dir("tiny-org/tiny-GVE", layout.root) == layout.models / "tiny-org" / "tiny-GVE"
    monkeypatch.setenv("VRAG_DESKTOP_DATA_DIR", str(layout.root))
    import huggingface_hub.constants as hub_constants

    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path / "empty-hf-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(EmbedderError, match=r"Pull it first: `vrag-desktop models pull tiny-org/other-GVE`"):
        resolve_model_dir("tiny-org/other-GVE")


def test_vllm_serves_a_pulled_model_from_the_models_folder(online: FakeHub, tmp_path: Path) -> None:
    """The app's and the CLI's vLLM config point vLLM at the checked download, served under its id."""
    from vrag_desktop.core.runtime.settings import VLLMSettings
    from vrag_desktop.core.runtime.vllm import VLLMConfig

    layout = _layout(tmp_path)
    online.repo("tiny-org/tiny-GVE").commit(tiny_files())
    drain(pull(layout, "tiny-org/tiny-GVE", settings=_settings(online)))
    folder = layout.models / "tiny-org" / "tiny-GVE"
    cfg = VLLMSettings(model="tiny-org/tiny-GVE").to_config(layout.root)
    assert (cfg.model, cfg.model_name) == (str(folder), "tiny-org/tiny-GVE")
    assert cfg.build_command(8000)[cfg.build_command(8000).index("--model") + 1] == str(folder)
    named = VLLMConfig("tiny-org/tiny-GVE", served_model_name="vrag").from_models_folder(layout.root)
    assert (named.model, named.model_name) == (str(folder), "vrag")
    other = VLLMConfig("tiny-org/not-pulled").from_models_folder(layout.root)
    assert (other.model, other.model_name) == ("tiny-org/not-pulled", "tiny-org/not-pulled")


def test_progress_reports_speed_eta_and_file(online: FakeHub, tmp_path: Path) -> None:
    online.repo(REPO).commit(tiny_files(weights=BIG))
    online.throttle["model.safetensors"] = 40 * 1024 * 1024
    seen, result = drain(pull(_layout(tmp_path), REPO, settings=_settings(online)))
    downloading = [p for p in seen if p.phase == "download" and p.file == "model.safetensors"]
    assert downloading and any(p.rate > 0 for p in downloading) and any(p.eta for p in downloading)
    assert [p.done for p in seen if p.phase != "resolve"] == sorted(
        p.done for p in seen if p.phase != "resolve"
    )
    assert seen[-1].phase == "done" and seen[-1].done == seen[
        -1
    ].total == result.model.size_bytes - _marker_size(result.model.path)
    assert threading.active_count() < 50


def _marker_size(folder: Path) -> int:
    return os.path.getsize(folder / ".vrag-model.json")
