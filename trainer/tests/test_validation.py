"""The validation curve (issue 30, item 4) in real tiny-model GRPO runs: the held-out items are
evaluated every ``validation.eval_steps`` steps and at the end with the evaluation's metric names,
the best step gets a checkpoint that rotation keeps and ``export --best`` exports; a run whose
validations all score 0 marks no best, and ``export --best`` of a warm-started one writes the warm
start's weights (of another: refused, saying why); a dataset without validation items is split (and
said); a validation set with nothing to validate is refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import ScriptedGenerator
from test_training import ANSWERS, _changed, _config, _weights, vrag_script
from vrag_trainer import runner

from vrag_desktop.core.training.rundir import TrainRun

#: The held-out questions: the toy corpus's facts, asked in other words than the training items.
VAL = [
    {
        "uid": "v1",
        "query": "How much money did Alpha Corp take in during 2023?",
        "reference_answer": "42 million dollars",
        "meta_info": {"file_name": "alpha.pdf", "reference_page": [1]},
    },
    {
        "uid": "v2",
        "query": "In which city does Beta have its headquarters?",
        "reference_answer": "Oslo",
        "meta_info": {"file_name": "beta.pdf", "reference_page": [2]},
    },
]
VAL_KEYS = ("val/reward", "val/accuracy", "val/format", "val/ndcg", "val/recall", "val/items")


def _script(processor: Any) -> ScriptedGenerator:
    """Training questions as :func:`vrag_script`; the held-out ones right at the first validation
    only, so the first is the best and every later one worse."""
    train = vrag_script(processor)
    answered = {"n": 0}

    def reply(text: str, n_images: int, n: int) -> str:
        held = "take in during" in text or "which city" in text
        if not held:
            return train.reply(text, n_images, n)
        topic = "Alpha" if "Alpha" in text else "Beta"
        if n_images == 0:  # a query that names the fact: its page is the top hit, whatever the ranking's ties
            return (
                "<search>Alpha Corp revenue 2023</search>"
                if topic == "Alpha"
                else "<search>Beta headquarters</search>"
            )
        answered["n"] += 1
        return f"<answer>{ANSWERS[topic] if answered['n'] <= len(VAL) else 'no idea'}</answer>"

    return ScriptedGenerator(processor, reply)


def test_best_validation_is_checkpointed_kept_through_rotation_and_exported(  # type: ignore[no-untyped-def]
    tiny_model_dir, dataset_file, toy_data, search_url, tmp_path
) -> None:
    val = tmp_path / "val.json"
    val.write_text(json.dumps({"examples": VAL}), encoding="utf-8")
    # best at step 1, which is not a save step; a limit of one checkpoint would delete it
    validation = {"dataset": str(val), "eval_steps": 1}
    cfg = _config(
        tiny_model_dir, dataset_file, toy_data, search_url,
        max_steps=3, save_steps=2, save_total_limit=1, validation=validation,
    )  # fmt: skip
    rc = runner.start(cfg, str(tmp_path / "run"), generator=lambda _m, p: _script(p))
    assert rc == runner.EXIT_OK
    run = TrainRun.open(tmp_path / "run")
    rows = run.val_metrics()
    assert [r["step"] for r in rows] == [1, 2, 3]
    for r in rows:
        assert all(k in r for k in VAL_KEYS), r
        assert r["val/items"] == 2 and r["val/format"] == 1.0 and 0.0 < r["val/recall"] <= 1.0
    assert len({r["val/recall"] for r in rows}) == 1  # the same searches each time: greedy, one answer
    assert rows[0]["val/accuracy"] == 1.0 and rows[1]["val/accuracy"] == 0.0
    assert rows[0]["val/reward"] > rows[1]["val/reward"] == rows[2]["val/reward"]
    assert [r["best"] for r in rows] == [True, False, False]
    best = run.best()
    assert best is not None and best.step == 1 and best.value == pytest.approx(rows[0]["val/reward"])
    assert best.checkpoint is not None
    # saved at step 1 for being the best; step 2 (save_steps) rotated out; the last kept
    assert [c.step for c in run.complete_checkpoints()] == [1, 3]
    assert not run.checkpoint_dir(2).exists()
    assert len(run.metrics()) == 3  # the step rows stay one per step
    log = run.log_path.read_text(encoding="utf-8")
    assert "2 of 2 item(s) of val.json match the corpora" in log
    assert "validation: step 1 is the best so far" in log
    events = b"".join(p.read_bytes() for p in run.tensorboard.rglob("events.out.tfevents*"))
    assert b"val/reward" in events and b"val/accuracy" in events
    # export --best: checkpoint 1's weights, not the last checkpoint's
    out = runner.export(str(run.root), str(tmp_path / "best"), best=True)
    last = runner.export(str(run.root), str(tmp_path / "last"))
    assert _changed(_weights(out), _weights(run.checkpoint_dir(1))) == 0
    assert _changed(_weights(last), _weights(run.checkpoint_dir(3))) == 0
    assert _changed(_weights(out), _weights(last)) > 0


def test_no_validation_set_splits_the_dataset_and_says_so(  # type: ignore[no-untyped-def]
    tiny_model_dir, dataset_file, toy_data, search_url, tmp_path
) -> None:
    trained: set[str] = set()
    cfg = _config(
        tiny_model_dir, dataset_file, toy_data, search_url,
        max_steps=3, prompts_per_step=1, validation={"eval_steps": 2, "fraction": 0.5},
    )  # fmt: skip
    rc = runner.start(
        cfg,
        str(tmp_path / "run"),
        generator=lambda _m, p: vrag_script(p),
        on_step=lambda _t, rollouts, _rows: trained.update(r.uid for r in rollouts),
    )
    assert rc == runner.EXIT_OK
    run = TrainRun.open(tmp_path / "run")
    record = json.loads(run.validation_path.read_text(encoding="utf-8"))
    assert record["source"] == "split" and len(record["uids"]) == 1
    (held,) = record["uids"]
    assert held not in trained and len(trained) == 1  # held out: never trained on
    log = run.log_path.read_text(encoding="utf-8")
    assert "1 of the 2 usable training item(s) are held out (validation.fraction 0.5, seed 0)" in log
    assert f"not trained on: {held}" in log
    rows = run.val_metrics()
    assert [r["step"] for r in rows] == [2, 3]  # every 2 steps, and at the end
    assert all(r["val/items"] == 1 and all(k in r for k in VAL_KEYS) for r in rows)


def _unformatted_script(processor: Any) -> ScriptedGenerator:
    """Training questions as :func:`vrag_script`; the held-out ones answered without searching, so
    the format check fails and every validation (the warm start's included) scores 0."""
    train = vrag_script(processor)

    def reply(text: str, n_images: int, n: int) -> str:
        if "take in during" in text or "which city" in text:
            return "<answer>no idea</answer>"
        return train.reply(text, n_images, n)

    return ScriptedGenerator(processor, reply)


def test_validations_that_all_score_0_mark_no_best_and_export_best_writes_the_warm_start(  # type: ignore[no-untyped-def]
    tiny_model_dir, dataset_file, toy_data, search_url, tmp_path, caplog
) -> None:
    import logging
    import shutil

    warm = tmp_path / "warm"  # a model folder to start from (init_from), as an SFT export is
    shutil.copytree(tiny_model_dir, warm)
    val = tmp_path / "val.json"
    val.write_text(json.dumps({"examples": VAL}), encoding="utf-8")
    cfg = _config(
        tiny_model_dir, dataset_file, toy_data, search_url, max_steps=2, init_from=str(warm),
        validation={"dataset": str(val), "eval_steps": 1},
    )  # fmt: skip
    rc = runner.start(cfg, str(tmp_path / "run"), generator=lambda _m, p: _unformatted_script(p))
    assert rc == runner.EXIT_OK
    run = TrainRun.open(tmp_path / "run")
    rows = run.val_metrics()
    assert [(r["step"], r["val/reward"], r["best"]) for r in rows] == [
        (0, 0.0, False),
        (1, 0.0, False),
        (2, 0.0, False),
    ]
    assert not run.best_path.exists() and run.best() is None  # no 0-value step called the best
    assert [c.step for c in run.complete_checkpoints()] == [1, 2]
    assert "is the best so far" not in run.log_path.read_text(encoding="utf-8")
    # export --best: the warm start's weights, byte for byte, with its processor files
    with caplog.at_level(logging.INFO, logger="vrag_trainer"):
        out = runner.export(str(run.root), str(tmp_path / "best"), best=True)
    assert (out / "model.safetensors").read_bytes() == (warm / "model.safetensors").read_bytes()
    assert (out / "config.json").is_file() and (out / "tokenizer_config.json").is_file()
    assert _changed(_weights(out), _weights(run.checkpoint_dir(2))) > 0  # not the last checkpoint
    said = caplog.text
    assert (
        f"exporting the warm start's weights {warm}: no validation beat the warm start (val/reward 0.0000 at step 0)"
        in said
    )
    assert f"exported the warm start's weights to {out}" in said


def test_export_best_of_a_run_without_validation_says_so(tmp_path: Path) -> None:
    from vrag_desktop.core.training.config import TrainConfig

    run = TrainRun.create(tmp_path / "run", TrainConfig(model="m", dataset="d"))
    ckpt = run.checkpoint_dir(2)
    ckpt.mkdir(parents=True)
    run.mark_complete(ckpt, 2)
    with pytest.raises(runner.RunRefused, match="no best checkpoint: no validation has run"):
        runner.export(str(run.root), str(tmp_path / "out"), best=True)
    run.write_best(1, "val/reward", 0.5)  # checkpoint 1 deleted by hand
    with pytest.raises(runner.RunRefused, match=r"best checkpoint .* \(step 1, val/reward 0.5000\) is gone"):
        runner.export(str(run.root), str(tmp_path / "out"), best=True)


def test_export_best_of_a_run_that_scored_0_without_a_warm_start_is_refused(tmp_path: Path) -> None:
    """A run written before the rule: its best.json names a 0-value step, which is no best."""
    from vrag_desktop.core.training.config import TrainConfig

    run = TrainRun.create(tmp_path / "run", TrainConfig(model="m", dataset="d"))
    for step in (1, 2):
        run.checkpoint_dir(step).mkdir(parents=True)
        (run.checkpoint_dir(step) / "config.json").write_text("{}")
        run.mark_complete(run.checkpoint_dir(step), step)
        run.append_val_metrics({"step": step, "val/reward": 0.0, "best": step == 1})
    run.write_best(1, "val/reward", 0.0)
    with pytest.raises(runner.RunRefused, match="run has no best checkpoint: no validation scored above 0"):
        runner.export(str(run.root), str(tmp_path / "out"), best=True)
    assert not (tmp_path / "out").exists()


def test_a_validation_set_with_nothing_to_validate_is_refused(  # type: ignore[no-untyped-def]
    tiny_model_dir, dataset_file, toy_data, search_url, tmp_path
) -> None:
    val = tmp_path / "val.json"
    row = {"query": "Q?", "reference_answer": "x", "meta_info": {"file_name": "elsewhere.pdf"}}
    val.write_text(json.dumps({"examples": [{"uid": "far", **row}]}), encoding="utf-8")
    cfg = _config(
        tiny_model_dir, dataset_file, toy_data, search_url, validation={"dataset": str(val), "eval_steps": 1}
    )
    rc = runner.start(cfg, str(tmp_path / "run"), generator=lambda _m, p: vrag_script(p))
    assert rc == runner.EXIT_BAD
    error = TrainRun.open(tmp_path / "run").state()["error"]
    assert error.startswith("validation.dataset: none of the 1 item(s) of")
    assert "far: elsewhere.pdf is not in the indexed files" in error


def test_the_trainers_export_says_it_writes_the_warm_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``python -m vrag_trainer export --best`` of a run written before the rule (its best.json below
    the warm start): the warm start's files, and stderr says which weights and why."""
    from vrag_trainer.__main__ import main

    from vrag_desktop.core.training.config import TrainConfig

    warm = tmp_path / "warm"
    warm.mkdir()
    for name, data in (
        ("config.json", b"{}"),
        ("model.safetensors", b"warm"),
        ("tokenizer_config.json", b"{}"),
    ):
        (warm / name).write_bytes(data)
    (warm / "COMPLETE").write_text("x")  # a merged LoRA warm start's marker: not a model file
    run = TrainRun.create(tmp_path / "run", TrainConfig(model="m", dataset="d", init_from=str(warm)))
    run.write_state(init_weights=str(warm))
    run.checkpoint_dir(1).mkdir(parents=True)
    (run.checkpoint_dir(1) / "config.json").write_text("{}")
    (run.checkpoint_dir(1) / "model.safetensors").write_bytes(b"step 1")
    run.mark_complete(run.checkpoint_dir(1), 1)
    run.append_val_metrics({"step": 0, "val/reward": 0.5, "best": False})
    run.append_val_metrics({"step": 1, "val/reward": 0.25, "best": True})
    run.write_best(1, "val/reward", 0.25)
    assert main(["export", str(run.root), "--out", str(tmp_path / "out"), "--best"]) == runner.EXIT_OK
    out, err = capsys.readouterr()
    assert out.strip() == str(tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "config.json",
        "model.safetensors",
        "tokenizer_config.json",
    ]
    assert (tmp_path / "out" / "model.safetensors").read_bytes() == b"warm"
    assert (
        f"exporting the warm start's weights {warm}: no validation beat the warm start (val/reward 0.5000 at "
        "step 0), so the best weights are still its own" in err
    )
    assert f"exported the warm start's weights to {tmp_path / 'out'}" in err
