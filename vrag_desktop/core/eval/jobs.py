"""An evaluation job is assembled in exactly one module that the CLI and the app both call: the
dataset read and matched to the corpora, the search engine, the fingerprint that decides whether a
folder resumes, the folder's name under ``<data>/evaluations``, the judge.

Why one place: a folder started by the CLI must resume from the app (and back), which holds only
while both compute the same fingerprint and the same default folder. The agent of an answers
evaluation runs the app's one run path (:class:`~vrag_desktop.core.run.session.RunSession`, as
``ask`` and the Ask panel do), so every question is a run saved in History.
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
from vrag_desktop.core.search.fusion import DEFAULT_HYBRID

if TYPE_CHECKING:
    from vrag_desktop.core.corpus.library import Library
    from vrag_desktop.core.datasets import Dataset
    from vrag_desktop.core.endpoints.profiles import ProfileStore
    from vrag_desktop.core.eval.compare import EvalInfo
    from vrag_desktop.core.eval.matching import DatasetMatch
    from vrag_desktop.core.run.assemble import Endpoint
    from vrag_desktop.core.search.engine import SearchEngine

__all__ = [
    "EvalJob",
    "EvalRequest",
    "dataset_digest",
    "default_folder",
    "evaluations_dir",
    "open_job",
]

Summary = dict[str, Any]


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


@dataclass(frozen=True)
class EvalRequest:
    """What an evaluation is asked to do, in one shape whether it comes from the command line, the
    app's New evaluation dialog or a resume; :func:`open_job` assembles it."""

    kind: str  # retrieval | answers
    dataset: str  # a file path
    corpora: tuple[str, ...] = ()  # empty: all
    agent: str = "vrag"
    profile: str | None = None  # None: the active profile
    model: str | None = None  # the served name, overriding the profile's
    judge: str = "model"  # model | exact | anls
    judge_profile: str | None = None
    judge_model: str | None = None
    max_steps: int | None = None
    ks: tuple[int, ...] | None = None  # retrieval cut-offs (None: the defaults)
    hybrid: bool = DEFAULT_HYBRID
    rerank: str | None = None  # the reranker ("" none); None: the data directory's setting
    device: str | None = None
    out: str | None = None  # None: the default folder under <data>/evaluations
    restart: bool = False

    @classmethod
    def resume(cls, info: EvalInfo) -> EvalRequest:
        """The request that reopens ``info``'s folder with its own settings (the job resumes it)."""
        fp = info.fingerprint
        profiles = info.header.get("profiles") or {}
        judge = str(fp.get("judge") or "exact")
        judge_profile = None
        if judge.startswith("model:"):
            judge_profile = profiles.get("judge") or judge.split(":")[1]
            judge = "model"
        return cls(
            kind=info.kind,
            dataset=str(info.header.get("dataset") or ""),
            corpora=tuple(info.corpora),
            agent=str(fp.get("agent") or "vrag"),
            profile=profiles.get("agent"),
            judge=judge,
            judge_profile=judge_profile,
            max_steps=fp.get("max_steps"),
            hybrid=bool(fp.get("hybrid", DEFAULT_HYBRID)),
            rerank=str(fp.get("reranker") or ""),  # the folder's own ranking, whatever is set now
            ks=tuple(fp["ks"]) if fp.get("ks") else None,
            out=str(info.folder),
        )


def open_job(
    request: EvalRequest,
    library: Library,
    data_root: str | Path,
    profiles: ProfileStore,
    *,
    reuse: Any = None,
    on_match: Callable[[DatasetMatch], None] | None = None,
) -> EvalJob:
    """Read the dataset, match it to the corpora (``on_match`` sees the match before anything is
    scored) and open the job ``request`` asks for, started or resumed. ``reuse``: an embedder
    already loaded (the app's). Raises ProfileError, DatasetError, SearchError or EvalError (nothing
    to score, a folder of other settings) with what to do."""
    from vrag_desktop.core.search.engine import SearchEngine

    r = request
    if r.kind not in ("retrieval", "answers"):
        raise EvalError(f"unknown evaluation kind {r.kind!r} (retrieval or answers)")
    if r.max_steps is not None and r.max_steps < 1:
        raise EvalError("--max-steps must be at least 1")
    cuts = _cuts(r.ks)
    dataset = _read(r.dataset)
    answers = r.kind == "answers"
    endpoints = _endpoints(r, profiles) if answers else None
    engine = SearchEngine(
        library, list(r.corpora) or None, hybrid=r.hybrid, device=r.device, reuse=reuse, rerank=r.rerank
    )
    closers: list[Callable[[], None]] = [engine.close]
    try:
        match, names = _match(dataset, engine, on_match)
        if endpoints is None:
            job = _retrieval(r, data_root, dataset, engine, match, names, cuts)
        else:
            job = _answers(r, data_root, profiles, dataset, engine, match, names, endpoints)
    except BaseException:
        for close in reversed(closers):
            close()
        raise
    job._closers[:0] = closers
    return job


