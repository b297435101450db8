"""`vrag-desktop eval answers` as a user runs it: the real CLI over the indexed sample corpus, the
scripted OpenAI-compatible server as both the agent's model and the judge; resume after kill -9;
a confused judge, a refusing judge and a failing agent run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import cli
from scripted_openai import ScriptedOpenAI

from vrag_desktop.core.datasets import DatasetItem, write_unified
from vrag_desktop.core.endpoints.profiles import EndpointProfile, ProfileStore, env_var_for
from vrag_desktop.core.run.store import RunStore

REPORT = "northwind_annual_report_2024.pdf"
ITEMS = [
    DatasetItem(
        "q1", "Who signed the letter to shareholders?", "Maren Alvarez", REPORT, (1,), query_type="fact"
    ),
    DatasetItem(
        "q2", "Which region generated the most revenue?", "North America", REPORT, (2,), query_type="fact"
    ),
    DatasetItem(
        "q3", "How fast did Asia-Pacific sales grow?", "21.1 percent", REPORT, (2,), query_type="number"
    ),
    DatasetItem("q4", "Who painted the appendix cover?", "Nobody", "appendix.pdf", (1,), query_type="number"),
]
# the scripted agent answers each question this way; the scripted judge says True for these uids
ANSWERS = {"q1": "Maren Alvarez", "q2": "Europe", "q3": "21.1 %", "q4": "Nobody"}
RIGHT = {"q1", "q3", "q4"}


def _uid(text: str) -> str:
    return next(i.uid for i in ITEMS if i.query in text)


def _text(body: dict[str, Any]) -> str:
    out = []
    for m in body.get("messages", []):
        c = m.get("content")
        out += [c] if isinstance(c, str) else [p.get("text", "") for p in c or [] if isinstance(p, dict)]
    return "\n".join(out)


def _is_judge(body: dict[str, Any]) -> bool:
    return "## Reference Answer" in _text(body)


def model(special: Callable[[str, dict[str, Any]], dict[str, Any] | None] | None = None) -> Callable:
    """Agent: search first, then answer; judge: True for RIGHT. ``special`` may override a turn."""

    def turn(body: dict[str, Any]) -> dict[str, Any]:
        uid = _uid(_text(body))
        got = special(uid, body) if special else None
        if got is not None:
            return got
        if _is_judge(body):
            return {"content": f"<judge>{uid in RIGHT}</judge>"}
        if not any(m.get("role") == "assistant" for m in body["messages"]):
            return {"content": f"<think>Look it up.</think>\n<search>{ITEMS[int(uid[1]) - 1].query}</search>"}
        return {"content": f"<think>Found it.</think>\n<answer>{ANSWERS[uid]}</answer>"}

    return turn


def _profile(data: Path, name: str, url: str) -> dict[str, str]:
    ProfileStore(data / "config").save(
        EndpointProfile(name, "custom", base_url=url, model="scripted-model", max_attempts=1)
    )
    return {env_var_for(name): "k-test"}


def _dataset(tmp: Path) -> Path:
    ds = tmp / "answers.json"
    write_unified(ds, ITEMS)
    return ds


def _args(ds: Path, out: Path, profile: str, *extra: str) -> list[str]:
    return [
        *("eval", "answers", "--dataset", str(ds), "--agent", "vrag", "--profile", profile),
        *("--out", str(out), "--json", "--max-steps", "4", *extra),
    ]


def _rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]


def test_end_to_end_accuracy_runs_and_report(sample_index: Path, tmp_path: Path) -> None:
    out = tmp_path / "ev"
    with ScriptedOpenAI(default=model()) as srv:
        env = _profile(sample_index, "eval-e2e", srv.base_url)
        proc = cli(*_args(_dataset(tmp_path), out, "eval-e2e"), data_dir=sample_index, env=env)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["complete"] and summary["items"] == 4
    assert summary["accuracy"] == 0.75 and summary["judge_failures"] == 0 and summary["errors"] == 0
    assert summary["by_query_type"]["fact"]["accuracy"] == 0.5
    assert summary["by_query_type"]["number"]["accuracy"] == 1.0
    assert [p["uid"] for p in summary["not_scored"]] == ["q4"]
    rows = {r["uid"]: r for r in _rows(out)}
    assert (
        rows["q1"]["format"] == 1.0 and rows["q1"]["answer"] == "Maren Alvarez" and rows["q1"]["judge"] == 1
    )
    assert rows["q1"]["ndcg"] is not None and rows["q4"]["ndcg"] is None and "no NDCG" in rows["q4"]["note"]
    assert rows["q2"]["reward"] == 0.1 * 1 + 0.2 * rows["q2"]["ndcg"]
    assert rows["q1"]["steps"] >= 2 and rows["q1"]["shown"]
    saved = {r.id: r for r in RunStore(sample_index / "runs").list()}
    for r in rows.values():
        assert saved[r["run_id"]].status == "answered"
    html = (out / "report.html").read_text()
    assert html.startswith("<!doctype html>") and html.count("<svg") == 3 and rows["q3"]["run_id"] in html


def test_resume_after_kill_9_redoes_only_the_killed_item(sample_index: Path, tmp_path: Path) -> None:
    out, ds = tmp_path / "ev", _dataset(tmp_path)
    stalled: list[bool] = []

    def slow_q2(uid: str, body: dict[str, Any]) -> dict[str, Any] | None:
        if uid == "q2" and not _is_judge(body) and not stalled:
            stalled.append(True)
            return {"hang": 60}
        return None

    with ScriptedOpenAI(default=model(slow_q2)) as srv:
        env = _profile(sample_index, "eval-kill", srv.base_url)
        args = _args(ds, out, "eval-kill")
        proc = subprocess.Popen(
            [sys.executable, "-m", "vrag_desktop", *args],
            env={**os.environ, "VRAG_DESKTOP_DATA_DIR": str(sample_index), **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while not stalled and time.monotonic() < deadline:
            time.sleep(0.05)
        assert stalled, "item 2 was never asked"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        assert [r["uid"] for r in _rows(out)] == ["q1"]
        before = len(srv.requests)
        again = cli(*args, data_dir=sample_index, env=env)
        asked = [_uid(_text(r.body)) for r in srv.requests[before:] if isinstance(r.body, dict)]
    assert again.returncode == 0, again.stderr
    assert "q1" not in asked and {"q2", "q3", "q4"} <= set(asked)
    uids = [r["uid"] for r in _rows(out)]
    assert sorted(uids) == ["q1", "q2", "q3", "q4"]
    assert json.loads(again.stdout)["accuracy"] == 0.75


def test_confused_judge_and_failed_run_are_recorded_and_the_rest_go_on(
    sample_index: Path, tmp_path: Path
) -> None:
    def bad(uid: str, body: dict[str, Any]) -> dict[str, Any] | None:
        if uid == "q1" and _is_judge(body):
            return {"content": "It is hard to say."}
        if uid == "q3" and not _is_judge(body):
            return {"status": 500}
        return None

    out = tmp_path / "ev"
    with ScriptedOpenAI(default=model(bad)) as srv:
        env = _profile(sample_index, "eval-bad", srv.base_url)
        proc = cli(*_args(_dataset(tmp_path), out, "eval-bad"), data_dir=sample_index, env=env)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["items"] == 4 and summary["judge_failures"] == 1 and summary["errors"] == 1
    rows = {r["uid"]: r for r in _rows(out)}
    assert rows["q1"]["judge"] is None and "neither True nor False" in rows["q1"]["judge_error"]
    assert rows["q3"]["error"] and rows["q3"]["judge"] == 0 and rows["q3"]["run_id"]
    assert rows["q4"]["judge"] == 1
    assert summary["accuracy"] == 1 / 3  # q2 wrong, q3 no answer, q4 right; q1 has no verdict


def test_a_judge_that_refuses_its_key_stops_the_evaluation(sample_index: Path, tmp_path: Path) -> None:
    out = tmp_path / "ev"
    with (
        ScriptedOpenAI(default=model()) as agent_srv,
        ScriptedOpenAI(default=model(), api_key="right") as jsrv,
    ):
        env = _profile(sample_index, "eval-agent", agent_srv.base_url)
        env |= _profile(sample_index, "eval-judge", jsrv.base_url)  # its key is "k-test": refused
        args = _args(_dataset(tmp_path), out, "eval-agent", "--judge-profile", "eval-judge")
        proc = cli(*args, data_dir=sample_index, env=env)
    assert proc.returncode == 1 and "refused the API key" in proc.stderr and "stopped" in proc.stderr
    assert "Traceback" not in proc.stderr and "k-test" not in proc.stderr
    assert not (out / "results.jsonl").exists() or _rows(out) == []


def test_ctrl_c_stops_at_the_running_item_which_a_rerun_redoes(sample_index: Path, tmp_path: Path) -> None:
    out, ds = tmp_path / "ev", _dataset(tmp_path)
    stalled: list[bool] = []

    def slow_q2(uid: str, body: dict[str, Any]) -> dict[str, Any] | None:
        if uid == "q2" and not _is_judge(body) and not stalled:
            stalled.append(True)
            return {"hang": 3}
        return None

    with ScriptedOpenAI(default=model(slow_q2)) as srv:
        env = _profile(sample_index, "eval-int", srv.base_url)
        proc = subprocess.Popen(
            [sys.executable, "-m", "vrag_desktop", *_args(ds, out, "eval-int")],
            env={**os.environ, "VRAG_DESKTOP_DATA_DIR": str(sample_index), **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not stalled and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "resume" in stderr and not json.loads(stdout)["complete"]
    assert [r["uid"] for r in _rows(out)] == ["q1"]


def test_judge_free_scoring_asks_no_judge(sample_index: Path, tmp_path: Path) -> None:
    """--judge exact: SQuAD exact match against the reference; no judge request is made."""
    out = tmp_path / "ev"
    with ScriptedOpenAI(default=model()) as srv:
        env = _profile(sample_index, "eval-exact", srv.base_url)
        proc = cli(
            *_args(_dataset(tmp_path), out, "eval-exact", "--judge", "exact"), data_dir=sample_index, env=env
        )
        bodies = srv.chat_bodies
    assert proc.returncode == 0, proc.stderr
    assert bodies and not any(_is_judge(b) for b in bodies)
    rows = {r["uid"]: r for r in _rows(out)}
    # q1 "Maren Alvarez" and q4 "Nobody" match exactly; "Europe" and "21.1 %" do not
    assert {uid: r["judge"] for uid, r in rows.items()} == {"q1": 1.0, "q2": 0.0, "q3": 0.0, "q4": 1.0}
    assert json.loads(proc.stdout)["accuracy"] == 0.5
