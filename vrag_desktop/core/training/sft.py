"""The supervised warm start (``algorithm: sft``): its config table, its checks, and what it trains on.

Why a warm start: a policy that never writes the agent's protocol gets the same (zero) reward in
every rollout of a group, so GRPO's advantages are all 0 and RL learns nothing (reference §6.5: the
original trains SFT first, then RL). SFT trains the model's own turns of whole agent trajectories.

Two sources, told apart by the file's content (so the New-run dialog's dataset picker takes both):

* a **dataset's labelled items** (unified JSON, JSON lines, parquet, an app dataset): the trainer runs
  the real agent on each item with a *teacher* in the model's place, which searches for the question
  and answers with the reference answer in the agent's own protocol (VRAG tags; VimRAG tool calls),
  so the sequences are token for token what the agent builds when the model writes those replies;
* **History's SFT export** (LLaMA-Factory ``messages`` + ``images``, :func:`export_sft`): a JSON list
  of samples whose assistant turns are trained as they are, their images and observations masked.

No heavy library is imported here: the CLI and the dialog read it before anything is launched.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vrag_desktop.core.training.config import TrainConfig

__all__ = [
    "SFT_TABLES",
    "ExportSample",
    "SftConfig",
    "SftExport",
    "check_sft",
    "is_sft_export",
    "read_sft_export",
    "sft_source_problem",
]

#: The image placeholder of LLaMA-Factory's ``messages`` (one per entry of ``images``, in order).
IMAGE_TAG = "<image>"


@dataclass(frozen=True)
class SftConfig:
    """``batch_size``: sequences (one per VRAG trajectory, one per VimRAG graph node) per optimiser
    step, accumulated over micro-batches of ``micro_batch_rows``."""

    batch_size: int = 16


#: The config's tables this module owns (read like ``reward`` and ``judge``).
SFT_TABLES: tuple[tuple[str, type], ...] = (("sft", SftConfig),)


def check_sft(c: TrainConfig) -> None:
    """Validate the warm-start fields of ``c`` (``ConfigError`` naming the field): the ``sft`` table,
    ``init_from``, and the RL-only switches an SFT run would silently ignore."""
    from vrag_desktop.core.training.config import ConfigError, _num, _text

    _text("init_from", c.init_from)
    s = c.sft
    if not isinstance(s, SftConfig):
        raise ConfigError("sft", "must be a table (batch_size)")
    _num("sft.batch_size", s.batch_size, integer=True, low=1)
    if c.algorithm != "sft":
        return
    if c.generator != "hf":
        raise ConfigError("generator", "an SFT run samples nothing (it trains on fixed trajectories); use hf")
    for name in ("dynamic_sampling", "overlong"):
        if getattr(c, name).enabled:
            raise ConfigError(f"{name}.enabled", "is a GRPO/GGPO option; an SFT run has no rollouts to shape")
    if c.validation.eval_steps:
        raise ConfigError(
            "validation.eval_steps",
            "an SFT run draws no validation curve; the GRPO/GGPO run that starts from it (init_from) "
            "validates its starting weights first (step 0), then every eval_steps steps",
        )


# ---- History's SFT export ------------------------------------------------------------------------
@dataclass(frozen=True)
class ExportSample:
    """One trajectory of an SFT export: its messages (roles user/assistant/system, text contents
    with ``<image>`` tags) and the image files behind the tags, resolved against the file's folder."""

    id: str
    messages: tuple[dict[str, str], ...]
    images: tuple[Path, ...]


@dataclass
class SftExport:
    path: Path
    samples: list[ExportSample] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)  # (sample id, why it is left out)

    @property
    def total(self) -> int:
        return len(self.samples) + len(self.problems)

    def lines(self) -> list[str]:
        out = [f"{len(self.samples)} of {self.total} trajectorie(s) of {self.path.name} can be trained on"]
        out += [f"  left out {sid}: {why}" for sid, why in self.problems]
        return out


