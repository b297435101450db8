"""A run's life in the real trainer process (``python -m vrag_trainer``): a clean stop on SIGTERM
at a step boundary, resume, SIGKILL mid-step, a changed config refused on resume, and the bad
inputs of the issue — each with its message, and nothing lost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_training import _config, vrag_script
from vrag_trainer import runner

from vrag_desktop.core.training.config import TrainConfig
from vrag_desktop.core.training.rundir import TrainRun


def _write(cfg: TrainConfig, path: Path) -> Path:
    path.write_text(json.dumps(cfg.to_dict()), encoding="utf-8")
    return path


def _trainer(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "vrag_trainer", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )


def _wait_step(run: TrainRun, step: int, proc: subprocess.Popen[str], timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(r.get("step", 0) >= step for r in run.metrics()):
            return
        if proc.poll() is not None:
            out = proc.stdout.read() if proc.stdout else ""
            raise AssertionError(f"the trainer exited ({proc.returncode}) before step {step}:\n{out[-3000:]}")
        time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"no step {step} within {timeout} s")


@pytest.fixture
def sampled(tiny_model_dir, dataset_file, toy_data, search_url):  # type: ignore[no-untyped-def]
    """A config sampling from the tiny model (no script): what a real run does."""

    def make(**over: Any) -> TrainConfig:
        base = dict(max_steps=6, max_turns=2, max_response_length=24, max_model_len=2048, save_steps=1)
        base.update(over)
        url = base.pop("search_url", search_url)
        return _config(tiny_model_dir, dataset_file, toy_data, url, **base)

    return make


def test_sigterm_stops_cleanly_then_resume_finishes(sampled, tmp_path) -> None:  # type: ignore[no-untyped-def]
    run = TrainRun(tmp_path / "run")
    cfg_file = _write(sampled(), tmp_path / "cfg.json")
    proc = _trainer("grpo", "--config", str(cfg_file), "--run", str(run.root))
    _wait_step(run, 1, proc)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == runner.EXIT_STOPPED, out[-2000:]
    state = run.state()
    assert state["status"] == "stopped"
    stopped_at = state["step"]
    assert 1 <= stopped_at < 6
    assert run.last_checkpoint() is not None and run.last_checkpoint().step == stopped_at  # type: ignore[union-attr]
    # resume with a changed learning rate: refused, naming the field, nothing touched
    changed = _write(sampled(learning_rate=1e-2), tmp_path / "changed.json")
    bad = subprocess.run(
        [sys.executable, "-m", "vrag_trainer", "resume", str(run.root), "--config", str(changed)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == runner.EXIT_BAD and "learning_rate" in bad.stderr
    assert run.state()["status"] == "stopped"
    # resume with a resume-safe change (more steps) finishes the run
    more = _write(sampled(max_steps=stopped_at + 1), tmp_path / "more.json")
    proc = _trainer("resume", str(run.root), "--config", str(more))
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == runner.EXIT_OK, out[-2000:]
    assert [r["step"] for r in run.metrics()] == list(range(1, stopped_at + 2))
    assert run.state()["status"] == "finished" and run.last_checkpoint().step == stopped_at + 1  # type: ignore[union-attr]


def test_sigkill_mid_step_loses_at_most_that_step(sampled, tmp_path) -> None:  # type: ignore[no-untyped-def]
    run = TrainRun(tmp_path / "run")
    cfg_file = _write(sampled(max_steps=4), tmp_path / "cfg.json")
    proc = _trainer("grpo", "--config", str(cfg_file), "--run", str(run.root))
    _wait_step(run, 2, proc)
    proc.kill()
    proc.wait(30)
    done = max(r["step"] for r in run.metrics())
    last = run.last_checkpoint()
    assert last is not None and last.step >= done - 1  # only a step in flight can be lost
    proc = _trainer("resume", str(run.root))
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == runner.EXIT_OK, out[-2000:]
    assert [r["step"] for r in run.metrics()] == [1, 2, 3, 4]  # no duplicated or missing step


def test_items_outside_the_corpus_are_named_and_a_run_without_any_is_refused(  # type: ignore[no-untyped-def]
    sampled, tmp_path, caplog
) -> None:
    ds = tmp_path / "ds.json"
    ds.write_text(
        json.dumps(
            {
                "examples": [
                    {
                        "uid": "lost",
                        "query": "q?",
                        "reference_answer": "a",
                        "meta_info": {"file_name": "gamma.pdf", "reference_page": [1]},
                    }
                ]
            }
        ),
        encoding="utf-8",
    )
    rc = runner.start(sampled(dataset=str(ds)), str(tmp_path / "run"))
    assert rc == runner.EXIT_BAD
    state = TrainRun.open(tmp_path / "run").state()
    assert state["status"] == "failed" and "lost" in state["error"] and "gamma.pdf" in state["error"]


def test_a_search_server_that_goes_down_mid_rollout_stops_the_run(  # type: ignore[no-untyped-def]
    sampled, toy_data, processor, tmp_path
) -> None:
    from vrag_trainer.data import serve_search

    url, stop = serve_search(toy_data, ["toy"])
    script = vrag_script(processor)
    reply = script.reply

    def dying(text: str, n: int, k: int) -> str:
        if k == 1:
            stop()  # the server dies after the rollouts started
        return reply(text, n, k)

    script.reply = dying
    rc = runner.start(
        sampled(search_url=url, max_steps=2), str(tmp_path / "run"), generator=lambda _m, _p: script
    )
    run = TrainRun.open(tmp_path / "run")
    assert rc == runner.EXIT_STOPPED
    assert run.state()["status"] == "stopped" and "search server" in run.state()["error"]
    assert run.metrics() == []  # nothing was trained on the broken step


def test_a_judge_that_fails_or_talks_junk_is_counted_not_fatal(  # type: ignore[no-untyped-def]
    sampled, processor, tmp_path
) -> None:
    from scripted_openai import ScriptedOpenAI

    script = [{"status": 500, "times": 2}, {"content": "I cannot say", "forever": True}]
    with ScriptedOpenAI(script) as srv:
        judge = {"kind": "url", "base_url": srv.base_url, "model": "judge", "retries": 1, "timeout": 5}
        cfg = sampled(max_steps=1, judge=judge)
        rc = runner.start(cfg, str(tmp_path / "run"), generator=lambda _m, p: vrag_script(p))
    assert rc == runner.EXIT_OK
    row = TrainRun.open(tmp_path / "run").metrics()[0]
    assert row["judge_failures"] == 4 and row["reward/judge"] == 0.0  # all four answers unjudged
    assert row["reward/format"] == 1.0


def test_nan_loss_stops_the_run_with_its_checkpoints_intact(  # type: ignore[no-untyped-def]
    sampled, tiny_model_dir, tmp_path
) -> None:
    import shutil

    from safetensors.torch import load_file, save_file

    bad = tmp_path / "nan-model"
    shutil.copytree(tiny_model_dir, bad)
    weights = load_file(str(bad / "model.safetensors"))
    key = next(k for k in weights if "lm_head" in k or "embed_tokens" in k)
    weights[key][0, 0] = float("nan")
    weights[key][:, 0] = float("nan")
    save_file(weights, str(bad / "model.safetensors"), metadata={"format": "pt"})
    rc = runner.start(
        sampled(model=str(bad), max_steps=5), str(tmp_path / "run"), generator=lambda _m, p: vrag_script(p)
    )
    run = TrainRun.open(tmp_path / "run")
    assert rc == runner.EXIT_FAILED
    assert "not finite" in run.state()["error"] and run.state()["status"] == "failed"
    assert all(r.get("nan_skipped") for r in run.metrics())


# Room for one ~3.7 MB checkpoint (weights 1.2 MB, Adam's state 2.5 MB) and the run's files, then:
# 4500k, the next one's weights do not fit (safetensors says "No space left"); 6000k, its weights fit
# and Adam's state does not (torch.save raises a RuntimeError about a stream position, naming nothing).
@pytest.mark.parametrize("size", ["4500k", "6000k"], ids=["weights", "optimiser"])
def test_disk_full_while_checkpointing_keeps_the_previous_checkpoint(  # type: ignore[no-untyped-def]
    sampled, processor, tmp_path, size
) -> None:
    from doubles import tmpfs

    with tmpfs(tmp_path / "small", size) as small:
        root = small / "run"
        cfg = sampled(max_steps=20, save_total_limit=20, samples_per_step=0, tensorboard=False)
        rc = runner.start(cfg, str(root), generator=lambda _m, p: vrag_script(p))
        run = TrainRun.open(root)
        assert rc == runner.EXIT_FAILED
        error = run.state()["error"]  # written: the failed save's partial files made room for it
        assert error and error.startswith("the disk is full; the last complete checkpoint"), error
        good = run.last_checkpoint()
        assert good is not None and f"(step {good.step}) is kept" in error  # the earlier one survives
        assert run.remove_incomplete_checkpoints() == []  # the partial one is already gone
        assert run.last_checkpoint() == good


def test_a_run_left_going_outlives_the_app_that_captured_its_output(sampled, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The app pipes the trainer's output into train.log; when the person quits and leaves the run
    going, the pipe breaks: the run must finish, its later output appended to train.log."""
    run = TrainRun(tmp_path / "run")
    cfg_file = _write(sampled(max_steps=4), tmp_path / "cfg.json")
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "VRAG_TRAINER_LOG_CAPTURED": "1",
        "VRAG_TRAINER_NICE": "7",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "vrag_trainer", "grpo", "--config", str(cfg_file), "--run", str(run.root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
    )
    _wait_step(run, 1, proc)  # type: ignore[arg-type]
    assert os.getpriority(os.PRIO_PROCESS, proc.pid) == os.getpriority(os.PRIO_PROCESS, 0) + 7
    assert proc.stdout is not None
    proc.stdout.close()  # the app is gone
    assert proc.wait(timeout=600) == runner.EXIT_OK
    assert [r["step"] for r in run.metrics()] == [1, 2, 3, 4]
    assert "finished at step 4" in run.log_path.read_text(encoding="utf-8")
