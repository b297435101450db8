"""The trainer logs the pre-flight's "cannot learn" warnings (issue 30, item 6) in the words the
New-run dialog and ``vrag-desktop train`` show, once its data is matched and before the model loads;
and it refuses GGPO with the VRAG agent before touching anything."""

from __future__ import annotations

import json
import logging

from test_training import _config
from vrag_trainer import runner
from vrag_trainer.__main__ import main

from vrag_desktop.core.training.rundir import TrainRun

SENTENCES = {
    "alpha.pdf": "Alpha Corp earned forty two million dollars in revenue in 2023.",
    "beta.pdf": "The Beta headquarters are located in the city of Oslo.",
}


def test_the_trainer_logs_an_exact_judge_on_sentence_answers(  # type: ignore[no-untyped-def]
    tiny_model_dir, toy_data, search_url, tmp_path, caplog
) -> None:
    examples = [
        {
            "uid": f"q{i}",
            "query": "q?",
            "reference_answer": answer,
            "meta_info": {"file_name": name, "reference_page": [1]},
        }
        for i, (name, answer) in enumerate(SENTENCES.items())
    ]
    ds = tmp_path / "ds.json"
    ds.write_text(json.dumps({"examples": examples}), encoding="utf-8")
    # a model folder that cannot load: the run ends right after the pre-flight, no weights read
    cfg = _config(tmp_path / "no-model", ds, toy_data, search_url)
    assert cfg.judge.kind == "exact"
    with caplog.at_level(logging.WARNING, logger="vrag_trainer"):
        rc = runner.start(cfg, str(tmp_path / "run"))
    assert rc == runner.EXIT_BAD  # the missing model, not the warning
    warned = [r.getMessage() for r in caplog.records if "judge.kind: exact" in r.getMessage()]
    assert len(warned) == 1, caplog.text
    assert "2 of 2 reference answers look like whole sentences" in warned[0] and "anls" in warned[0]
    assert "model" in TrainRun.open(tmp_path / "run").state()["error"]


def test_the_trainer_refuses_ggpo_with_vrag_before_creating_the_run(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"model": "m", "dataset": "d.json", "agent": "vrag"}))
    assert main(["ggpo", "--config", str(f), "--run", str(tmp_path / "run")]) == runner.EXIT_BAD
    assert "agent: GGPO trains the VimRAG agent, not VRAG" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
