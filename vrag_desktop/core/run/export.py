"""Saved runs → the training data the original's trainers read (reference §6.6).

- **RL** (``rl``): a parquet file verl reads, one row per labelled run: ``data_source``, ``prompt``
  (the VRAG prompt as one user turn, byte-identical to the training copies; VimRAG runs get the
  system + user messages a VimRAG run starts with), ``ability``, ``reward_model`` (``style: rule``,
  ``ground_truth``), ``extra_info`` and top-level ``file_name`` / ``reference_page`` (the trainer's
  NDCG reward reads those). ``rl-jsonl`` writes the same rows as JSON lines.
- **SFT** (``sft``): LLaMA-Factory ``messages`` + ``images``: the VRAG prompt, the model's turns as
  it wrote them, ``<image>`` user turns, and the page and crop files exactly as the model saw them
  (the run keeps them at the model's resolution), copied beside the JSON so the export is
  self-contained.

Ground truth comes from a dataset (:mod:`vrag_desktop.core.datasets`), never from the agent's own
answer: a run whose question the dataset does not label is refused by name, unless the caller asks
to leave unlabelled runs out.
"""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from vrag_desktop.core.agents.events import AgentError, Answer, ContentDelta, Crop, ImageShown, ThinkDelta
from vrag_desktop.core.datasets import AmbiguousQuestion, Dataset, DatasetItem, load_dataset
from vrag_desktop.core.fsutil import atomic_write_bytes, atomic_write_text
from vrag_desktop.core.run.store import ANSWERED, RunError, RunStore, RunSummary

if TYPE_CHECKING:
    import pyarrow as pa
    from typing_extensions import Unpack

FORMATS = ("rl", "rl-jsonl", "sft")
#: What the original's reward manager accepts (it raises on anything else).
DATA_SOURCES = ("rag", "slidevqa_test", "mmlongdoc", "vidoseek")
#: The original's conversion writes "math" here; verl carries it along unused.
ABILITY = "math"
_LIST_LIMIT = 8


class ExportError(RunError):
    """An export cannot be written (the message says why; nothing was written)."""


class ExportRefused(ExportError):
    """Runs without a label in the dataset: ``runs`` names them all."""

    def __init__(self, message: str, runs: Iterable[str]) -> None:
        super().__init__(message)
        self.runs = tuple(runs)


@dataclass
class ExportReport:
    """What an export wrote and what it left out, and why."""

    out: Path
    fmt: str
    exported: list[str] = field(default_factory=list)  # run ids, in file order
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (run id, why) not exportable here
    unlabelled: list[tuple[str, str]] = field(default_factory=list)  # left out on request
    images: int = 0

    @property
    def count(self) -> int:
        return len(self.exported)

    @property
    def item(self) -> str:
        return "sample" if self.fmt == "sft" else "record"

    def lines(self) -> list[str]:
        """For a person: what was written, then what was left out."""
        out = [f"Exported {self.count} {self.item}(s) to {self.out}"]
        if self.images:
            out[0] += f" with {self.images} image(s) in {_image_dir(self.out)}"
        if self.unlabelled:
            out.append(f"Left out {len(self.unlabelled)} unlabelled run(s): {_listing(self.unlabelled)}")
        if self.skipped:
            out.append(f"Skipped {len(self.skipped)} run(s): {_listing(self.skipped)}")
        return out


def _listing(pairs: list[tuple[str, str]]) -> str:
    shown = "; ".join(f"{rid} ({why})" for rid, why in pairs[:_LIST_LIMIT])
    return shown + (f"; and {len(pairs) - _LIST_LIMIT} more" if len(pairs) > _LIST_LIMIT else "")


# ---------------------------------------------------------------- prompts
def rl_prompt(agent: str, question: str) -> list[dict[str, str]]:
    """The messages a run of ``agent`` starts with, as verl's ``prompt`` column."""
    if agent == "vimrag":
        from vrag_desktop.core.agents import vimrag_prompts as vp
        from vrag_desktop.core.agents.memory_graph import MemoryGraph

        graph = MemoryGraph(question).action_graph_json()
        return [
            {"role": "system", "content": vp.SYSTEM_PROMPT},
            {"role": "user", "content": vp.build_user_prompt(question, graph)},
        ]
    from vrag_desktop.core.agents.vrag_protocol import build_prompt

    return [{"role": "user", "content": build_prompt(question, trailing_newline=False)}]


