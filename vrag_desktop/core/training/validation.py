"""A run's validation set: which held-out items are evaluated every ``eval_steps`` optimiser steps
to draw the validation curve, and how the best checkpoint is found.

Why a held-out set at all: the training reward is measured on the very prompts being trained on,
at the sampling temperature, so it rises whether the policy generalises or memorises. The
validation reward is the same reward (the same core code) on questions the policy never trains on.

Where the items come from, decided once here for the New-run dialog, the CLI and the trainer:

* ``validation.dataset`` names a file or an app dataset: its items that match the corpora and have
  a reference answer (the training rule, :func:`~.data.training_items`).
* empty: a deterministic share (``validation.fraction``) of the training items is split off by the
  run's ``seed`` and not trained on. The split is said (which items, how many remain) in the
  trainer's log, the CLI's output and the dialog's pre-flight.

``eval_steps`` 0 (the default, as in the original VRAG-RL's TRL-side recipe) turns it all off.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from vrag_desktop.core.training.config import TrainConfig
    from vrag_desktop.core.training.data import TrainingItems
    from vrag_desktop.core.training.rundir import Best, TrainRun

__all__ = [
    "RESUME_SAFE_VALIDATION",
    "VALIDATION_TABLES",
    "BestChoice",
    "ValidationConfig",
    "ValidationSplit",
    "best_choice",
    "best_floor",
    "best_words",
    "check_validation",
    "is_new_best",
    "split_items",
    "start_value",
    "validation_plan",
    "validation_split",
]

#: The validation-curve metric the best checkpoint is chosen by (higher is better).
BEST_METRIC = "val/reward"


@dataclass(frozen=True)
class ValidationConfig:
    """``eval_steps``: evaluate every N optimiser steps and at the end (0: off). ``dataset``: the
    held-out items (empty: split ``fraction`` of the training items off by the run's seed).
    ``max_items``: evaluate at most the first N of them (0: all), to bound the cost."""

    dataset: str = ""
    fraction: float = 0.1
    eval_steps: int = 0
    max_items: int = 0


#: The config's table this is (read like ``reward`` and ``judge``).
VALIDATION_TABLES: tuple[tuple[str, type], ...] = (("validation", ValidationConfig),)
#: Validation fields a resumed run may change: they change what is measured, not what is learnt
#: (``dataset`` and ``fraction`` may decide which items are trained on, so they may not).
RESUME_SAFE_VALIDATION = frozenset({"validation.eval_steps", "validation.max_items"})


def check_validation(c: TrainConfig) -> None:
    """Validate ``c.validation`` (raises the config's ``ConfigError``, naming the field)."""
    from vrag_desktop.core.training.config import ConfigError, _num, _text

    v = c.validation
    if not isinstance(v, ValidationConfig):
        raise ConfigError("validation", "must be a table (dataset, fraction, eval_steps, max_items)")
    _text("validation.dataset", v.dataset)
    _num("validation.fraction", v.fraction, low=0.0, low_open=True, high=0.5)
    _num("validation.eval_steps", v.eval_steps, integer=True, low=0)
    _num("validation.max_items", v.max_items, integer=True, low=0)
    if c.algorithm == "sft" and v.eval_steps:
        raise ConfigError(
            "validation.eval_steps",
            "an SFT run draws no validation curve (it has no rollouts); validate the GRPO/GGPO run "
            "that starts from it (init_from), whose first point is the warm start's value",
        )
    if v.dataset.strip() and not v.eval_steps:
        raise ConfigError(
            "validation.dataset",
            "is evaluated only when validation.eval_steps is above 0 (every N steps); set it, "
            "or leave validation.dataset empty",
        )
    if v.dataset.strip() and v.dataset.strip() == c.dataset.strip():
        raise ConfigError(
            "validation.dataset",
            "is the training dataset itself: the curve would measure what the run memorises, not "
            "how it does on new questions; name a held-out set, or leave it empty to split one off",
        )


@dataclass
class ValidationSplit:
    """What a run trains and validates on. ``source``: ``file`` (``validation.dataset``) or
    ``split`` (held out of the training items). ``said``: the lines a person is told."""

    train: TrainingItems
    val: TrainingItems
    source: str
    said: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def uids(self) -> list[str]:
        return [it.uid for it in self.val.items]

    def lines(self) -> list[str]:
        return [*self.said, *(f"warning: {w}" for w in self.warnings)]


def split_items(data: TrainingItems, fraction: float, seed: int) -> tuple[TrainingItems, TrainingItems]:
    """``(train, val)``: ``round(fraction · n)`` of ``data``'s usable items (at least one) held
    out, chosen by ``seed`` alone, each part in the dataset's order. Fewer than two items cannot be
    split (:class:`ConfigError` naming ``validation.fraction``)."""
    from vrag_desktop.core.training.config import ConfigError
    from vrag_desktop.core.training.data import TrainingItems

    n = len(data.items)
    if n < 2:
        raise ConfigError(
            "validation.fraction",
            f"the dataset has {n} usable item(s): too few to split a validation set off (one to "
            "train on and one to validate at least); name a held-out set in validation.dataset, or "
            "set validation.eval_steps to 0",
        )
    k = min(n - 1, max(1, round(fraction * n)))
    order = list(range(n))
    random.Random(f"validation:{seed}").shuffle(order)
    held = set(order[:k])

    def part(keep: bool) -> TrainingItems:
        idx = [i for i in range(n) if (i in held) == keep]
        return TrainingItems(
            [data.items[i] for i in idx], [data.golden[i] for i in idx], [], list(data.corpora)
        )

    train = part(False)
    train.problems = list(data.problems)
    return train, part(True)


def _names(uids: list[str], most: int = 8) -> str:
    return ", ".join(uids[:most]) + (f" and {len(uids) - most} more" if len(uids) > most else "")


def validation_split(
    cfg: TrainConfig, train: TrainingItems, data_dir: str | os.PathLike[str]
) -> ValidationSplit:
    """The items ``cfg`` trains and validates on, given its matched training items; the split is
    made here (see the module). :class:`ConfigError` names ``validation.dataset`` when that set
    holds no item that can be validated, ``validation.fraction`` when a split is impossible."""
    from vrag_desktop.core.training.config import ConfigError
    from vrag_desktop.core.training.data import training_items

    v = cfg.validation
    every = f"evaluated every {v.eval_steps} step(s) and at the end"
    if v.dataset.strip():
        try:
            val = training_items(v.dataset, list(cfg.corpora), data_dir)
        except ConfigError as exc:  # the validation set's file or name, not the training dataset's
            if exc.field != "dataset":
                raise
            raise ConfigError("validation.dataset", exc.problem) from exc
        if not val.items:
            reasons = "; ".join(f"{uid}: {why}" for uid, why in val.problems[:3]) or "it has no items"
            raise ConfigError(
                "validation.dataset",
                f"none of the {val.total} item(s) of {v.dataset} can be validated ({reasons}); "
                "validation needs items in the corpora with a reference answer",
            )
        name = Path(v.dataset).name or v.dataset
        split = ValidationSplit(train, val, "file")
        split.said.append(
            f"validation: {len(val.items)} of {val.total} item(s) of {name} match the corpora, {every}"
        )
        split.said += [f"  left out of validation {uid}: {why}" for uid, why in val.problems]
        train_q = {it.query.strip().lower() for it in train.items} | {it.uid for it in train.items}
        both = [it.uid for it in val.items if it.query.strip().lower() in train_q]
        if both:
            split.warnings.append(
                f"validation.dataset: {len(both)} validation question(s) are also training questions "
                f"({_names(both)}): the curve partly measures what the run memorises"
            )
    else:
        kept, held = split_items(train, v.fraction, cfg.seed)
        split = ValidationSplit(kept, held, "split")
        split.said.append(
            f"validation: no validation.dataset, so {len(held.items)} of the {len(train.items)} usable "
            f"training item(s) are held out (validation.fraction {v.fraction:g}, seed {cfg.seed}) and "
            f"not trained on: {_names([it.uid for it in held.items])}; {len(kept.items)} train; {every}"
        )
    if v.max_items and len(split.val.items) > v.max_items:
        split.said.append(
            f"validation: the first {v.max_items} of {len(split.val.items)} validation items are "
            "evaluated (validation.max_items)"
        )
        split.val.items = split.val.items[: v.max_items]
        split.val.golden = split.val.golden[: v.max_items]
    return split


def validation_plan(cfg: TrainConfig) -> str:
    """One line on what a run of ``cfg`` validates on, from the config alone (no corpus opened):
    what the command line says before launching (the trainer's log then names the items)."""
    v = cfg.validation
    if not v.eval_steps:
        return "Validation: off (set validation.eval_steps to draw a validation curve)"
    cap = f", at most {v.max_items} items" if v.max_items else ""
    if v.dataset.strip():
        return f"Validation: every {v.eval_steps} step(s) and at the end on {v.dataset}{cap}"
    return (
        f"Validation: every {v.eval_steps} step(s) and at the end on {v.fraction:.0%} of the training "
        f"items, held out by seed {cfg.seed} and not trained on{cap} (the log names them)"
    )


def best_floor(start: float | None) -> float:
    """What a validation must score above to be a run's best: the warm start's step-0 value when
    there is one, and 0 in any case (a reward of 0 answered nothing right: no checkpoint is better
    than another for it, nor than the weights the run started from)."""
    return max(0.0, start) if start is not None else 0.0


def is_new_best(value: float, previous: float | None, start: float | None) -> bool:
    """THE rule the trainer marks a best by (and readers judge an older ``best.json`` by): above
    the previous best, above the warm start's step-0 value, above 0."""
    return value > best_floor(start) and (previous is None or value > previous)


def start_value(rows: list[dict[str, Any]]) -> float | None:
    """The warm start's validation reward (a warm-started run validates its starting weights as
    step 0), or None: a run without one."""
    for row in rows:
        if int(row.get("step", -1)) == 0 and isinstance(row.get(BEST_METRIC), (int, float)):
            return float(row[BEST_METRIC])
    return None


def best_words(value: float, start: float | None) -> str:
    """What a new best is called in the log: the rule puts it above the warm start, which is said
    when there is one (the value it had to beat)."""
    if start is None:
        return "the best so far"
    return f"the best so far, above the warm start ({BEST_METRIC} {start:.4f} at step 0)"


@dataclass(frozen=True)
class BestChoice:
    """What ``train export RUN --best`` exports (:func:`best_choice`). ``source``: ``checkpoint``
    (the best validation's), ``warm_start`` (no checkpoint beat the starting weights: the folder
    recorded as ``init_weights``) or ``none`` (nothing; ``reason`` says why). ``value``: the
    exported weights' validation reward (None: not validated); ``start``: the step-0 value;
    ``best``: ``best.json`` when it counts by the rule (an older run's below the floor does not);
    ``validated``: some validation has run."""

    source: Literal["checkpoint", "warm_start", "none"]
    path: Path | None
    step: int | None
    value: float | None
    start: float | None
    reason: str
    best: Best | None = None
    validated: bool = True

    @property
    def exportable(self) -> bool:
        return self.path is not None

    def what(self) -> str:
        """The exported weights, named for a person (``Exported … to DIR``)."""
        if self.source == "checkpoint" and self.value is not None:
            return f"the best checkpoint (step {self.step}, {BEST_METRIC} {self.value:.4f})"
        if self.source == "warm_start":
            return f"the warm start's weights from {self.path}"
        return "nothing"


def _warm_start_dir(run: TrainRun) -> Path | None:
    """The folder a warm-started run's policy started from (``init_weights``, written by the
    trainer at its first start), or None: not warm-started, or not started yet."""
    from vrag_desktop.core.training.rundir import TrainRunError

    try:
        cfg = run.config()
    except (TrainRunError, ValueError, TypeError):  # unreadable: judged as not warm-started
        return None
    recorded = run.state().get("init_weights")
    if not cfg.init_from or not isinstance(recorded, str) or not recorded:
        return None
    return Path(recorded)


def best_choice(run: TrainRun) -> BestChoice:
    """What ``--best`` means for ``run``, read from its files (nothing written): the best
    checkpoint when its value passes :func:`is_new_best` (an older run's ``best.json`` that does not
    counts as no best); else the warm start's weights; else nothing, with the reason. What
    ``train export --best``, ``train status``, the trainer's export and the Training panel say alike."""
    rows = run.val_metrics()
    start = start_value(rows)
    found = run.best()
    name = run.root.name
    instead = "export the last checkpoint instead"
    if found is not None and is_new_best(found.value, None, start):
        if found.checkpoint is None:
            return BestChoice(
                "none", None, found.step, found.value, start,
                f"the best checkpoint of {name} (step {found.step}, {found.metric} "
                f"{found.value:.4f}) is gone from checkpoints/; {instead}",
                found,
            )  # fmt: skip
        return BestChoice("checkpoint", found.checkpoint.path, found.step, found.value, start, "", found)
    validated = found is not None or any(isinstance(r.get(BEST_METRIC), (int, float)) for r in rows)
    if not validated:
        return BestChoice(
            "none", None, None, None, None,
            f"{name} has no best checkpoint: no validation has run (a run validates every "
            f"validation.eval_steps steps when that is above 0); {instead}",
            validated=False,
        )  # fmt: skip
    warm = _warm_start_dir(run)
    if start is not None:
        beaten = f"no validation beat the warm start ({BEST_METRIC} {start:.4f} at step 0)"
    elif warm is not None:
        beaten = "no validation scored above 0 (the warm start's own was not measured)"
    else:
        beaten = "no validation scored above 0 (a reward of 0 answered nothing right)"
    if warm is None:
        return BestChoice(
            "none", None, None, None, start,
            f"{name} has no best checkpoint: {beaten}, and the run has no warm start's weights to "
            f"fall back on; {instead}",
        )  # fmt: skip
    if not (warm / "config.json").is_file():
        return BestChoice(
            "none", None, 0, start, start,
            f"{beaten}, and the warm start's weights {warm} are gone; {instead}",
        )  # fmt: skip
    return BestChoice("warm_start", warm, 0, start, start, f"{beaten}, so the best weights are still its own")


def split_record(split: ValidationSplit, cfg: TrainConfig) -> dict[str, Any]:
    """What ``<run>/validation.json`` keeps: where the items came from and which they are."""
    return {
        "source": split.source,
        "dataset": cfg.validation.dataset,
        "fraction": cfg.validation.fraction,
        "seed": cfg.seed,
        "eval_steps": cfg.validation.eval_steps,
        "uids": split.uids,
        "train_items": len(split.train.items),
        "said": split.lines(),
    }
