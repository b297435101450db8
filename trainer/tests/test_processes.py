"""Several trainer processes on the CPU (gloo), as ``gpus: 2`` runs on two GPUs: real processes
under ``accelerate launch``, the real runner. One step runs in both, their gradients are averaged
(the weights stay identical although each process trained on a different question), checkpoints,
metrics and samples are written once; a stop agreed by both, a killed process (the other stops,
the run resumes), and the refusals of ``gpus`` a single process cannot honour."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from test_training import _changed, _config, _weights
from vrag_trainer import runner

from vrag_desktop.core.run.store import RunStore
from vrag_desktop.core.training.config import ConfigError, TrainConfig
from vrag_desktop.core.training.rundir import TrainRun

HERE = Path(__file__).resolve().parent


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "VRAG_TRAINER_CPU_PROCESSES": "1",  # the explicit switch: N processes on a machine without GPUs
        "PYTHONPATH": str(HERE),
    }


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _write(cfg: TrainConfig, path: Path) -> Path:
    path.write_text(json.dumps(cfg.to_dict()), encoding="utf-8")
    return path


def test_two_processes_average_their_gradients_and_write_the_run_once(  # type: ignore[no-untyped-def]
    tiny_model_dir, dataset_file, toy_data, search_url, tmp_path
) -> None:
    import subprocess

    cfg = _config(tiny_model_dir, dataset_file, toy_data, search_url, gpus=2, device="cpu")
    cfg_file = _write(cfg, tmp_path / "cfg.json")
    run = TrainRun(tmp_path / "run")
    out = tmp_path / "out"
    out.mkdir()
    argv = [
        sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
        "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
        "--main_process_port", str(_port()),
        str(HERE / "two_process_worker.py"), str(cfg_file), str(run.root), str(out),
    ]  # fmt: skip
    proc = subprocess.run(argv, env=_env(), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    ranks = [json.loads((out / f"rank-{r}.json").read_text()) for r in (0, 1)]
    assert [r["rc"] for r in ranks] == [runner.EXIT_OK] * 2 and {r["world"] for r in ranks} == {"2"}
    # each process trained on its own question; averaged gradients keep the weights identical
    assert ranks[0]["digest"] == ranks[1]["digest"]
    base, last = _weights(tiny_model_dir), _weights(run.checkpoint_dir(2))
    assert _changed(base, last) > 0
    # the run directory is written once: one row per step, one checkpoint per save, rank 0's samples
    rows = run.metrics()
    assert [r["step"] for r in rows] == [1, 2]
    assert [c.step for c in run.complete_checkpoints()] == [1, 2]
    assert sorted(p.name for p in run.checkpoints.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    assert len(list(run.checkpoint_dir(2).glob("model*.safetensors"))) == 1
    assert len(RunStore(run.samples).list()) == cfg.samples_per_step * 2
    state = run.state()
    assert state["status"] == "finished" and state["step"] == 2 and state["processes"] == 2


def _workers(launcher: int) -> dict[int, int]:
    """``{rank: pid}`` of the trainer processes the launcher started."""
    out: dict[int, int] = {}
    for child in psutil.Process(launcher).children(recursive=True):
        try:
            env = child.environ()
        except (psutil.Error, OSError):
            continue
        if "RANK" in env and "vrag_trainer" in " ".join(child.cmdline()):
            out[int(env["RANK"])] = child.pid
    return out


async def _supervised(run: TrainRun, argv: list[str], until: Any, timeout: float = 600) -> tuple[Any, Any]:
    """Start ``argv`` under the app's supervisor; call ``until(sup)`` every 0.2 s until it returns
    True (or the trainer ends), then wait for the end. Returns (returncode, supervisor)."""
    from vrag_desktop.core.training import launch

    sup = await launch.start(run, argv, mode="foreground")
    deadline = time.monotonic() + timeout
    wait = asyncio.ensure_future(sup.wait())
    while not wait.done():
        assert time.monotonic() < deadline, run.log_path.read_text()[-4000:]
        if await asyncio.to_thread(until, sup):
            break
        await asyncio.sleep(0.2)
    await asyncio.wait_for(wait, timeout)
    return sup.returncode, sup


def test_a_stop_is_agreed_a_killed_process_stops_the_other_and_the_run_resumes(  # type: ignore[no-untyped-def]
    tiny_model_dir, dataset_file, toy_data, search_url, tmp_path, monkeypatch
) -> None:
    from vrag_desktop.core.training import launch, plan

    for k, v in _env().items():
        monkeypatch.setenv(k, v)
    cfg = _config(
        tiny_model_dir,
        dataset_file,
        toy_data,
        search_url,
        gpus=2,
        device="cpu",
        max_steps=5,
        max_turns=2,
        max_response_length=24,
        max_model_len=2048,
    )  # fmt: skip  (sampled from the tiny model, as a real run)
    python = sys.executable
    p = plan.new_run(cfg, tmp_path / "run", python)  # the command the app and the CLI launch
    assert "--num_processes" in p.argv and p.processes == 2
    run = p.run

    def stepped(n: int) -> Any:
        return lambda _sup: any(r.get("step", 0) >= n for r in run.metrics())

    # 1. a clean stop (STOP file only: both processes agree on the step), then the outcome
    def stop_after_1(sup: Any) -> bool:
        if stepped(1)(sup):
            launch.ask_to_stop(run, sup.pid, p.processes)
            return True
        return False

    rc, _ = asyncio.run(_supervised(run, p.argv, stop_after_1))
    state = run.state()
    assert launch.outcome(rc, run) == "stopped", (rc, state, run.log_path.read_text()[-3000:])
    stopped_at = state["step"]
    assert 1 <= stopped_at < 5 and run.last_checkpoint().step == stopped_at  # type: ignore[union-attr]
    assert not launch.find_running(run)

    # 2. resumed with two processes; one of them killed: the other stops, nothing is left running
    killed: dict[str, int] = {}

    def kill_rank_1(sup: Any) -> bool:
        # after a step past the stop is logged *and* its checkpoint complete (the row comes first)
        saved = run.last_checkpoint()
        if stepped(stopped_at + 1)(sup) and saved is not None and saved.step > stopped_at and sup.pid:
            workers = _workers(sup.pid)
            if 1 in workers:
                killed.update(rank1=workers[1], rank0=workers.get(0, 0))
                os.kill(workers[1], signal.SIGKILL)
                return True
        return False

    r = plan.resume_run(run, python)
    assert r.processes == 2
    rc, _ = asyncio.run(_supervised(run, r.argv, kill_rank_1))
    assert killed, run.log_path.read_text()[-3000:]
    assert launch.outcome(rc, run) == "failed"
    time.sleep(1.0)
    assert not psutil.pid_exists(killed["rank0"]) or psutil.Process(killed["rank0"]).status() == "zombie"
    kept = run.last_checkpoint()
    assert kept is not None and kept.step > stopped_at

    # 3. resumed again from the last complete checkpoint: it finishes, each step logged once
    r = plan.resume_run(run, python)
    rc, _ = asyncio.run(_supervised(run, r.argv, lambda _s: False))
    assert launch.outcome(rc, run) == "finished", run.log_path.read_text()[-3000:]
    steps = [row["step"] for row in run.metrics()]
    assert steps == list(range(1, 6)), steps
    assert run.state()["status"] == "finished"


def test_gpus_a_single_process_cannot_honour_are_refused(tiny_model_dir, dataset_file, tmp_path) -> None:  # type: ignore[no-untyped-def]
    cfg = TrainConfig(model=str(tiny_model_dir), dataset=str(dataset_file), gpus=2)
    with pytest.raises(
        ConfigError, match=r"gpus: the config asks for 2 processes but this trainer runs as 1"
    ):
        runner.start(cfg, str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()
