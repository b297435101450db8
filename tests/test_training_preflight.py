"""The New-run pre-flight on real inputs: the match count over an indexed corpus (and a dataset
matching nothing), model folders that are and are not models, a hub id, a hyper-parameter out of
range, the memory estimate with and without a GPU, the trainer env missing or broken, and the
command exactly as the launcher builds it."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import index_paths

from vrag_desktop.core.datasets import DatasetItem
from vrag_desktop.core.runtime.gpu import GPUInfo, GPUReport
from vrag_desktop.core.training import preflight as pf
from vrag_desktop.core.training.config import ConfigError, TrainConfig
from vrag_desktop.core.training.launch import trainer_argv

GiB = 1024**3
#: A Qwen2-0.5B-shaped text config (≈0.49 B parameters).
SMALL = {
    "model_type": "qwen2",
    "hidden_size": 896,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "intermediate_size": 4864,
    "vocab_size": 151936,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
}
#: A 7B-shaped config.
BIG = {
    **SMALL,
    "hidden_size": 3584,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "intermediate_size": 18944,
    "tie_word_embeddings": False,
}


def _model(tmp_path: Path, config: dict[str, Any], name: str = "m", weights: bool = False) -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(config))
    if weights:
        (d / "model.safetensors").write_bytes(b"\0" * 16)
    return d


def _cfg(**kw: Any) -> TrainConfig:
    return TrainConfig(model="m", dataset="d", **kw)


def _gpu(free_gib: float, total_gib: float = 80.0, index: int = 0) -> GPUInfo:
    return GPUInfo(index, "H100", int(total_gib * GiB), int(free_gib * GiB))


# ---- match count ---------------------------------------------------------------------------------
@pytest.fixture
def robots(data_dir: Path, library: Any, make_pdf: Any, minilm: Any) -> Path:
    pdf = make_pdf("robots.pdf", ["Northwind annual report.", "Atlas robot: payload 450 kg, battery 14 h."])
    corpus, _, _ = index_paths(library, "robots", [pdf], minilm)
    corpus.close()
    return data_dir


def test_match_count_counts_items_the_corpus_can_answer(robots: Path) -> None:
    from vrag_desktop.core.datasets.store import DatasetStore
    from vrag_desktop.core.paths import DataLayout

    store = DatasetStore(DataLayout(robots).datasets)
    for i in range(12):
        store.add_item("atlas", DatasetItem(f"q{i}", "Payload?", "450 kg", "robots.pdf", (2,)), create=True)
    store.add_item("atlas", DatasetItem("far", "Q?", "x", "elsewhere.pdf", (1,)))
    store.add_item("atlas", DatasetItem("late", "Q?", "x", "robots.pdf", (9,)))
    matched, total, problems = pf.match_count("atlas", [], robots)
    assert (matched, total) == (12, 14)
    whys = dict(problems)
    assert "elsewhere.pdf is not in the indexed files of robots" in whys["far"]
    assert "do not exist" in whys["late"]
    assert pf.match_count(str(store.path("atlas")), ["robots"], robots)[:2] == (12, 14)  # as a file


def test_a_dataset_matching_nothing_and_unknown_names(robots: Path, tmp_path: Path) -> None:
    f = tmp_path / "other.jsonl"
    row = {"query": "Q?", "reference_answer": "a", "meta_info": {"file_name": "x.pdf"}}
    rows = [{"uid": f"o{i}", **row} for i in range(3)]
    f.write_text("\n".join(json.dumps(r) for r in rows))
    matched, total, problems = pf.match_count(str(f), ["robots"], robots)
    assert (matched, total, len(problems)) == (0, 3, 3)
    with pytest.raises(ConfigError) as e:
        pf.match_count("nope", [], robots)
    assert e.value.field == "dataset" and "neither a file nor an app dataset" in str(e.value)
    with pytest.raises(ConfigError) as e:
        pf.match_count(str(f), ["ghost"], robots)
    assert e.value.field == "corpora" and "ghost" in str(e.value)
    with pytest.raises(ConfigError, match="dataset: no such file"):
        pf.match_count(str(tmp_path / "gone.json"), [], robots)


# ---- model folder ---------------------------------------------------------------------------------
def test_check_model_dir(tmp_path: Path) -> None:
    good = _model(tmp_path, SMALL, "good", weights=True)
    assert pf.check_model_dir(str(good)) == pf.ModelCheck(True, "local", "Local model folder good")
    (tmp_path / "docs").mkdir()
    bad = pf.check_model_dir(str(tmp_path / "docs"))
    assert not bad.ok and "not a Hugging Face model folder (no config.json)" in bad.message
    no_weights = pf.check_model_dir(str(_model(tmp_path, SMALL, "bare")))
    assert not no_weights.ok and "no weights" in no_weights.message
    assert "is a file" in pf.check_model_dir(str(good / "config.json")).message
    hub = pf.check_model_dir("Qwen/Qwen2.5-VL-3B-Instruct")
    assert hub.ok and hub.kind == "hub" and "downloaded when the run starts" in hub.message
    assert not pf.check_model_dir(str(tmp_path / "missing" / "deep")).ok
    assert not pf.check_model_dir("  ").ok


def test_a_hyper_parameter_out_of_range_names_its_field() -> None:
    for field, value in (("learning_rate", 0.0), ("group_size", 1), ("clip_ratio", 2.0), ("kl_coef", -1)):
        with pytest.raises(ConfigError) as e:
            TrainConfig.from_mapping({"model": "m", "dataset": "d", field: value})
        assert e.value.field == field and str(e.value).startswith(f"{field}: ")


# ---- memory ----------------------------------------------------------------------------------------
def test_memory_estimate_on_a_gpu(tmp_path: Path) -> None:
    small, big = _model(tmp_path, SMALL, "small"), _model(tmp_path, BIG, "big")
    report = GPUReport((_gpu(70.0),), "550", "12.8")
    fits = {"micro_batch_rows": 1, "gradient_checkpointing": True}
    est = pf.memory_estimate(str(small), _cfg(**fits), report)
    assert est.device == "cuda" and 0.4e9 < (est.params or 0) < 0.6e9
    parts = dict(est.parts)
    assert parts["weights"] == parts["gradients"] == est.params * 2  # type: ignore[operator]
    assert parts["AdamW moments (2)"] == 4 * est.params  # type: ignore[operator]
    assert "reference model (KL)" in parts and est.warnings == [] and est.refusal is None
    no_kl = pf.memory_estimate(str(small), _cfg(kl_coef=0.0, **fits), report)
    assert "reference model (KL)" not in dict(no_kl.parts)
    est7 = pf.memory_estimate(str(big), _cfg(), GPUReport((_gpu(20.0),)))
    assert est7.refusal is not None and "per GPU to train (estimate); GPU 0 (H100, 80 GiB)" in est7.refusal
    lean = pf.memory_estimate(str(big), _cfg(**fits), report)
    assert lean.per_device_bytes < est7.per_device_bytes
    busy = pf.memory_estimate(str(small), _cfg(**fits), GPUReport((_gpu(5.0),)))
    assert busy.refusal is None and any(
        "per GPU to train; GPU 0 has 5.0 GiB free" in w for w in busy.warnings
    )
    two = pf.memory_estimate(str(small), _cfg(gpus=2, **fits), report)
    assert any("only 1 GPU(s)" in w for w in two.warnings)
    vllm = pf.memory_estimate(str(small), _cfg(generator="vllm", **fits), GPUReport((_gpu(50.0),)))
    assert any("after vLLM's colocated share" in w for w in vllm.warnings)


def test_memory_estimate_without_a_gpu(tmp_path: Path) -> None:
    small, big = _model(tmp_path, SMALL, "small"), _model(tmp_path, BIG, "big")
    none = GPUReport(error="no NVIDIA driver")
    est = pf.memory_estimate(str(small), _cfg(), none)
    assert est.device == "cpu" and dict(est.parts)["weights"] == 4 * est.params  # type: ignore[operator]
    assert any("only for tiny models" in w for w in est.warnings)
    assert any(
        "far too big to train on a CPU" in w for w in pf.memory_estimate(str(big), _cfg(), none).warnings
    )
    forced = pf.memory_estimate(str(small), _cfg(device="cuda"), none)
    assert any("device is cuda but no NVIDIA GPU" in w for w in forced.warnings)
    hub = pf.memory_estimate("someone/not-downloaded", _cfg(), none)
    assert hub.params is None and any("Cannot estimate" in w for w in hub.warnings)
    assert any("Cannot estimate" in w for w in pf.memory_estimate(str(tmp_path), _cfg(), none).lines())


# ---- trainer env -------------------------------------------------------------------------------------
@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    from vrag_desktop.core.runtime import trainer_env

    monkeypatch.delenv(trainer_env.PYTHON_ENV, raising=False)
    monkeypatch.setattr(trainer_env, "repo_root", lambda: None)  # not the checkout's .venv-trainer


@pytest.mark.usefixtures("no_env")
def test_env_missing_incomplete_and_broken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    st = pf.env_status(tmp_path / "trainer-env")
    assert st.state == "missing" and not st.ready and "does not exist yet" in st.message
    (tmp_path / "trainer-env").mkdir()
    assert pf.env_status(tmp_path / "trainer-env").state == "broken"
    monkeypatch.setenv("VRAG_TRAINER_PYTHON", str(tmp_path / "nowhere" / "python"))
    st = pf.env_status(tmp_path / "trainer-env")
    assert st.state == "broken" and "does not exist" in st.message
    import sys

    monkeypatch.setenv("VRAG_TRAINER_PYTHON", sys.executable)  # the app's Python: no trl, no vrag_trainer
    st = pf.env_status(tmp_path / "trainer-env")
    assert st.state == "broken" and "lacks" in st.message and "vrag_trainer" in st.message
    assert pf.env_status(tmp_path / "trainer-env", verify=False).ready


# ---- command -------------------------------------------------------------------------------------------
@pytest.mark.usefixtures("no_env")
def test_command_preview_is_the_launchers_argv(tmp_path: Path) -> None:
    cfg = _cfg(algorithm="ggpo", data_dir=str(tmp_path / "data"))
    run = tmp_path / "data" / "training" / "r1"
    argv = pf.command_preview(cfg, run, python="/env/bin/python")
    assert argv == trainer_argv("/env/bin/python", "ggpo", config=run / "launch-config.json", run=run)
    assert argv[1:5] == ["-m", "vrag_trainer", "ggpo", "--config"]
    missing = pf.command_preview(cfg, run)  # where the env will be once created
    assert missing[0] == str(tmp_path / "data" / "runtime" / "trainer-env" / "bin" / "python")
    written = pf.write_launch_config(cfg, run)
    assert written == Path(argv[5]) and TrainConfig.from_mapping(json.loads(written.read_text())) == cfg


def test_last_config_round_trip(tmp_path: Path) -> None:
    assert pf.load_last_config(tmp_path) is None
    pf.save_last_config(_cfg(group_size=8), tmp_path / "cfg")
    assert (pf.load_last_config(tmp_path / "cfg") or {})["group_size"] == 8
    (tmp_path / "cfg" / "training-last.json").write_text("{torn")
    assert pf.load_last_config(tmp_path / "cfg") is None


def test_a_failure_is_put_down_to_a_full_disk_by_its_chain_or_the_free_space(tmp_path: Path) -> None:
    """safetensors says "No space left"; torch.save's RuntimeError names nothing, so the free space
    where the run writes decides (a real tmpfs, filled)."""
    import errno

    from doubles import tmpfs

    from vrag_desktop.core.training.preflight import disk_full

    wrapped = RuntimeError("PytorchStreamWriter failed writing file data/0")
    wrapped.__cause__ = OSError(errno.ENOSPC, "No space left on device")
    assert disk_full(wrapped, tmp_path)
    assert disk_full(OSError(errno.ENOSPC, "full"), tmp_path)
    unexplained = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 1216 vs 1142")
    assert not disk_full(unexplained, tmp_path)  # this disk has room: not a full disk
    assert not disk_full(unexplained, tmp_path / "gone")  # no such place: nothing says so
    with tmpfs(tmp_path / "small", "256k") as small:
        with open(small / "filler", "wb") as fh, contextlib.suppress(OSError):
            fh.write(b"\0" * (512 << 10))
        assert disk_full(unexplained, small)
