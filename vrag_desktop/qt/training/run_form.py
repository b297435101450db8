"""The fields of the New-run dialog, read back as the mapping :meth:`TrainConfig.from_mapping` takes.

Why numbers are line edits, not spin boxes: a spin box silently clamps what is typed, so the person
never learns the real range; here the config's own check names the field and the reason, and the
field turns red with that message beside it (the same words the CLI and the trainer print).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from vrag_desktop.core.agents.names import AGENT_CHOICES
from vrag_desktop.core.training.config import DEFAULT_AGENTS, ConfigError, TrainConfig
from vrag_desktop.core.training.warmstart import WarmStartRun
from vrag_desktop.qt.datasets.dataset_picker import DatasetPicker
from vrag_desktop.qt.infra.theme import set_role
from vrag_desktop.qt.runtime.style import error_label

ALGORITHMS = (
    ("grpo", "GRPO"),
    ("ggpo", "GGPO (graph-masked, VimRAG)"),
    ("sft", "SFT warm start (supervised; then GRPO/GGPO from it)"),
)
AGENTS = AGENT_CHOICES
JUDGES = (
    ("profile", "A model: an endpoint profile"),
    ("url", "A model: an OpenAI-compatible URL"),
    ("exact", "Exact match (no model)"),
    ("anls", "ANLS (no model)"),
)
NO_JUDGE = "No model chosen"  # the judge box's entry while no model is chosen
DEVICES = (("auto", "Auto (GPU when present)"), ("cuda", "GPU (CUDA)"), ("cpu", "CPU (tiny models only)"))
#: Who samples the rollouts: the trainer's own model, or the app's vLLM server (``vllm_mode:
#: app_server``; the dialog offers to start it, core/training/rollout_server.py).
ROLLOUTS = (("hf", "The trainer (Hugging Face generate)"), ("app_server", "The app's vLLM server (LoRA)"))
#: (config field, label) of the numeric fields, in the form's order; ints stay ints.
NUMBERS = (
    ("group_size", "Group size"),
    ("prompts_per_step", "Prompts per step"),
    ("learning_rate", "Learning rate"),
    ("kl_coef", "KL coefficient"),
    ("clip_ratio", "Clip ratio"),
    ("clip_ratio_high", "Clip ratio, upper (0: same)"),
    ("ppo_epochs", "Updates per batch"),
    ("max_turns", "Max turns"),
    ("max_prompt_length", "Max prompt tokens"),
    ("max_response_length", "Max tokens per turn"),
    ("max_model_len", "Max context tokens"),
    ("micro_batch_rows", "Rows per forward pass"),
    ("max_steps", "Max steps (0: one epoch)"),
    ("save_steps", "Save every (steps)"),
    ("gpus", "GPUs (0: all visible)"),
)
WEIGHTS = (("reward.judge", "Judge"), ("reward.format", "Format"), ("reward.ndcg", "NDCG"))
#: Fields an SFT run does not read (hidden while SFT is chosen); ``sft.batch_size`` only it reads.
RL_ONLY = (
    "group_size",
    "prompts_per_step",
    "kl_coef",
    "clip_ratio",
    "clip_ratio_high",
    "ppo_epochs",
    "dynamic_sampling.enabled",
    "vllm_mode",
)
SFT_ONLY = ("sft.batch_size",)
#: The learning rates the form switches between with the algorithm while the person has not typed
#: their own: the original's RL rate, and the rate of its SFT (LLaMA-Factory, paper Table 4).
RL_LR, SFT_LR = 1e-6, 1e-5
#: The validation fields (issue 30 item 4): every N steps, on a held-out set or share; RL runs only.
VALIDATION = (
    ("validation.eval_steps", "Validate every (steps, 0: off)"),
    ("validation.dataset", "Validation set"),
    ("validation.fraction", "Held-out share (no set)"),
    ("validation.max_items", "At most (items, 0: all)"),
)
HELD_OUT = "Held out of the training dataset (split by the seed)"
INTS = {f.name for f in TrainConfig.__dataclass_fields__.values() if f.type == "int"} | {
    "sft.batch_size",
    "validation.eval_steps",
    "validation.max_items",
}


def _number(name: str, text: str) -> int | float:
    """``text`` as the field's number; a typo is a :class:`ConfigError` naming the field."""
    t = text.strip()
    try:
        return int(t) if name in INTS else float(t)
    except ValueError:
        raise ConfigError(name, f"must be a {'whole ' if name in INTS else ''}number, not {t!r}") from None


