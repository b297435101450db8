"""Runs that would start but could not learn are stopped or named before the start (issue 30, item 6):
GGPO defaults to the VimRAG agent and refuses VRAG by name, a group of one rollout is refused saying
why, and an exact judge on sentence answers is warned about — by the config check and the pre-flight
that the CLI, the New-run dialog and the trainer share."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_training_launch import make_fake_trainer

from vrag_desktop.cli.main import main
from vrag_desktop.core.datasets import DatasetItem
from vrag_desktop.core.training.config import ConfigError, TrainConfig, load_config
from vrag_desktop.core.training.learnable import (
    AnswerStyle,
    answer_style,
    dataset_warnings,
    learning_warnings,
    looks_like_sentence,
)
from vrag_desktop.core.training.rundir import TrainRun

SENTENCES = [
    "The robot arm can lift a payload of 450 kg.",
    "Revenue grew by twelve percent compared with the previous year.",
    "It is located on the second floor of the main building.",
    "450 kg",
]


@pytest.fixture
def fake(tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    python = make_fake_trainer(tmp_path / "fake")
    monkeypatch.setenv("VRAG_TRAINER_PYTHON", str(python))
    return python


def _dataset(path: Path, answers: list[str]) -> Path:
    examples = [
        {"uid": f"q{i}", "query": f"Question {i}?", "reference_answer": a, "meta_info": {}}
        for i, a in enumerate(answers)
    ]
    path.write_text(json.dumps({"examples": examples}), encoding="utf-8")
    return path


def _train(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["train", *args])
    out, err = capsys.readouterr()
    return rc, out, err


# ---- GGPO trains VimRAG -------------------------------------------------------------------------
def test_ggpo_without_an_agent_trains_vimrag_and_grpo_vrag(tmp_path: Path) -> None:
    assert TrainConfig(model="m", dataset="d", algorithm="ggpo").agent == "vimrag"
    assert TrainConfig(model="m", dataset="d").agent == "vrag"
    assert TrainConfig.from_mapping({"model": "m", "dataset": "d", "algorithm": "ggpo"}).agent == "vimrag"
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"model": "m", "dataset": "d"}))
    assert load_config(f, algorithm="ggpo").agent == "vimrag"  # what `train ggpo` does
    # the resolved agent is written out, so a resumed run compares it as it was
    assert TrainConfig(model="m", dataset="d", algorithm="ggpo").to_dict()["agent"] == "vimrag"


def test_ggpo_with_the_vrag_agent_is_refused_by_name() -> None:
    with pytest.raises(ConfigError) as exc:
        TrainConfig(model="m", dataset="d", algorithm="ggpo", agent="vrag")
    assert exc.value.field == "agent"
    text = str(exc.value)
    assert (
        "GGPO" in text and "VRAG" in text and "graph node" in text and "learn only from its failures" in text
    )
    assert "set agent to vimrag" in text and "grpo" in text
    TrainConfig(model="m", dataset="d", algorithm="grpo", agent="vimrag")  # GRPO trains both


def test_train_ggpo_on_the_command_line(
    tmp_path: Path, fake: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"model": "tiny", "dataset": "d.json"}))
    rc, _, err = _train(capsys, "ggpo", "--config", str(cfg), "--run", str(tmp_path / "run"))
    assert rc == 0, err
    assert TrainRun.open(tmp_path / "run").config().agent == "vimrag"
    launched = json.loads((tmp_path / "run" / "launch-config.json").read_text())
    assert launched["agent"] == "vimrag"
    rc, _, err = _train(
        capsys, "ggpo", "--config", str(cfg), "--run", str(tmp_path / "r2"), "--set", "agent=vrag"
    )
    assert rc == 2 and "agent: GGPO trains the VimRAG agent, not VRAG" in err, err
    assert not (tmp_path / "r2").exists()


# ---- a group of one -----------------------------------------------------------------------------
def test_a_group_of_one_rollout_is_refused_saying_why() -> None:
    for n in (1, 0):
        with pytest.raises(ConfigError) as exc:
            TrainConfig(model="m", dataset="d", group_size=n)
        assert exc.value.field == "group_size"
        assert f"must be >= 2 (rollouts per prompt), not {n}" in str(exc.value)
        assert "nothing to be compared with" in str(exc.value)


# ---- a judge that can never score the answers -----------------------------------------------------
def test_sentences_are_told_from_short_answers() -> None:
    assert looks_like_sentence("The robot arm can lift a payload of 450 kg.")
    assert looks_like_sentence("It lifts 450 kg.")  # four words ending like a sentence
    for short in ("450 kg", "Oslo", "42 million dollars", "the Eiffel Tower", "$4.5 million"):
        assert not looks_like_sentence(short), short


def test_exact_judge_on_sentence_answers_is_warned_about_with_the_count() -> None:
    items = [DatasetItem(f"q{i}", "Q?", a, "f.pdf", (1,)) for i, a in enumerate(SENTENCES)]
    items.append(DatasetItem("empty", "Q?", "", "f.pdf", (1,)))  # not trained on: not counted
    style = answer_style(items)
    assert (style.total, style.sentences, style.with_pages) == (4, 3, 4)
    exact = TrainConfig.from_mapping({"model": "m", "dataset": "d", "judge": {"kind": "exact"}})
    (warning,) = learning_warnings(exact, style)
    assert warning.startswith("judge.kind: exact")
    assert "3 of 4 reference answers look like whole sentences" in warning
    assert "anls" in warning and "model judge" in warning and "The robot arm" in warning
    for kind in ("anls", "profile"):
        cfg = TrainConfig.from_mapping({"model": "m", "dataset": "d", "judge": {"kind": kind}})
        assert learning_warnings(cfg, style) == []
    unjudged = TrainConfig.from_mapping(
        {"model": "m", "dataset": "d", "judge": {"kind": "exact"}, "reward": {"judge": 0}}
    )
    assert learning_warnings(unjudged, style) == []  # the judge does not count: nothing lost
    short = answer_style([DatasetItem("a", "Q?", "450 kg"), DatasetItem("b", "Q?", "Oslo")])
    assert learning_warnings(exact, short) == []
    few = AnswerStyle(total=10, sentences=1, example="A sentence of six words here.", with_pages=10)
    assert learning_warnings(exact, few) == []  # one in ten: the others can still be matched


def test_ndcg_alone_without_reference_pages_is_warned_about() -> None:
    cfg = TrainConfig.from_mapping(
        {"model": "m", "dataset": "d", "reward": {"judge": 0, "format": 0, "ndcg": 1}}
    )
    (warning,) = learning_warnings(cfg, answer_style([DatasetItem("a", "Q?", "Oslo")]))
    assert warning.startswith("reward: only NDCG is weighted") and "every reward is 0" in warning
    assert learning_warnings(cfg, answer_style([DatasetItem("a", "Q?", "Oslo", "f.pdf", (2,))])) == []


def test_the_command_line_prints_the_warning_before_it_launches(
    tmp_path: Path, fake: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _dataset(tmp_path / "sentences.json", SENTENCES)
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"model": "tiny", "dataset": str(data), "judge": {"kind": "exact"}}))
    rc, _, err = _train(capsys, "grpo", "--config", str(cfg), "--run", str(tmp_path / "run"))
    assert rc == 0, err
    assert "warning: judge.kind: exact can hardly ever score this dataset: 3 of 4" in err
    rc, _, err = _train(
        capsys, "grpo", "--config", str(cfg), "--run", str(tmp_path / "r2"), "--set", "judge.kind=anls"
    )
    assert rc == 0 and "warning:" not in err


def test_a_dataset_that_cannot_be_read_gives_no_warning_here(tmp_path: Path) -> None:
    """The trainer refuses it, naming why; the pre-flight's warnings do not stand in its way."""
    cfg = TrainConfig.from_mapping({"model": "m", "dataset": str(tmp_path / "none.json")})
    assert dataset_warnings(cfg, tmp_path) == []
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert dataset_warnings(cfg.with_changes(dataset=str(bad)), tmp_path) == []