def _load_json(path: Path) -> Any:
    if path.suffix.lower() != ".json" or not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def is_sft_export(spec: str) -> bool:
    """Whether ``spec`` names an SFT export (a JSON list whose entries carry ``messages``) rather
    than a dataset of labelled items."""
    data = _load_json(Path(spec).expanduser())
    return (
        isinstance(data, list)
        and bool(data)
        and all(isinstance(d, dict) for d in data)
        and any("messages" in d for d in data)
    )


def _sample(entry: Any, n: int, folder: Path) -> tuple[ExportSample | None, str, str]:
    """(the sample or None, its id, why it is left out)."""
    sid = str(entry.get("id") or f"#{n + 1}") if isinstance(entry, dict) else f"#{n + 1}"
    if not isinstance(entry, dict) or not isinstance(entry.get("messages"), list):
        return None, sid, "it has no messages list"
    messages = entry["messages"]
    if not all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages):
        return None, sid, "a message is not {role, content} with text content"
    roles = [m.get("role") for m in messages]
    bad = sorted({str(r) for r in roles if r not in ("system", "user", "assistant")})
    if bad:
        return None, sid, f"unknown role(s) {', '.join(bad)} (system, user, assistant)"
    if "assistant" not in roles:
        return None, sid, "it has no assistant turn: nothing the model wrote to train on"
    if roles[0] == "assistant" or (roles[0] == "system" and roles[1:2] != ["user"]):
        return None, sid, "it must start with the user's (or system, then user) message"
    images = entry.get("images") or []
    if not isinstance(images, list) or not all(isinstance(i, str) for i in images):
        return None, sid, "images must be a list of file names"
    tags = sum(m["content"].count(IMAGE_TAG) for m in messages)
    if tags != len(images):
        return None, sid, f"{tags} {IMAGE_TAG} tag(s) but {len(images)} image(s)"
    files = tuple((folder / i).resolve() if not Path(i).is_absolute() else Path(i) for i in images)
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        return None, sid, f"image file(s) missing: {', '.join(missing[:3])}"
    return ExportSample(sid, tuple(dict(m) for m in messages), files), sid, ""


def read_sft_export(spec: str | os.PathLike[str]) -> SftExport:
    """The trainable samples of an SFT export and the ones left out, each named with why. Raises
    ``ConfigError`` naming ``dataset`` and the file when it is not an export or has no sample with an
    assistant turn (nothing to train)."""
    from vrag_desktop.core.training.config import ConfigError

    path = Path(spec).expanduser()
    data = _load_json(path)
    if not isinstance(data, list):
        raise ConfigError("dataset", f"{path} is not an SFT export (a JSON list of samples with messages)")
    out = SftExport(path)
    for n, entry in enumerate(data):
        sample, sid, why = _sample(entry, n, path.parent)
        if sample is None:
            out.problems.append((sid, why))
        else:
            out.samples.append(sample)
    if not out.samples:
        no_turns = all("assistant turn" in why for _, why in out.problems) and out.problems
        what = (
            "no sample has an assistant turn, so there is nothing the model wrote to train on"
            if no_turns
            else "no sample can be trained on"
        )
        first = f" (first: {out.problems[0][0]}: {out.problems[0][1]})" if out.problems else ""
        raise ConfigError("dataset", f"{path}: {what}{first}")
    return out


def sft_source_problem(cfg: TrainConfig, data_dir: str | os.PathLike[str]) -> str | None:
    """Why ``cfg`` (an SFT run) has nothing to train on, read without opening the corpora (what the
    command line checks before launching): an export without a trainable sample, or a dataset
    none of whose items has a reference answer for the teacher to give. None: no known problem."""
    from vrag_desktop.core.training.config import ConfigError
    from vrag_desktop.core.training.data import resolve_dataset

    if cfg.algorithm != "sft":
        return None
    try:
        if is_sft_export(cfg.dataset):
            read_sft_export(cfg.dataset)
            return None
        dataset = resolve_dataset(cfg.dataset, data_dir)
    except ConfigError as exc:
        return str(exc)
    if dataset.items and not any(it.reference_answer.strip() for it in dataset.items):
        return (
            f"dataset: none of the {len(dataset.items)} item(s) of {cfg.dataset} has a reference answer, "
            "so the warm start's teacher has no answer to give; add reference_answer to the items"
        )
    return None