def _cuts(ks: Sequence[int] | None) -> list[int]:
    from vrag_desktop.core.eval.retrieval import DEFAULT_KS

    cuts = sorted(set(ks or DEFAULT_KS))
    if cuts[0] < 1:
        raise EvalError("-k must be at least 1")
    return cuts


def _endpoints(r: EvalRequest, profiles: ProfileStore) -> tuple[Endpoint, Endpoint | None]:
    """The agent's endpoint and the judge's (None: a metric, no judge model)."""
    from vrag_desktop.core.run.assemble import Endpoint

    endpoint = Endpoint.from_profile(profiles, r.profile, r.model)
    if r.judge != "model":
        return endpoint, None
    return endpoint, Endpoint.from_profile(profiles, r.judge_profile or r.profile, r.judge_model)


def _retrieval(
    r: EvalRequest,
    data_root: str | Path,
    dataset: Dataset,
    engine: SearchEngine,
    match: DatasetMatch,
    names: list[str],
    cuts: list[int],
) -> EvalJob:
    from vrag_desktop.core.eval.retrieval import evaluate_retrieval

    if not match.matched:
        raise EvalError("no item of the dataset can be scored against these corpora (see above)")
    settings = {
        "embedder": sorted({c.embedder_id or "" for c in engine.corpora}),
        "hybrid": bool(r.hybrid),
        "ks": cuts,
    }
    if engine.reranker:  # only then: folders made before rerankers keep their fingerprint
        settings["reranker"] = engine.reranker
    store = _open_store("retrieval", data_root, r.dataset, names, settings, out=r.out, restart=r.restart)

    def run(cancel: CancelToken | None) -> Generator[Progress, None, Summary]:
        return evaluate_retrieval(match, engine.search_batch, store, ks=cuts, cancel=cancel)

    return EvalJob("retrieval", store, match, run)


def _answers(
    r: EvalRequest,
    data_root: str | Path,
    profiles: ProfileStore,
    dataset: Dataset,
    engine: SearchEngine,
    match: DatasetMatch,
    names: list[str],
    endpoints: tuple[Endpoint, Endpoint | None],
) -> EvalJob:
    """An answers job: the agent asks, the scorer (a judge model or a metric) scores."""
    from vrag_desktop.core.eval.answers_eval import JudgeScorer, Scorer, evaluate_answers, metric_scorer
    from vrag_desktop.core.eval.judge import Judge
    from vrag_desktop.core.run.assemble import AgentOptions, SearchSource
    from vrag_desktop.core.run.session import RunSession, RunSpec

    endpoint, judge_endpoint = endpoints
    judge_name = r.judge_profile or r.profile
    settings = {
        "agent": r.agent,
        "model": endpoint.model_name,
        "judge": r.judge
        if judge_endpoint is None
        else f"model:{judge_name or profiles.active}:{judge_endpoint.model_name}",
        "max_steps": r.max_steps,
    }
    if engine.reranker:  # the agent's searches are reranked: part of what is measured
        settings["reranker"] = engine.reranker
    store = _open_store(
        "answers",
        data_root,
        r.dataset,
        names,
        settings,
        agent=r.agent,
        out=r.out,
        restart=r.restart,
        # not part of the fingerprint (a profile may be renamed), but what a resume starts from
        profiles={"agent": r.profile or profiles.active, "judge": judge_name or profiles.active},
    )
    # Each question is a run of the app's one run path, saved in History like an ``ask``.
    options = AgentOptions.for_agent(r.agent, max_steps=r.max_steps)
    agent = RunSession(RunSpec(r.agent, endpoint, SearchSource(engine=engine), options, data_root))
    scorer: Scorer = metric_scorer(r.judge) if judge_endpoint is None else JudgeScorer(Judge(judge_endpoint))

    def run(cancel: CancelToken | None) -> Generator[Progress, None, Summary]:
        return evaluate_answers(dataset.items, match, agent, scorer, store, cancel=cancel)

    closers = [scorer.close] if isinstance(scorer, JudgeScorer) else []
    return EvalJob("answers", store, match, run, closers)


def evaluations_dir(data_root: str | Path) -> Path:
    """``<data>/evaluations`` (:class:`~vrag_desktop.core.paths.DataLayout` spells it)."""
    from vrag_desktop.core.paths import DataLayout

    return DataLayout(Path(data_root)).evaluations


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
