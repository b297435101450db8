"""The one place a training run is set up (:mod:`vrag_desktop.core.training.plan`): the checks that
refuse a field by name (``engine: verl`` under GRPO, more GPUs than the machine has, several CPU
processes without the test switch), the launch config it writes, the command (one process, or
``accelerate launch --num_processes N``), the same process count on resume, and how a
several-process run's end is read (its launcher exits 1 for any process's non-zero exit)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vrag_desktop.core.paths import DataLayout
from vrag_desktop.core.runtime.gpu import GPUInfo, GPUReport
from vrag_desktop.core.training import launch, plan
from vrag_desktop.core.training import preflight as pf
from vrag_desktop.core.training.config import ConfigError, TrainConfig
from vrag_desktop.core.training.rundir import TrainRun

PY = "/env/bin/python"
NO_GPU = GPUReport(error="no NVIDIA driver")


def gpus(n: int) -> GPUReport:
    return GPUReport(tuple(GPUInfo(i, "RTX 4090", 24 * 1024**3, 23 * 1024**3) for i in range(n)))


def cfg(**kw: object) -> TrainConfig:
    return TrainConfig(model="tiny", dataset="d.json", **kw)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _no_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(plan.CPU_PROCESSES_ENV, raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_gpus_beyond_the_machine_are_refused_naming_both_counts(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^gpus: 4 GPUs were asked for but this machine has 2") as e:
        plan.new_run(cfg(gpus=4), tmp_path / "run", PY, gpus=gpus(2))
    assert e.value.field == "gpus"
    assert not (tmp_path / "run").exists()  # refused before anything is written


def test_several_processes_without_a_gpu_need_the_test_switch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigError, match=r"gpus: 2 processes were asked for but this machine has no GPU"):
        plan.process_count(cfg(gpus=2), NO_GPU)
    with pytest.raises(ConfigError, match=plan.CPU_PROCESSES_ENV):
        plan.process_count(cfg(gpus=2, device="cpu"), gpus(2))
    monkeypatch.setenv(plan.CPU_PROCESSES_ENV, "1")
    assert plan.process_count(cfg(gpus=2), NO_GPU) == (2, True)
    p = plan.new_run(cfg(gpus=2, device="cpu"), tmp_path / "run", PY, gpus=NO_GPU)
    assert p.processes == 2 and p.argv[:3] == [PY, "-m", "accelerate.commands.launch"]


def test_the_command_follows_gpus(tmp_path: Path) -> None:
    one = plan.new_run(cfg(), tmp_path / "a", PY, gpus=NO_GPU)
    assert one.argv == launch.trainer_argv(
        PY, "grpo", config=tmp_path / "a" / pf.LAUNCH_CONFIG, run=tmp_path / "a"
    )
    two = plan.new_run(cfg(gpus=2, algorithm="ggpo"), tmp_path / "b", PY, gpus=gpus(2))
    a = two.argv
    assert a[a.index("--num_processes") + 1] == "2" and "--multi_gpu" in a
    assert a[a.index("--main_process_port") + 1].isdigit()
    assert a[-7:] == [
        "-m",
        "vrag_trainer",
        "ggpo",
        "--config",
        str(two.config_path),
        "--run",
        str(two.run.root),
    ]
    assert launch.argv_processes(a) == 2 and two.what == "GGPO training (2 processes)"
    every = plan.new_run(cfg(), tmp_path / "c", PY, gpus=gpus(3))  # gpus 0: every visible GPU
    assert every.processes == 3
    assert plan.new_run(cfg(gpus=1), tmp_path / "d", PY, gpus=gpus(3)).processes == 1


def test_cuda_visible_devices_narrows_the_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    with pytest.raises(ConfigError, match="this machine has 1"):
        plan.process_count(cfg(gpus=2), gpus(4))


def test_engine_verl_is_refused_with_the_command_to_use() -> None:
    with pytest.raises(
        ConfigError, match=r"^engine: verl runs on a Ray cluster.*python -m vrag_trainer verl"
    ):
        plan.check_fields(cfg(engine="verl"))
    plan.check_fields(cfg(engine="trl"))


def test_new_run_writes_the_launch_config_and_refuses_a_used_folder(tmp_path: Path) -> None:
    c = cfg(learning_rate=3e-4)
    p = plan.new_run(c, tmp_path / "run", PY, gpus=NO_GPU)
    assert p.config_path == tmp_path / "run" / pf.LAUNCH_CONFIG
    assert json.loads(p.config_path.read_text()) == c.to_dict()
    assert p.argv == pf.command_preview(c, tmp_path / "run", PY, NO_GPU)  # the form shows this command
    TrainRun.create(tmp_path / "run", c)
    with pytest.raises(plan.LaunchRefused, match="already holds a training run"):
        plan.new_run(c, tmp_path / "run", PY, gpus=NO_GPU)


def test_resume_keeps_the_runs_process_count(tmp_path: Path) -> None:
    run = TrainRun.create(tmp_path / "run", cfg(gpus=2))
    r = plan.resume_run(run, PY, gpus=gpus(2))
    assert r.processes == 2 and r.argv[-3:] == ["vrag_trainer", "resume", str(run.root)]
    with pytest.raises(ConfigError, match="this machine has 1"):  # the machine lost a GPU
        plan.resume_run(run, PY, gpus=gpus(1))
    assert plan.export_run(run, PY).argv == launch.trainer_argv(PY, "export", run=run.root)


TORCHRUN_REPORT = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
vrag_trainer FAILED
------------------------------------------------------------
Failures:
[1]:
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 26683)  (SIGTERM)
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  rank      : 1 (local_rank: 1)
  exitcode  : {code} (pid: 26684)
============================================================"""


def test_a_several_process_end_is_read_from_the_state_and_the_launchers_report(tmp_path: Path) -> None:
    run = TrainRun.create(tmp_path / "run", cfg(gpus=2))
    run.write_state(status="stopped", processes=2)
    assert launch.outcome(1, run) == "stopped" and launch.outcome(1) == "failed"
    run.write_state(status="failed")
    assert launch.outcome(1, run) == "failed"
    lines = TORCHRUN_REPORT.format(code=3).splitlines()
    assert launch.classify_trainer_exit(lines, 1)[0] == "stopped"
    kind, text = launch.classify_trainer_exit(TORCHRUN_REPORT.format(code=-9).splitlines(), 1)
    assert kind == "killed" and "trainer process 1 was killed (signal 9)" in text and "Resume" in text


def test_the_data_layout_names_training_and_evaluations(tmp_path: Path) -> None:
    from vrag_desktop.core.eval.jobs import evaluations_dir

    layout = DataLayout(tmp_path)
    assert layout.training == tmp_path / "training" and layout.evaluations == tmp_path / "evaluations"
    assert cfg(name="x").resolved_output_dir(tmp_path) == layout.training / "x"
    assert cfg(name="x", output_dir=str(tmp_path / "o")).resolved_output_dir(tmp_path) == tmp_path / "o"
    assert evaluations_dir(tmp_path) == layout.evaluations
