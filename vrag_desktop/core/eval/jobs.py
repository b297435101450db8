"""An evaluation job is assembled in exactly one module that the CLI and the app both call: the
dataset read and matched to the corpora, the search engine, the fingerprint that decides whether a
folder resumes, the folder's name under ``<data>/evaluations``, the judge.

Why one place: a folder started by the CLI must resume from the app (and back), which holds only
while both compute the same fingerprint and the same default folder. The agent of an answers
evaluation is built above core (``vrag_desktop.api``: the same path as ``ask``), so it comes in as a
factory.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vrag_desktop.core.eval.store import EvalError, EvalStore
from vrag_desktop.core.progress import CancelToken, Progress

if TYPE_CHECKING:
    from vrag_desktop.core.corpus.library import Library
    from vrag_desktop.core.datasets import Dataset
    from vrag_desktop.core.endpoints.profiles import ProfileStore
    from vrag_desktop.core.eval.answers_eval import QuestionAgent
    from vrag_desktop.core.eval.matching import DatasetMatch
    from vrag_desktop.core.run.assemble import Endpoint
    from vrag_desktop.core.search.engine import SearchEngine

__all__ = [
    "AgentSpec",
    "EvalJob",
    "answers_job",
    "dataset_digest",
    "default_folder",
    "evaluations_dir",
    "retrieval_job",
]

Summary = dict[str, Any]


@dataclass(frozen=True)
class AgentSpec:
    """What the agent factory needs to build the evaluation's agent (one saved run per question)."""

    agent: str  # vrag | vimrag
    endpoint: Endpoint
    engine: SearchEngine
    corpora: list[str]
    data_dir: Path
    max_steps: int | None


AgentFactory = Callable[[AgentSpec], "QuestionAgent"]


@dataclass
class EvalJob:
    """A ready evaluation: ``run(cancel)`` is the core generator (Progress … → summary); ``close()``
    releases the search engine and the judge, whatever happened."""

    kind: str
    store: EvalStore
    match: DatasetMatch
    run: Callable[[CancelToken | None], Generator[Progress, None, Summary]]
    _closers: list[Callable[[], None]] = field(default_factory=list)

    @property
    def folder(self) -> Path:
        return self.store.folder

    def close(self) -> None:
        while self._closers:
            self._closers.pop()()


def evaluations_dir(data_root: str | Path) -> Path:
    return Path(data_root) / "evaluations"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:60] or "x"


def default_folder(
    data_root: str | Path, kind: str, dataset: str | Path, corpora: Sequence[str], agent: str | None = None
) -> Path:
    """``<data>/evaluations/<kind>[-<agent>]-<dataset>-<corpora>``: the same question asked again lands
    in the same folder, so it resumes."""
    parts = [kind, *([agent] if agent else []), _slug(Path(dataset).stem), _slug("+".join(corpora))]
    return evaluations_dir(data_root) / "-".join(parts)