# ---------------------------------------------------------------- labels
def _labels(
    runs: list[RunSummary], dataset: Dataset, *, need_file: bool, skip_unlabelled: bool
) -> tuple[list[tuple[RunSummary, DatasetItem]], list[tuple[str, str]]]:
    """Each run with its dataset item; refuses (or, asked to, leaves out) the runs without one."""
    labelled: list[tuple[RunSummary, DatasetItem]] = []
    missing: list[tuple[str, str]] = []
    for s in runs:
        try:
            item = dataset.match(s.question)
        except AmbiguousQuestion as exc:
            missing.append((s.id, str(exc)))
            continue
        if item is None:
            missing.append((s.id, f"no item asks {_short(s.question)!r}"))
        elif need_file and not item.file_name:
            missing.append(
                (s.id, f"item {item.uid!r} has no meta_info.file_name, which the RL reward's NDCG needs")
            )
        else:
            labelled.append((s, item))
    if missing and not skip_unlabelled:
        raise ExportRefused(
            f"{len(missing)} run(s) have no usable label in {dataset.name}, and ground truth must come "
            f"from a dataset, not from the agent's answer: {_listing(missing)}. Add them to the dataset, "
            "or export only the labelled runs.",
            [rid for rid, _ in missing],
        )
    return labelled, missing


