"""The validation set of a training run (issue 30, item 4), Qt-free: the ``validation`` table is
checked like every config table (each bad value named), the split of a dataset without validation
items is deterministic, disjoint and said, a validation file with nothing to validate is refused by
name, ``max_items`` caps the set, the best checkpoint survives pruning, a best is above the warm
start and 0, and what ``export --best`` means for a run (best checkpoint, warm start, or why not)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import index_paths

from vrag_desktop.core.datasets import DatasetItem
from vrag_desktop.core.training.config import ConfigError, TrainConfig, changed_fields
from vrag_desktop.core.training.data import TrainingItems, training_items
from vrag_desktop.core.training.rundir import TrainRun
from vrag_desktop.core.training.validation import (
    best_choice,
    best_floor,
    best_words,
    is_new_best,
    split_items,
    start_value,
    validation_plan,
    validation_split,
)


def _cfg(**kw: Any) -> TrainConfig:
    return TrainConfig.from_mapping({"model": "m", "dataset": "train.json", **kw})


@pytest.mark.parametrize(
    "table,field,words",
    [
        ({"fraction": 0.0}, "validation.fraction", "must be > 0.0"),
        ({"fraction": 0.8}, "validation.fraction", "must be <= 0.5"),
        ({"eval_steps": -1}, "validation.eval_steps", "must be >= 0"),
        ({"eval_steps": 2.5}, "validation.eval_steps", "whole number"),
        ({"max_items": -3}, "validation.max_items", "must be >= 0"),
        ({"dataset": 7, "eval_steps": 1}, "validation.dataset", "must be text"),
        ({"dataset": "val.json"}, "validation.dataset", "only when validation.eval_steps is above 0"),
        ({"dataset": "train.json", "eval_steps": 1}, "validation.dataset", "is the training dataset itself"),
        ({"evalsteps": 1}, "validation.evalsteps", "did you mean 'eval_steps'"),
    ],
)
def test_bad_validation_values_are_named(table: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        _cfg(validation=table)
    assert err.value.field == field and words in err.value.problem


def test_validation_is_off_by_default_and_only_what_it_measures_is_resume_safe() -> None:
    base = _cfg()
    assert base.validation.eval_steps == 0 and "off" in validation_plan(base)
    assert changed_fields(base, _cfg(validation={"eval_steps": 5, "max_items": 10})) == []
    # which items are held out decides what is trained on: not changeable on resume
    assert changed_fields(base, _cfg(validation={"fraction": 0.2})) == ["validation.fraction"]
    assert changed_fields(base, _cfg(validation={"dataset": "v.json", "eval_steps": 1})) == [
        "validation.dataset"
    ]
    plan = validation_plan(_cfg(seed=3, validation={"eval_steps": 4, "fraction": 0.25}))
    assert plan.startswith("Validation: every 4 step(s)") and "25%" in plan and "seed 3" in plan


def _items(n: int) -> TrainingItems:
    items = [DatasetItem(f"q{i}", f"Question {i}?", "42", "robots.pdf", (1,)) for i in range(n)]
    return TrainingItems(items, [("robots_1",)] * n, [("x", "not in the corpora")], ["robots"])


def test_the_split_is_deterministic_disjoint_and_keeps_the_order() -> None:
    data = _items(20)
    train, val = split_items(data, 0.1, seed=0)
    assert len(val.items) == 2 and len(train.items) == 18
    uids = [it.uid for it in val.items]
    assert not set(uids) & {it.uid for it in train.items}
    assert sorted(uids, key=lambda u: int(u[1:])) == uids  # the dataset's order
    assert [it.uid for it in split_items(data, 0.1, seed=0)[1].items] == uids  # same seed, same split
    assert any(
        [it.uid for it in split_items(data, 0.1, seed=s)[1].items] != uids for s in range(1, 5)
    )  # the seed decides
    assert train.problems == data.problems and len(train.golden) == 18
    assert len(split_items(_items(3), 0.01, seed=0)[1].items) == 1  # at least one held out
    assert len(split_items(_items(2), 0.5, seed=0)[0].items) == 1  # at least one trained on


def test_a_dataset_too_small_to_split_is_refused_by_name() -> None:
    with pytest.raises(ConfigError) as err:
        split_items(_items(1), 0.1, seed=0)
    assert err.value.field == "validation.fraction"
    assert "1 usable item(s): too few to split a validation set off" in err.value.problem


@pytest.fixture
def robots(data_dir: Path, library: Any, make_pdf: Any, minilm: Any, tmp_path: Path) -> Path:
    pdf = make_pdf("robots.pdf", ["Northwind annual report.", "Atlas robot: payload 450 kg."])
    corpus, _, _ = index_paths(library, "robots", [pdf], minilm)
    corpus.close()
    rows = [
        {"uid": f"q{i}", "query": f"Payload {i}?", "reference_answer": "450 kg",
         "meta_info": {"file_name": "robots.pdf", "reference_page": [2]}}
        for i in range(10)
    ]  # fmt: skip
    (tmp_path / "train.json").write_text(json.dumps({"examples": rows}), encoding="utf-8")
    return data_dir


def test_a_dataset_without_validation_items_is_split_and_said(robots: Path, tmp_path: Path) -> None:
    cfg = _cfg(dataset=str(tmp_path / "train.json"), seed=1, validation={"eval_steps": 5, "fraction": 0.2})
    found = training_items(cfg.dataset, ["robots"], robots)
    split = validation_split(cfg, found, robots)
    assert split.source == "split" and len(split.val.items) == 2 and len(split.train.items) == 8
    (said,) = split.lines()
    assert "no validation.dataset, so 2 of the 10 usable training item(s) are held out" in said
    assert "(validation.fraction 0.2, seed 1) and not trained on: " + ", ".join(split.uids) in said
    assert "8 train; evaluated every 5 step(s) and at the end" in said


def test_max_items_caps_the_validation_set_and_says_so(robots: Path, tmp_path: Path) -> None:
    cfg = _cfg(
        dataset=str(tmp_path / "train.json"), validation={"eval_steps": 1, "fraction": 0.5, "max_items": 2}
    )
    split = validation_split(cfg, training_items(cfg.dataset, ["robots"], robots), robots)
    assert len(split.val.items) == 2 and len(split.val.golden) == 2 and len(split.train.items) == 5
    assert "the first 2 of 5 validation items are evaluated (validation.max_items)" in split.lines()[-1]


def test_a_validation_file_is_matched_and_overlap_is_warned(robots: Path, tmp_path: Path) -> None:
    val = tmp_path / "val.json"
    rows = [
        {"uid": "v1", "query": "Payload 3?", "reference_answer": "450 kg",
         "meta_info": {"file_name": "robots.pdf", "reference_page": [2]}},
        {"uid": "v2", "query": "Which page?", "reference_answer": "2",
         "meta_info": {"file_name": "robots.pdf", "reference_page": [9]}},
        {"uid": "v3", "query": "Far?", "reference_answer": "x", "meta_info": {"file_name": "far.pdf"}},
    ]  # fmt: skip
    val.write_text(json.dumps({"examples": rows}), encoding="utf-8")
    cfg = _cfg(dataset=str(tmp_path / "train.json"), validation={"dataset": str(val), "eval_steps": 2})
    split = validation_split(cfg, training_items(cfg.dataset, ["robots"], robots), robots)
    assert (
        split.source == "file" and split.uids == ["v1"] and len(split.train.items) == 10
    )  # nothing held out
    lines = split.lines()
    assert (
        lines[0]
        == "validation: 1 of 3 item(s) of val.json match the corpora, evaluated every 2 step(s) and at the end"
    )
    assert any("left out of validation v2:" in ln and "do not exist" in ln for ln in lines)
    assert any("left out of validation v3: far.pdf is not in the indexed files" in ln for ln in lines)
    assert lines[-1].startswith(
        "warning: validation.dataset: 1 validation question(s) are also training questions (v1)"
    )


def test_a_validation_file_that_cannot_be_read_is_named(robots: Path, tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    for spec, words in (
        (tmp_path / "missing.json", "no such file"),
        (tmp_path / "broken.json", "cannot read"),
    ):
        cfg = _cfg(dataset=str(tmp_path / "train.json"), validation={"dataset": str(spec), "eval_steps": 2})
        with pytest.raises(ConfigError) as err:
            validation_split(cfg, training_items(cfg.dataset, ["robots"], robots), robots)
        assert err.value.field == "validation.dataset" and words in err.value.problem


def test_a_validation_file_with_nothing_to_validate_is_refused(robots: Path, tmp_path: Path) -> None:
    val = tmp_path / "val.json"
    row = {"uid": "v1", "query": "Q?", "reference_answer": "x", "meta_info": {"file_name": "far.pdf"}}
    val.write_text(json.dumps({"examples": [row]}), encoding="utf-8")
    cfg = _cfg(dataset=str(tmp_path / "train.json"), validation={"dataset": str(val), "eval_steps": 2})
    with pytest.raises(ConfigError) as err:
        validation_split(cfg, training_items(cfg.dataset, ["robots"], robots), robots)
    assert err.value.field == "validation.dataset"
    assert "none of the 1 item(s) of" in err.value.problem and "v1: far.pdf is not in" in err.value.problem


def test_pruning_keeps_the_best_checkpoint_and_truncation_drops_later_validations(tmp_path: Path) -> None:
    run = TrainRun.create(tmp_path / "run", _cfg())
    for step in (1, 2, 3, 4):
        run.checkpoint_dir(step).mkdir(parents=True)
        run.mark_complete(run.checkpoint_dir(step), step)
        run.append_val_metrics({"step": step, "val/reward": 0.1 * step})
    run.write_best(1, "val/reward", 0.9)
    run.prune_checkpoints(keep=2)
    assert [c.step for c in run.complete_checkpoints()] == [1, 3, 4]
    best = run.best()
    assert best is not None and best.checkpoint is not None and best.checkpoint.step == 1
    run.truncate_metrics(2)  # a resume from checkpoint 2 redoes steps 3 and 4
    assert [r["step"] for r in run.val_metrics()] == [1, 2]


def test_an_sft_run_draws_no_curve() -> None:
    with pytest.raises(ConfigError) as err:
        _cfg(algorithm="sft", validation={"eval_steps": 2})
    assert (
        err.value.field == "validation.eval_steps"
        and "an SFT run draws no validation curve" in err.value.problem
    )


def test_a_best_is_above_the_previous_best_the_warm_start_and_0() -> None:
    rows = [
        {"step": 0, "val/reward": 0.025},
        {"step": 5, "val/reward": 0.0},
        {"step": 10, "val/reward": 0.05},
    ]
    assert start_value(rows) == 0.025 and start_value(rows[1:]) is None
    assert is_new_best(0.05, None, 0.025) and is_new_best(0.1, None, None) and is_new_best(0.1, 0.05, None)
    assert not is_new_best(0.0, None, None)  # 0 answered nothing right
    assert not is_new_best(0.0, None, 0.025) and not is_new_best(0.025, None, 0.025)  # level is no rise
    assert not is_new_best(0.05, 0.05, None) and not is_new_best(0.04, 0.05, 0.025)
    assert not is_new_best(0.0, None, -0.5) and is_new_best(0.01, None, -0.5)  # the floor is 0 at least
    assert best_floor(None) == 0.0 and best_floor(0.375) == 0.375 and best_floor(-1.0) == 0.0
    assert best_words(0.1, None) == "the best so far"
    assert best_words(0.05, 0.025) == "the best so far, above the warm start (val/reward 0.0250 at step 0)"


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _scored_run(root: Path, rows: list[tuple[int, float]], *, warm: Path | None = None) -> TrainRun:
    """A validated run as the trainer leaves it: checkpoints 1-3, ``rows`` (step, val/reward), a
    warm start recorded as ``init_weights`` when ``warm`` is given."""
    run = TrainRun.create(root, _cfg(init_from=str(warm) if warm else "", validation={"eval_steps": 1}))
    if warm is not None:
        run.write_state(init_weights=str(warm))
    for step in (1, 2, 3):
        run.checkpoint_dir(step).mkdir(parents=True)
        run.mark_complete(run.checkpoint_dir(step), step)
    for step, value in rows:
        run.append_val_metrics({"step": step, "val/reward": value, "best": False})
    return run


def test_what_export_best_means_for_a_run(tmp_path: Path) -> None:
    from vrag_desktop.core.training.plan import LaunchRefused, export_run

    warm = tmp_path / "sft" / "export"
    warm.mkdir(parents=True)
    (warm / "config.json").write_text("{}")
    # no validation has run
    plain = _scored_run(tmp_path / "plain", [])
    got = best_choice(plain)
    assert (got.source, got.path, got.validated) == ("none", None, False)
    assert "plain has no best checkpoint: no validation has run" in got.reason
    # a best above 0 (no warm start): its checkpoint
    good = _scored_run(tmp_path / "good", [(1, 0.25), (2, 0.5), (3, 0.4)])
    good.write_best(2, "val/reward", 0.5)
    got = best_choice(good)
    assert (got.source, got.path, got.step, got.best) == (
        "checkpoint",
        good.checkpoint_dir(2),
        2,
        good.best(),
    )
    assert got.what() == "the best checkpoint (step 2, val/reward 0.5000)"
    # written before the rule: a best.json at 0 counts as no best; nothing to fall back on
    zero = _scored_run(tmp_path / "zero", [(1, 0.0), (2, 0.0)])
    zero.write_best(1, "val/reward", 0.0)
    before = _files(zero.root)
    got = best_choice(zero)
    assert (got.source, got.path, got.best, got.validated) == ("none", None, None, True)
    assert got.reason == (
        "zero has no best checkpoint: no validation scored above 0 (a reward of 0 answered nothing "
        "right), and the run has no warm start's weights to fall back on; export the last checkpoint instead"
    )
    with pytest.raises(LaunchRefused, match="zero has no best checkpoint: no validation scored above 0"):
        export_run(zero, "python", best=True)
    # warm-started, and no validation above its step 0 (an old best.json below it): its weights
    below = _scored_run(tmp_path / "below", [(0, 0.375), (1, 0.25), (2, 0.375)], warm=warm)
    below.write_best(1, "val/reward", 0.25)
    got = best_choice(below)
    assert (got.source, got.path, got.step, got.value, got.best) == ("warm_start", warm, 0, 0.375, None)
    assert (
        got.reason
        == "no validation beat the warm start (val/reward 0.3750 at step 0), so the best weights are still its own"
    )
    assert got.what() == f"the warm start's weights from {warm}"
    plan = export_run(below, "python", best=True)  # launched, not refused
    assert plan.what == "Export (warm start's weights)" and plan.argv[-1] == "--best"
    # ... and one above it: that checkpoint
    below.write_best(3, "val/reward", 0.5)
    assert best_choice(below).source == "checkpoint" and best_choice(below).step == 3
    # a warm start whose step 0 was not measured, every validation at 0: still its weights
    unmeasured = _scored_run(tmp_path / "unmeasured", [(1, 0.0)], warm=warm)
    got = best_choice(unmeasured)
    assert got.source == "warm_start" and got.start is None
    assert got.reason.startswith("no validation scored above 0 (the warm start's own was not measured)")
    # gone: the best checkpoint, or the warm start's weights
    good.checkpoint_dir(2).joinpath("COMPLETE").unlink()
    got = best_choice(good)
    assert got.source == "none" and "(step 2, val/reward 0.5000) is gone from checkpoints/" in got.reason
    moved = _scored_run(tmp_path / "moved", [(0, 0.375), (1, 0.0)], warm=tmp_path / "nowhere")
    got = best_choice(moved)
    assert got.source == "none" and f"the warm start's weights {tmp_path / 'nowhere'} are gone" in got.reason
    assert _files(zero.root) == before  # a reader: nothing written
