"""Serving a training run (core): which folder, which served name, the endpoint profile, bad inputs."""

from __future__ import annotations

from pathlib import Path

import pytest
from toy_training import make_export

from vrag_desktop.core.endpoints.profiles import LOCAL_VLLM, EndpointProfile, ProfileStore
from vrag_desktop.core.runtime.settings import VLLMSettings
from vrag_desktop.core.training.rundir import TrainRun
from vrag_desktop.core.training.serve import (
    NeedsExport,
    ServeError,
    model_dir_problem,
    plan_serve,
    profile_name_for,
    save_run_profile,
    serve_settings,
    served_name_for,
)


def test_names_follow_the_run() -> None:
    assert served_name_for("grpo-tiny") == "grpo-tiny"
    assert served_name_for("my run 7/b (v2)") == "my-run-7-b-v2"
    assert served_name_for("///") == "trained-model"
    assert profile_name_for("grpo-tiny") == "grpo-tiny"
    assert profile_name_for(LOCAL_VLLM) == f"{LOCAL_VLLM} (trained)"  # never a built-in's name
    assert len(profile_name_for("x" * 200)) == 80


def test_a_run_with_an_export_is_served_from_it(tmp_path: Path) -> None:
    root = tmp_path / "grpo run"
    export = make_export(root)
    plan = plan_serve(root)
    assert plan.model_dir == export and plan.served_name == "grpo-run" and plan.profile_name == "grpo run"
    s = serve_settings(VLLMSettings(model="old", served_model_name="old", port=8123), plan)
    assert (s.model, s.served_model_name, s.port) == (str(export), "grpo-run", 8123)


def test_only_a_checkpoint_asks_for_an_export(tmp_path: Path) -> None:
    run = TrainRun(tmp_path / "r")
    ckpt = run.checkpoint_dir(4)
    ckpt.mkdir(parents=True)
    (run.checkpoint_dir(6)).mkdir()  # incomplete: no COMPLETE marker
    run.mark_complete(ckpt, 4)
    with pytest.raises(NeedsExport, match="export checkpoint 4 first") as info:
        plan_serve(run.root)
    assert info.value.step == 4


def test_nothing_to_serve_says_so(tmp_path: Path) -> None:
    (tmp_path / "r").mkdir()
    with pytest.raises(ServeError, match="no exported model and no complete checkpoint") as info:
        plan_serve(tmp_path / "r")
    assert not isinstance(info.value, NeedsExport)


def test_an_export_that_is_not_a_model_is_refused(tmp_path: Path) -> None:
    export = TrainRun(tmp_path / "r").export_dir
    export.mkdir(parents=True)
    with pytest.raises(ServeError, match=r"config\.json is missing"):
        plan_serve(tmp_path / "r")
    (export / "config.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ServeError, match="no model weights"):
        plan_serve(tmp_path / "r")
    (export / "model-00001-of-00002.safetensors").write_bytes(b"x")
    assert model_dir_problem(export) is None
    f = tmp_path / "file"
    f.write_text("x", encoding="utf-8")
    assert "not a folder" in (model_dir_problem(f) or "")


def test_the_profile_is_created_then_updated_keeping_its_settings(tmp_path: Path) -> None:
    store = ProfileStore(tmp_path / "cfg")
    make_export(tmp_path / "run-a")
    plan = plan_serve(tmp_path / "run-a")
    p = save_run_profile(store, plan, "http://127.0.0.1:8011/v1/", "run-a")
    assert (p.name, p.kind, p.base_url, p.model) == (
        "run-a",
        "local-vllm",
        "http://127.0.0.1:8011/v1",
        "run-a",
    )
    store.save(EndpointProfile("run-a", "local-vllm", p.base_url, p.model, params={"temperature": 0.2}))
    p = save_run_profile(store, plan, "http://127.0.0.1:9022/v1", "run-a")
    assert p.base_url == "http://127.0.0.1:9022/v1" and p.params == {"temperature": 0.2}
    again = ProfileStore(tmp_path / "cfg")  # on disk, so Ask and Evaluation see it
    assert again.get("run-a").base_url == "http://127.0.0.1:9022/v1"
    assert again.get(LOCAL_VLLM).base_url == ""  # the built-in is the Runtime dock's business


def test_a_profile_of_another_kind_is_not_taken_over(tmp_path: Path) -> None:
    store = ProfileStore(tmp_path / "cfg")
    store.save(EndpointProfile("run-a", "custom", "https://example.com/v1", "m"))
    make_export(tmp_path / "run-a")
    with pytest.raises(ServeError, match="another kind"):
        save_run_profile(store, plan_serve(tmp_path / "run-a"), "http://127.0.0.1:8011/v1", "run-a")
    with pytest.raises(ServeError, match="no address"):
        save_run_profile(store, plan_serve(tmp_path / "run-a"), "", "run-a")
    assert store.get("run-a").kind == "custom"