def _short(text: str, n: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _summaries(store: RunStore, run_ids: Iterable[str]) -> list[RunSummary]:
    runs = [store.summary(rid) for rid in run_ids]
    if not runs:
        raise ExportError("no runs to export")
    return runs


def _as_dataset(dataset: Dataset | str | Path) -> Dataset:
    return dataset if isinstance(dataset, Dataset) else load_dataset(dataset)


# ---------------------------------------------------------------- RL
def rl_schema() -> pa.Schema:
    """Column types of the RL parquet (pyarrow imported here: only exports need it)."""
    import pyarrow as pa

    pages = pa.list_(pa.int64())
    return pa.schema(
        [
            ("data_source", pa.string()),
            ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
            ("ability", pa.string()),
            ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
            (
                "extra_info",
                pa.struct(
                    [
                        ("split", pa.string()),
                        ("index", pa.int64()),
                        ("answer", pa.string()),
                        ("question", pa.string()),
                        ("content_type", pa.string()),
                        ("reason_type", pa.string()),
                        ("file_name", pa.string()),
                        ("reference_page", pages),
                    ]
                ),
            ),
            ("file_name", pa.string()),
            ("reference_page", pages),
        ]
    )


def rl_row(
    agent: str, question: str, item: DatasetItem, index: int, data_source: str, split: str
) -> dict[str, Any]:
    """One verl row: ``question`` with ``agent``'s prompt, the dataset's ground truth."""
    pages = list(item.reference_page)
    return {
        "data_source": data_source,
        "prompt": rl_prompt(agent, question),
        "ability": ABILITY,
        "reward_model": {"style": "rule", "ground_truth": item.reference_answer},
        "extra_info": {
            "split": split,
            "index": index,
            "answer": item.reference_answer,
            "question": question,
            "content_type": item.content_type,
            "reason_type": item.reason_type,
            "file_name": item.file_name,
            "reference_page": pages,
        },
        "file_name": item.file_name,
        "reference_page": pages,
    }


def _check_source(data_source: str) -> None:
    if data_source not in DATA_SOURCES:
        raise ExportError(
            f"data source {data_source!r} is not one the original's reward manager accepts "
            f"({', '.join(DATA_SOURCES)})"
        )


def write_rl(out: Path, rows: list[dict[str, Any]], jsonl: bool = False) -> None:
    """Write verl rows atomically: parquet with :func:`rl_schema`, or JSON lines."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if jsonl:
        atomic_write_text(out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=rl_schema()), buf)
    atomic_write_bytes(out, buf.getvalue())


def export_dataset_rl(
    items: Iterable[DatasetItem],
    out: Path,
    *,
    agent: str = "vrag",
    data_source: str = "rag",
    split: str = "train",
    jsonl: bool = False,
) -> int:
    """A dataset's items as verl rows (the training data the trainer reads, no runs needed): the
    item's question with ``agent``'s prompt; items without ``file_name`` are refused by uid, since
    the reward's NDCG needs it. Returns the number of rows written."""
    _check_source(data_source)
    items = list(items)
    bad = [i.uid for i in items if not i.file_name]
    if bad:
        raise ExportError(
            f"{len(bad)} item(s) have no meta_info.file_name, which the RL reward's NDCG needs: "
            f"{', '.join(bad[:_LIST_LIMIT])}{' …' if len(bad) > _LIST_LIMIT else ''}"
        )
    if not items:
        raise ExportError("the dataset has no items; nothing written")
    write_rl(out, [rl_row(agent, i.query, i, n, data_source, split) for n, i in enumerate(items)], jsonl)
    return len(items)


def export_rl(
    store: RunStore,
    run_ids: Iterable[str],
    dataset: Dataset | str | Path,
    out: Path,
    *,
    data_source: str = "rag",
    split: str = "train",
    jsonl: bool = False,
    skip_unlabelled: bool = False,
) -> ExportReport:
    """Labelled runs → verl parquet (or JSON lines with ``jsonl``), written atomically."""
    _check_source(data_source)
    ds = _as_dataset(dataset)
    runs = _summaries(store, run_ids)
    labelled, missing = _labels(runs, ds, need_file=True, skip_unlabelled=skip_unlabelled)
    report = ExportReport(Path(out), "rl-jsonl" if jsonl else "rl", unlabelled=missing)
    if not labelled:
        raise ExportError(f"none of the {len(runs)} run(s) has a usable label in {ds.name}; nothing written")
    rows = [rl_row(s.agent, s.question, item, i, data_source, split) for i, (s, item) in enumerate(labelled)]
    report.exported = [s.id for s, _ in labelled]
    write_rl(Path(out), rows, jsonl)
    return report


# ---------------------------------------------------------------- SFT
class _Skip(Exception):
    """This run cannot become an SFT sample (the message says why)."""


def _image_dir(out: Path) -> Path:
    return out.parent / f"{out.stem}_images"


def _sft_turns(store: RunStore, s: RunSummary) -> tuple[list[dict[str, str]], list[Path]]:
    """Messages and the images behind their ``<image>`` tags, rebuilt from the recorded events."""
    from vrag_desktop.core.agents.vrag_protocol import ANSWER_NOW, build_prompt

    events = list(store.events(s.id))
    if any(isinstance(e, AgentError) for e in events):
        raise _Skip("it has errors and corrective turns, which are not training material")
    text: dict[int, list[str]] = {}
    think: dict[int, list[str]] = {}
    shown: dict[int, list[Path]] = {}
    answer_step = 0
    for e in events:
        if isinstance(e, ContentDelta):
            text.setdefault(e.step, []).append(e.content)
        elif isinstance(e, ThinkDelta):
            think.setdefault(e.step, []).append(e.content)
        elif isinstance(e, ImageShown | Crop):
            shown.setdefault(e.step, []).append(Path(e.image))
        elif isinstance(e, Answer) and not e.forced:
            answer_step = e.step
    if not answer_step:
        raise _Skip("it has no answer from the model")
    max_steps = s.settings.get("max_steps")
    prompt = build_prompt(s.question, trailing_newline=False)
    # The agent adds ANSWER_NOW to the observation after the last allowed step (or to the prompt).
    messages = [{"role": "user", "content": prompt + (ANSWER_NOW if max_steps == 0 else "")}]
    images: list[Path] = []
    for step in range(1, answer_step + 1):
        content = "".join(text.get(step, []))
        if not content.strip():
            raise _Skip(f"turn {step} has no recorded model text")
        if "<think>" not in content and think.get(step):  # reasoning came on its own channel
            content = f"<think>{''.join(think[step])}</think>\n{content}"
        messages.append({"role": "assistant", "content": content})
        if step == answer_step:
            break
        seen = shown.get(step, [])
        if len(seen) != 1:
            raise _Skip(f"turn {step} got {len(seen)} images instead of one (a words-only observation)")
        if not seen[0].is_file():
            raise _Skip(f"its image {seen[0]} is missing")
        images.append(seen[0])
        messages.append({"role": "user", "content": "<image>" + (ANSWER_NOW if step == max_steps else "")})
    return messages, images


def export_sft(
    store: RunStore,
    run_ids: Iterable[str],
    dataset: Dataset | str | Path,
    out: Path,
    *,
    skip_unlabelled: bool = False,
) -> ExportReport:
    """Labelled VRAG runs that answered cleanly → LLaMA-Factory samples (one JSON list in ``out``);
    images are copied to ``<out stem>_images/`` and referenced relative to ``out``'s folder (where
    LLaMA-Factory looks for them when the JSON sits in its ``dataset_dir``)."""
    ds = _as_dataset(dataset)
    out = Path(out)
    runs = _summaries(store, run_ids)
    report = ExportReport(out, "sft")
    candidates = []
    for s in runs:
        if s.agent != "vrag":
            report.skipped.append((s.id, f"a {s.agent} run; SFT samples use the VRAG protocol"))
        elif s.status != ANSWERED:
            report.skipped.append((s.id, f"it did not answer (status {s.status})"))
        else:
            candidates.append(s)
    labelled, report.unlabelled = _labels(candidates, ds, need_file=False, skip_unlabelled=skip_unlabelled)
    built: list[tuple[RunSummary, list[dict[str, str]], list[Path]]] = []
    for s, _item in labelled:
        try:
            messages, images = _sft_turns(store, s)
        except _Skip as exc:
            report.skipped.append((s.id, str(exc)))
            continue
        built.append((s, messages, images))
    if not built:
        why = _listing(report.skipped) if report.skipped else "no labelled runs"
        raise ExportError(f"none of the {len(runs)} run(s) can be an SFT sample: {why}; nothing written")
    img_dir = _image_dir(out)
    img_dir.mkdir(parents=True, exist_ok=True)
    samples = []
    for s, messages, images in built:
        names = []
        for src in images:
            dst = img_dir / f"{s.id}-{src.name}"
            shutil.copy2(src, dst)
            names.append(f"{img_dir.name}/{dst.name}")
        samples.append({"id": s.id, "messages": messages, "images": names})
        report.exported.append(s.id)
        report.images += len(names)
    atomic_write_text(out, json.dumps(samples, indent=2, ensure_ascii=False) + "\n")
    return report


# ---------------------------------------------------------------- one door for the CLI and the app
class ExportOptions(TypedDict, total=False):
    """The keywords :func:`export_runs` passes through, so their defaults live in one place
    (:func:`export_rl`'s signature); ``sft`` reads only ``skip_unlabelled``."""

    data_source: str
    split: str
    skip_unlabelled: bool


def export_runs(
    store: RunStore,
    fmt: str,
    run_ids: Iterable[str],
    dataset: Dataset | str | Path,
    out: Path,
    **options: Unpack[ExportOptions],
) -> ExportReport:
    """Export in ``fmt`` (one of :data:`FORMATS`)."""
    if fmt == "sft":
        return export_sft(store, run_ids, dataset, out, skip_unlabelled=options.get("skip_unlabelled", False))
    if fmt in ("rl", "rl-jsonl"):
        return export_rl(store, run_ids, dataset, out, jsonl=fmt == "rl-jsonl", **options)
    raise ExportError(f"unknown export format {fmt!r} (one of {', '.join(FORMATS)})")


__all__ = [
    "ABILITY",
    "DATA_SOURCES",
    "FORMATS",
    "ExportError",
    "ExportOptions",
    "ExportRefused",
    "ExportReport",
    "export_dataset_rl",
    "export_rl",
    "export_runs",
    "export_sft",
    "rl_prompt",
    "rl_row",
    "rl_schema",
    "write_rl",
]