def dataset_digest(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def _read(path: str | Path) -> Dataset:
    from vrag_desktop.core.datasets import load_dataset

    return load_dataset(path, need_answers=False)  # an item without an answer is named, not fatal


def _match(
    dataset: Dataset, engine: SearchEngine, on_match: Callable[[DatasetMatch], None] | None
) -> tuple[DatasetMatch, list[str]]:
    """The dataset matched to the engine's corpora (the dataset's own problems included, shown to
    ``on_match`` before anything is scored) and the corpora's names, sorted as fingerprints hold them."""
    from vrag_desktop.core.eval.matching import corpus_files, match_dataset

    match = match_dataset(dataset.items, corpus_files(engine.corpora))
    match.problems.extend(dataset.problems)
    if on_match is not None:
        on_match(match)
    return match, sorted(c.name for c in engine.corpora)


def _open_store(
    kind: str,
    data_root: str | Path,
    dataset_path: str | Path,
    corpora: list[str],
    settings: dict[str, Any],
    *,
    agent: str | None = None,
    out: str | Path | None,
    restart: bool,
    **header: Any,
) -> EvalStore:
    """The evaluation's folder (``out``, else its default one), started or resumed. Its fingerprint
    is the kind, the dataset's bytes, the corpora and ``settings``: a folder holding another one is
    refused (EvalError), so results of different settings never mix."""
    fingerprint = {"kind": kind, "dataset_sha256": dataset_digest(dataset_path), "corpora": corpora}
    folder = Path(out) if out else default_folder(data_root, kind, dataset_path, corpora, agent)
    head = {"fingerprint": fingerprint | settings, "dataset": str(Path(dataset_path).resolve()), **header}
    return EvalStore.open(folder, head, restart=restart)


def retrieval_job(
    library: Library,
    data_root: str | Path,
    dataset_path: str | Path,
    corpora: Sequence[str] | None = None,
    *,
    ks: Sequence[int] | None = None,
    device: str | None = None,
    hybrid: bool = True,
    out: str | Path | None = None,
    restart: bool = False,
    reuse: Any = None,
    on_match: Callable[[DatasetMatch], None] | None = None,
) -> EvalJob:
    """Read, match and open a retrieval evaluation. Raises DatasetError / SearchError / EvalError
    (nothing to score, a folder of other settings) with what to do."""
    from vrag_desktop.core.eval.retrieval import DEFAULT_KS, evaluate_retrieval
    from vrag_desktop.core.search.engine import SearchEngine

    cuts = sorted(set(ks or DEFAULT_KS))
    if cuts[0] < 1:
        raise EvalError("-k must be at least 1")
    dataset = _read(dataset_path)
    engine = SearchEngine(library, corpora, hybrid=hybrid, device=device, reuse=reuse)
    try:
        match, names = _match(dataset, engine, on_match)
        if not match.matched:
            raise EvalError("no item of the dataset can be scored against these corpora (see above)")
        settings = {
            "embedder": sorted({c.embedder_id or "" for c in engine.corpora}),
            "hybrid": bool(hybrid),
            "ks": cuts,
        }
        store = _open_store("retrieval", data_root, dataset_path, names, settings, out=out, restart=restart)
    except BaseException:
        engine.close()
        raise

    def run(cancel: CancelToken | None) -> Generator[Progress, None, Summary]:
        return evaluate_retrieval(match, engine.search_batch, store, ks=cuts, cancel=cancel)

    return EvalJob("retrieval", store, match, run, [engine.close])


def answers_job(
    library: Library,
    data_root: str | Path,
    profiles: ProfileStore,
    dataset_path: str | Path,
    corpora: Sequence[str] | None,
    *,
    agent: str,
    profile: str | None,
    make_agent: AgentFactory,
    model: str | None = None,
    judge: str = "model",
    judge_profile: str | None = None,
    judge_model: str | None = None,
    max_steps: int | None = None,
    device: str | None = None,
    out: str | Path | None = None,
    restart: bool = False,
    reuse: Any = None,
    on_match: Callable[[DatasetMatch], None] | None = None,
) -> EvalJob:
    """Read, match and open an answers evaluation with its agent and scorer. Raises ProfileError,
    DatasetError, SearchError or EvalError with what to do."""
    from vrag_desktop.core.eval.answers_eval import JudgeScorer, Scorer, evaluate_answers, metric_scorer
    from vrag_desktop.core.eval.judge import Judge
    from vrag_desktop.core.run.assemble import Endpoint
    from vrag_desktop.core.search.engine import SearchEngine

    if max_steps is not None and max_steps < 1:
        raise EvalError("--max-steps must be at least 1")
    dataset = _read(dataset_path)
    endpoint = Endpoint.from_profile(profiles, profile, model)
    judge_name = judge_profile or profile
    judge_endpoint = Endpoint.from_profile(profiles, judge_name, judge_model) if judge == "model" else None
    engine = SearchEngine(library, corpora, device=device, reuse=reuse)
    closers: list[Callable[[], None]] = [engine.close]
    try:
        match, names = _match(dataset, engine, on_match)
        settings = {
            "agent": agent,
            "model": endpoint.model_name,
            "judge": judge
            if judge_endpoint is None
            else f"model:{judge_name or profiles.active}:{judge_endpoint.model_name}",
            "max_steps": max_steps,
        }
        store = _open_store(
            "answers",
            data_root,
            dataset_path,
            names,
            settings,
            agent=agent,
            out=out,
            restart=restart,
            # not part of the fingerprint (a profile may be renamed), but what a resume starts from
            profiles={"agent": profile or profiles.active, "judge": judge_name or profiles.active},
        )
        the_agent = make_agent(AgentSpec(agent, endpoint, engine, names, Path(data_root), max_steps))
        scorer: Scorer = (
            metric_scorer(judge) if judge_endpoint is None else JudgeScorer(Judge(judge_endpoint))
        )
        if isinstance(scorer, JudgeScorer):
            closers.append(scorer.close)
    except BaseException:
        for close in reversed(closers):
            close()
        raise

    def run(cancel: CancelToken | None) -> Generator[Progress, None, Summary]:
        return evaluate_answers(dataset.items, match, the_agent, scorer, store, cancel=cancel)

    return EvalJob("answers", store, match, run, closers)