class RunForm(QWidget):
    """The inputs; ``edited`` on any change, ``sourcesChanged`` when dataset or corpora change."""

    edited = Signal()
    sourcesChanged = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.fields: dict[str, QWidget] = {}
        self.errors: dict[str, QLabel] = {}
        self.rows: dict[str, tuple[QFormLayout, QWidget]] = {}
        self._output_touched = False
        self._default_output = ""
        self.rollout_url = ""  # the app's vLLM server, when it runs (set by the dialog)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self._run_box())
        lay.addWidget(self._reward_box())
        lay.addWidget(self._hyper_box())
        lay.addWidget(self._validation_box())
        lay.addStretch(1)
        self.show_algorithm_rows()

    # ---- building -------------------------------------------------------------------------------
    def _field(self, form: QFormLayout, key: str, label: str, widget: QWidget, *extra: QWidget) -> None:
        """A row: the widget (and buttons), its inline error beside it."""
        self.fields[key] = widget
        err = error_label(self)
        err.setObjectName(f"error:{key}")
        self.errors[key] = err
        box = QWidget(self)
        h = QHBoxLayout(box)
        h.setContentsMargins(0, 0, 0, 0)
        h.addWidget(widget, 2)
        for w in extra:
            h.addWidget(w)
        h.addWidget(err, 3)
        form.addRow(label, box)
        self.rows[key] = (form, box)
        signal = getattr(widget, "textChanged", None) or getattr(widget, "currentIndexChanged", None)
        if isinstance(widget, QCheckBox):
            signal = widget.toggled
        if signal is not None:
            signal.connect(lambda *_: self.edited.emit())

    def _combo(self, items: tuple[tuple[str, str], ...]) -> QComboBox:
        c = QComboBox(self)
        for key, label in items:
            c.addItem(label, key)
        return c

    def _run_box(self) -> QGroupBox:
        box = QGroupBox("Run", self)
        form = QFormLayout(box)
        self.algorithm = self._combo(ALGORITHMS)
        self.agent = self._combo(AGENTS)
        self.model = QLineEdit(self)
        self.model.setPlaceholderText("model folder or hub id, e.g. Qwen/Qwen2.5-VL-3B-Instruct")
        browse = QPushButton("Browse…", self)
        browse.clicked.connect(self._browse_model)
        self.dataset = DatasetPicker("Datasets (*.json *.jsonl *.parquet);;All files (*)", "File…", self)
        self.corpora = QListWidget(self)
        self.corpora.setMaximumHeight(90)
        self.corpora.itemChanged.connect(self.edited)
        self.corpora.itemChanged.connect(self.sourcesChanged)
        self.name = QLineEdit(self)
        self.name.setPlaceholderText("grpo-vrag")
        self.output = QLineEdit(self)
        self.output.textEdited.connect(self._output_edited)
        out_browse = QPushButton("Browse…", self)
        out_browse.clicked.connect(self._browse_output)
        self.device = self._combo(DEVICES)
        self.algorithm.currentIndexChanged.connect(self._algorithm_changed)  # before `edited`
        self._field(form, "algorithm", "Algorithm", self.algorithm)
        self._field(form, "agent", "Agent", self.agent)
        self._field(form, "model", "Base model", self.model, browse)
        self._field(form, "init_from", "Start from", self._warm_start_row(), *self._warm_start_buttons())
        self._field(form, "dataset", "Dataset", self.dataset)
        self._field(form, "corpora", "Corpora", self.corpora)
        self._field(form, "name", "Run name", self.name)
        self._field(form, "output_dir", "Output folder", self.output, out_browse)
        self._field(form, "device", "Device", self.device)
        self.rollouts = self._combo(ROLLOUTS)
        self._field(form, "vllm_mode", "Rollouts", self.rollouts)
        self.dataset.currentIndexChanged.connect(lambda *_: self.sourcesChanged.emit())
        return box

    def _warm_start_row(self) -> QLineEdit:
        self.init_from = QLineEdit(self)
        self.init_from.setObjectName("initFrom")
        self.init_from.setPlaceholderText("the base model itself (no warm start)")
        self.init_from.setToolTip(
            "The weights the run starts from: an SFT run (its export, else its last checkpoint), a "
            "checkpoint folder or a model folder of the base model's architecture"
        )
        return self.init_from

    def _warm_start_buttons(self) -> tuple[QWidget, QWidget]:
        self.warm_runs = QToolButton(self)
        self.warm_runs.setObjectName("warmStartRuns")
        self.warm_runs.setText("SFT runs")
        self.warm_runs.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.warm_runs.setMenu(QMenu(self.warm_runs))
        self.set_warm_starts([])
        browse = QPushButton("Browse…", self)
        browse.clicked.connect(self._browse_init)
        return self.warm_runs, browse

    def set_warm_starts(self, runs: list[WarmStartRun]) -> None:
        """The SFT runs to start from (the menu beside *Start from*); picking one also sets the base
        model to the one it trained, since a run starts from its own model's architecture."""
        menu = self.warm_runs.menu()
        menu.clear()
        none = menu.addAction("No warm start: the base model itself")
        none.triggered.connect(lambda: self.init_from.setText(""))
        for run in runs:
            where = f"step {run.step}" if run.step else "exported"
            action = menu.addAction(f"{run.name} ({run.agent}, {where}) — {run.model}")
            action.triggered.connect(lambda _=False, r=run: self.pick_warm_start(r))
        self.warm_runs.setEnabled(bool(runs))
        self.warm_runs.setToolTip(
            f"{len(runs)} SFT run(s) with weights to start from"
            if runs
            else "No SFT run to start from yet: start one with the algorithm SFT warm start"
        )

    def pick_warm_start(self, run: WarmStartRun) -> None:
        self.model.setText(run.model)
        self.init_from.setText(str(run.path))

    def _reward_box(self) -> QGroupBox:
        box = QGroupBox("Reward and judge", self)
        self.reward_box = box
        form = QFormLayout(box)
        for key, label in WEIGHTS:
            self._field(form, key, f"{label} weight", QLineEdit(self))
        self.judge_kind = self._combo(JUDGES)
        self.judge_profile = QComboBox(self)
        self._field(form, "judge.kind", "Judge", self.judge_kind)
        self._field(form, "judge.profile", "Judge profile", self.judge_profile)
        self._field(form, "judge.base_url", "Judge URL", QLineEdit(self))
        self._field(form, "judge.model", "Judge model name", QLineEdit(self))
        self.judge_kind.currentIndexChanged.connect(self._judge_rows)
        return box

    def _hyper_box(self) -> QGroupBox:
        box = QGroupBox("Hyper-parameters (the original VRAG-RL's defaults)", self)
        form = QFormLayout(box)
        for key, label in NUMBERS:
            self._field(form, key, label, QLineEdit(self))
        self._field(form, "sft.batch_size", "Sequences per step (SFT)", QLineEdit(self))
        self._field(form, "gradient_checkpointing", "Gradient checkpointing", QCheckBox("less memory", self))
        self._field(form, "lora.enabled", "LoRA", QCheckBox("train adapters only (far less memory)", self))
        self._field(
            form,
            "dynamic_sampling.enabled",
            "Dynamic sampling",
            QCheckBox("resample groups whose rewards are all equal (they teach nothing)", self),
        )
        return box

    def _validation_box(self) -> QGroupBox:
        """The held-out curve: what is validated, and how often (they change what is trained on
        when a share is held out, so they re-run the match like the dataset does)."""
        box = QGroupBox("Validation curve (held-out questions)", self)
        self.validation_box = box
        form = QFormLayout(box)
        self.val_dataset = DatasetPicker("Datasets (*.json *.jsonl *.parquet);;All files (*)", "File…", self)
        self.val_dataset.setObjectName("validationDataset")
        for key, label in VALIDATION:
            widget = self.val_dataset if key == "validation.dataset" else QLineEdit(self)
            self._field(form, key, label, widget)
            signal = getattr(widget, "currentIndexChanged", None) or getattr(widget, "textChanged", None)
            if signal is not None:
                signal.connect(lambda *_: self.sourcesChanged.emit())
        return box

    # ---- choices --------------------------------------------------------------------------------
    def set_choices(
        self, datasets: list[str], corpora: list[str], profiles: list[str], active: str | None
    ) -> None:
        """Fill the app's datasets, corpora (all ticked) and endpoint profiles, the current model
        (``active``) chosen as the judge; while none is chosen the judge box says so and no profile
        is picked for the person."""
        self.dataset.set_datasets((name, name) for name in datasets)
        self.val_dataset.set_datasets([(HELD_OUT, ""), *((name, name) for name in datasets)])
        self.corpora.clear()
        for name in corpora:
            item = QListWidgetItem(name)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked)
            self.corpora.addItem(item)
        self.judge_profile.clear()
        if active is None:
            self.judge_profile.addItem(NO_JUDGE, None)
        for name in profiles:
            self.judge_profile.addItem(name, name)
        self.judge_profile.setCurrentIndex(max(0, self.judge_profile.findData(active)))
        self._judge_rows()

    def chosen_corpora(self) -> list[str]:
        items = [self.corpora.item(i) for i in range(self.corpora.count())]
        return [it.text() for it in items if it.checkState() == Qt.CheckState.Checked]

    # ---- values ---------------------------------------------------------------------------------
    def set_values(self, values: Mapping[str, Any]) -> None:
        """Show a config's values (a :meth:`TrainConfig.to_dict`); unknown choices are skipped."""
        flat = {**values, **{f"reward.{k}": v for k, v in dict(values.get("reward") or {}).items()}}
        flat.update({f"judge.{k}": v for k, v in dict(values.get("judge") or {}).items()})
        for table in ("lora", "dynamic_sampling", "sft", "validation"):
            flat.update({f"{table}.{k}": v for k, v in dict(values.get(table) or {}).items()})
        app = values.get("generator") == "vllm" and values.get("vllm_mode") == "app_server"
        flat["vllm_mode"] = "app_server" if app else "hf"
        for key, w in self.fields.items():
            if key not in flat or flat[key] is None:
                continue
            v = flat[key]
            if isinstance(w, QCheckBox):
                w.setChecked(bool(v))
            elif isinstance(w, QComboBox):
                at = w.findData(v)
                if at >= 0:
                    w.setCurrentIndex(at)
                elif w is self.val_dataset and v:  # a file of an earlier run: listed again
                    self.val_dataset.set_file(str(v))
            elif isinstance(w, QLineEdit) and key not in ("output_dir", "name"):  # a new run's own
                w.setText(f"{v:g}" if isinstance(v, float) else str(v))
        wanted = set(values.get("corpora") or ())
        items = [self.corpora.item(i) for i in range(self.corpora.count())]
        if wanted & {it.text() for it in items}:  # else keep all ticked
            for it in items:
                it.setCheckState(Qt.CheckState.Checked if it.text() in wanted else Qt.CheckState.Unchecked)

    def mapping(self, data_dir: str) -> dict[str, Any]:
        """The form as ``TrainConfig.from_mapping`` input; a number that does not parse raises
        :class:`ConfigError` naming its field."""
        out: dict[str, Any] = {"reward": {}, "judge": {}, "data_dir": data_dir}
        for key, w in self.fields.items():
            head, _, sub = key.partition(".")
            if isinstance(w, QCheckBox):
                value: Any = w.isChecked()
            elif key == "dataset":
                value = self.dataset.chosen()
            elif isinstance(w, DatasetPicker):  # not the file entry itself, while its dialog is open
                value = w.chosen()
            elif key == "corpora":
                value = self.chosen_corpora()
                if self.corpora.count() and not value:
                    raise ConfigError("corpora", "tick at least one corpus")
            elif isinstance(w, QComboBox):
                value = w.currentData()
            elif key in dict(NUMBERS) or head == "reward" or key in SFT_ONLY or key in dict(VALIDATION):
                value = _number(key, w.text())  # type: ignore[attr-defined]
            else:
                value = w.text().strip()  # type: ignore[attr-defined]
            if sub:
                out.setdefault(head, {})[sub] = value
            else:
                out[key] = value
        sft = out["algorithm"] == "sft"  # no reward: the judge is not asked, so not required
        if out.pop("vllm_mode") == "app_server" and not sft:
            out.update(generator="vllm", vllm_mode="app_server", vllm_url=self.rollout_url)
        if sft:
            out.pop("validation", None)  # no rollouts, no curve: its hidden fields do not apply
        if out["judge"]["kind"] == "profile" and not out["judge"]["profile"] and not sft:
            raise ConfigError("judge.profile", "no model is chosen yet: choose the judge's profile")
        if out["judge"]["kind"] != "profile":
            out["judge"]["profile"] = None
        return out

    def output_dir(self) -> str:
        return self.output.text().strip() or self._default_output

    def set_default_output(self, path: str) -> None:
        """The folder the config would pick; shown until the person types their own."""
        self._default_output = path
        if not self._output_touched and self.output.text() != path:
            self.output.blockSignals(True)
            self.output.setText(path)
            self.output.blockSignals(False)

    # ---- errors ---------------------------------------------------------------------------------
    def show_error(self, error: ConfigError | None) -> None:
        """Turn the named field red with the message beside it (None: clear all)."""
        for key, label in self.errors.items():
            label.setVisible(False)
            if self.fields[key].property("invalid"):
                set_role(self.fields[key], "invalid", None)
        if error is None:
            return
        field = "vllm_mode" if error.field in ("generator", "vllm_url") else error.field
        key = field if field in self.fields else field.partition(".")[0]
        if key == "reward":
            key = "reward.judge"
        if key not in self.fields:
            return
        self.errors[key].setText(error.problem)
        self.errors[key].setVisible(True)
        set_role(self.fields[key], "invalid", "true")  # the theme's error border

    def error_text(self, key: str) -> str:
        label = self.errors.get(key)
        return label.text() if label is not None and not label.isHidden() else ""

    # ---- slots ----------------------------------------------------------------------------------
    def _judge_rows(self) -> None:
        kind = self.judge_kind.currentData()
        for key, show in (
            ("judge.profile", kind == "profile"),
            ("judge.base_url", kind == "url"),
            ("judge.model", kind == "url"),
        ):
            form, box = self.rows[key]
            form.setRowVisible(box, show)

    def _algorithm_changed(self) -> None:
        """GGPO trains VimRAG (its mask is made of graph nodes): choosing it switches the agent,
        rather than leaving a VRAG agent the config refuses. SFT has no rollouts and no reward:
        their fields hide, its own show, and an untouched learning rate follows (RL 1e-6, SFT 1e-5)."""
        algorithm = str(self.algorithm.currentData())
        want = DEFAULT_AGENTS.get(algorithm)
        if want == "vimrag" and self.agent.currentData() == "vrag":
            self.agent.setCurrentIndex(self.agent.findData(want))
        self.show_algorithm_rows()
        lr = self.fields.get("learning_rate")
        if isinstance(lr, QLineEdit):
            old, new = (RL_LR, SFT_LR) if algorithm == "sft" else (SFT_LR, RL_LR)
            try:
                untouched = float(lr.text()) == old
            except ValueError:
                untouched = False
            if untouched:
                lr.setText(f"{new:g}")

    def show_algorithm_rows(self) -> None:
        sft = self.algorithm.currentData() == "sft"
        self.reward_box.setVisible(not sft)
        self.validation_box.setVisible(not sft)
        for key in (*RL_ONLY, *SFT_ONLY):
            if key in self.rows:
                form, box = self.rows[key]
                form.setRowVisible(box, sft == (key in SFT_ONLY))

    def _browse_init(self) -> None:
        start = self.init_from.text() or self.model.text()
        path = QFileDialog.getExistingDirectory(self, "Start from: a run, checkpoint or model folder", start)
        if path:
            self.init_from.setText(path)

    def _browse_model(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Base model folder", self.model.text())
        if path:
            self.model.setText(path)

    def _browse_output(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Output folder", str(Path(self.output_dir()).parent))
        if path:
            self._output_touched = True
            self.output.setText(os.path.join(path, self.name.text().strip() or Path(self.output_dir()).name))

    def _output_edited(self, text: str) -> None:
        self._output_touched = bool(text.strip())
