"""New training run…: the form, the config and exact command it makes, and the pre-flight (items that
match the corpora, the base model, the memory estimate, the trainer environment).

Why a dialog that only gathers: the panel launches; this makes sure what it launches is valid. Every
value is checked as typed by building a :class:`TrainConfig` (its error names the field); everything
that reads files or probes the GPU runs off the GUI thread (:mod:`vrag_desktop.qt.infra.tasks`) and
a stale answer (the person typed on) is dropped. Start is off, with the reason under the form, while
anything would make the launch fail: a bad value, no matching item, a base model or output folder
that cannot be used, the trainer environment missing or broken (the dialog offers to create or
re-create it), or, for rollouts from the app's vLLM server, that server not running with what the
run needs (the rollout-server box starts it through the Runtime dock: ``rollout_box.py``). A run
that would start but cannot learn (an exact judge on sentence answers) is warned about in the
pre-flight box, in the words the CLI prints (``core/training/learnable.py``).
With a validation curve asked for, the held-out set is made as the trainer makes it and said under
the match (which items a split holds out); a set with nothing to validate turns Start off.
Given ``launch`` (the panel's), Start launches from here and a refusal (a full disk, an unwritable
folder) is shown in the dialog, which stays open with its values. On accept: :attr:`config` and
:attr:`run_dir`.
"""

from __future__ import annotations

import html
import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QTimer
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from vrag_desktop.core.training import plan
from vrag_desktop.core.training import preflight as pf
from vrag_desktop.core.training.config import ConfigError, TrainConfig
from vrag_desktop.qt.infra.alive import if_alive
from vrag_desktop.qt.infra.errors import describe, error_sink
from vrag_desktop.qt.infra.tasks import TaskSlot, run_call, run_generator
from vrag_desktop.qt.runtime.style import BAD, MUTED, OK, advice_box, text_label, tone
from vrag_desktop.qt.training.rollout_box import RolloutServerBox
from vrag_desktop.qt.training.run_form import RunForm

if TYPE_CHECKING:
    from vrag_desktop.core.runtime.gpu import GPUReport
    from vrag_desktop.qt.context import AppContext

DEBOUNCE_MS = 250


def _without_server(m: dict[str, Any]) -> TrainConfig | None:
    """The form's app-server run as if its server ran (to say what that server needs), else None."""
    if m.get("vllm_mode") != "app_server" or m.get("vllm_url"):
        return None
    try:
        return TrainConfig.from_mapping({**m, "vllm_url": "http://127.0.0.1:1/v1"})
    except ConfigError:
        return None


class NewRunDialog(QDialog):
    """See the module docstring. ``config`` / ``run_dir`` are set when accepted."""

    def __init__(
        self,
        ctx: AppContext,
        parent: QWidget | None = None,
        launch: Callable[[TrainConfig, Path], Path] | None = None,
    ) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self._launch = launch
        self.launched: Path | None = None
        self._refusal: str | None = None  # the last launch's refusal, until the form changes
        self.setWindowTitle("New training run")
        self.config: TrainConfig | None = None
        self.run_dir: Path | None = None
        self.argv: list[str] = []
        self.gpu_report: GPUReport | None = None
        self.env: pf.EnvStatus | None = None
        self.match: tuple[int, int, list[tuple[str, str]]] | None = None
        self.estimate: pf.Estimate | None = None
        self.answers: pf.AnswerStyle | None = None  # the matched items' answers (warnings)
        self.validation_error: str | None = None  # no validation set can be made (Start is off)
        self._problem: str | None = None  # from the worker: model or output folder not usable
        self._rollouts: str | None = None  # the rollout server cannot serve the run (yet)
        self._error: ConfigError | None = None
        self._matching, self._checking = TaskSlot(), TaskSlot()  # the newest answer of each wins
        self._creating = TaskSlot()  # the trainer environment being made
        self._build()
        self._fill()
        self.form.edited.connect(self._edited)
        self.form.sourcesChanged.connect(self._match_later.start)
        self._validate()
        self._start_probes()
        self.resize(1100, 760)

    # ---- building -------------------------------------------------------------------------------
    def _build(self) -> None:
        self.form = RunForm(self)
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.form)
        self.preview = QPlainTextEdit(self)
        self.preview.setObjectName("runPreview")
        self.preview.setReadOnly(True)
        self.preview.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.match_label = text_label(self, "matchLabel", "Matching the dataset against the corpora…")
        self.validation_label = text_label(self, "validationLabel")  # the held-out set, as said
        self.validation_label.setVisible(False)
        self.model_label = text_label(self, "modelLabel")
        self.memory_label = text_label(self, "memoryLabel", "Estimating memory…")
        tone(self.memory_label, MUTED)
        self.warn_box = QFrame(self)
        self.warn_box.setObjectName("trainPreflight")
        advice_box(self.warn_box)
        self.warn_label = text_label(self.warn_box, "preflightText")
        QVBoxLayout(self.warn_box).addWidget(self.warn_label)
        self.warn_box.setVisible(False)
        self.env_box = self._env_section()
        self.rollout_box = RolloutServerBox(self)
        self.rollout_box.changed.connect(self._validate)
        right = QWidget(self)
        rv = QVBoxLayout(right)
        rv.setContentsMargins(0, 0, 0, 0)
        rv.addWidget(QLabel("<b>Config and command</b>", self))
        rv.addWidget(self.preview, 1)
        for w in (
            self.match_label,
            self.validation_label,
            self.model_label,
            self.memory_label,
            self.warn_box,
            self.rollout_box,
            self.env_box,
        ):
            rv.addWidget(w)
        self.status = text_label(self, "statusLabel")
        tone(self.status, BAD)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self
        )
        self.ok_button = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.ok_button.setText("Start")
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        top = QHBoxLayout()
        top.addWidget(scroll, 3)
        top.addWidget(right, 2)
        lay = QVBoxLayout(self)
        lay.addLayout(top, 1)
        lay.addWidget(self.status)
        lay.addWidget(self.buttons)
        self._check_later = self._timer(self._run_checks)
        self._match_later = self._timer(self._run_match)

    def _timer(self, slot: Any) -> QTimer:
        t = QTimer(self)
        t.setSingleShot(True)
        t.setInterval(DEBOUNCE_MS)
        t.timeout.connect(slot)
        return t

    def _env_section(self) -> QFrame:
        box = QFrame(self)
        box.setObjectName("trainerEnv")
        advice_box(box)
        self.env_label = text_label(box, "envLabel")
        self.env_button = QPushButton("Create the trainer environment", box)
        self.env_button.setObjectName("createTrainerEnv")
        self.env_button.clicked.connect(self.create_env)
        self.env_bar = QProgressBar(box)
        self.env_bar.setRange(0, 0)
        self.env_bar.setMaximumHeight(10)
        self.env_bar.setVisible(False)
        self.env_progress = text_label(box, "envProgress")
        v = QVBoxLayout(box)
        v.addWidget(self.env_label)
        h = QHBoxLayout()
        h.addWidget(self.env_button)
        h.addWidget(self.env_bar, 1)
        v.addLayout(h)
        v.addWidget(self.env_progress)
        box.setVisible(False)
        return box

    def _fill(self) -> None:
        """The app's datasets, corpora and profiles; then the last values used (else the defaults)."""
        lists: dict[str, list[str]] = {"datasets": [], "corpora": [], "profiles": []}
        for key, read in (
            ("datasets", lambda: self.ctx.datasets.names()),
            ("corpora", lambda: self.ctx.library.names()),
            ("profiles", lambda: self.ctx.profiles.names()),
        ):
            try:
                lists[key] = list(read())
            except Exception as exc:
                error_sink().report(f"Cannot list the {key}", exc, "warning")
        active = self.ctx.current_model.name  # the one current model judges unless told otherwise
        self.form.set_choices(lists["datasets"], lists["corpora"], lists["profiles"], active)
        last = pf.load_last_config(self.ctx.layout.config)
        defaults = TrainConfig(model="-", dataset="-").to_dict()
        self.form.set_values({**defaults, "model": "", **(last or {})})

    # ---- validation (GUI thread, cheap) ----------------------------------------------------------
    def _edited(self) -> None:
        self._refusal = None
        self._validate()
        self._check_later.start()

    def _validate(self) -> None:
        """Build the config from the form; the first bad field turns red, OK follows."""
        self._error = None
        self.config = None
        data = str(self.ctx.data_dir)
        self.form.rollout_url = self.rollout_box.url()
        m: dict[str, Any] = {}
        try:
            m = self.form.mapping(data)
            default = TrainConfig.from_mapping({**m, "output_dir": ""}).resolved_output_dir(self.ctx.data_dir)
            self.form.set_default_output(str(default))
            m["output_dir"] = self.form.output_dir()
            self.config = TrainConfig.from_mapping(m)
            plan.check_fields(self.config, self.gpu_report)  # e.g. more GPUs than this machine has
        except ConfigError as exc:
            self.config = None
            self._error = exc
        self.form.show_error(self._error)
        self._rollouts = self.rollout_box.update_for(self.config or _without_server(m))
        if self.config is not None:
            self.run_dir = self.config.resolved_output_dir(self.ctx.data_dir)
            python = self.env.python if self.env is not None and self.env.ready else None
            self.argv = pf.command_preview(self.config, self.run_dir, python, self.gpu_report)
            self.preview.setPlainText(
                json.dumps(self.config.to_dict(), indent=2)
                + "\n\n# The command (run in the trainer environment):\n"
                + shlex.join(self.argv)
            )
        else:
            self.argv = []
            self.preview.setPlainText(f"Not valid yet: {self._error}")
        self._show_warnings()
        self._update_ok()

    def blockers(self) -> list[str]:
        """Why Start is disabled (empty: it is enabled)."""
        out = [str(self._error)] if self._error is not None else []
        if self._problem:
            out.append(self._problem)
        if self._rollouts:
            out.append(self._rollouts)
        if self.match is None:
            out.append("the dataset is still being matched against the corpora")
        elif self.match[0] == 0:
            out.append("no dataset item matches the chosen corpora")
        elif self.validation_error:
            out.append(self.validation_error)
        if self.env is None:
            out.append("the trainer environment is still being checked")
        elif self.env.state == "missing":
            out.append("the trainer environment does not exist yet: create it below")
        elif not self.env.ready:
            out.append("the trainer environment is broken: re-create it below")
        return out

    def _update_ok(self) -> None:
        blockers = self.blockers()
        self.ok_button.setEnabled(not blockers)
        shown = blockers[1:] if self._error is not None else blockers  # the bad field is red already
        text = "Start is off: " + "; ".join(shown) + "." if shown else ""
        self.status.setText(self._refusal or text)
        self.ok_button.setToolTip(text)

    # ---- off the GUI thread ----------------------------------------------------------------------
    def _start_probes(self) -> None:
        from vrag_desktop.core.runtime.gpu import detect_gpus
        from vrag_desktop.core.training.warmstart import warm_start_runs

        run_call(detect_gpus, on_done=if_alive(self, self._gpus_found), report=False)
        run_call(
            warm_start_runs,
            self.ctx.layout.training,
            on_done=if_alive(self, self.form.set_warm_starts),
            report=False,
        )
        self.refresh_env()
        self._run_match()
        self._run_checks()

    def _gpus_found(self, report: GPUReport) -> None:
        self.gpu_report = report
        self._validate()  # the GPU count is checked against the gpus field now
        self._run_checks()

    def _run_match(self) -> None:
        """How many items the trainer would train on (off the GUI thread; stale answers dropped)."""
        spec, corpora, cfg = self.form.dataset.chosen(), self.form.chosen_corpora(), self.config
        self.match = None
        self.answers = None
        self.validation_error = None
        self.validation_label.setVisible(False)
        self._update_ok()
        if not spec:
            self._matching.drop()
            self.match_label.setText("Choose a dataset (one of the app's, or File…).")
            return
        self.match_label.setText("Matching the dataset against the corpora…")
        tone(self.match_label, MUTED)

        def done(check: pf.DatasetCheck) -> None:
            self.match, self.answers = check.match, check.style
            matched, total, problems = check.match
            text = f"{matched} of {total} {check.what}"
            if problems:
                uid, why = problems[0]
                more = f" (and {len(problems) - 1} more: hover)" if len(problems) > 1 else ""
                text += f" · {uid}: {why}{more}"
            if matched == 0:
                text = "No item can be trained on: " + text
            self.match_label.setText(text)
            self.match_label.setToolTip("\n".join(f"{u}: {w}" for u, w in problems[:50]))
            tone(self.match_label, OK if matched else BAD)
            self.validation_error = check.validation_error
            said = [check.validation_error] if check.validation_error else list(check.validation)
            self.validation_label.setText("\n".join(said))
            tone(self.validation_label, BAD if check.validation_error else MUTED)
            self.validation_label.setVisible(bool(said))
            self._show_warnings()
            self._update_ok()

        def failed(exc: BaseException) -> None:
            self.match = (0, 0, [])
            self.match_label.setText(f"Cannot match: {describe(exc)}")
            tone(self.match_label, BAD)
            self._update_ok()

        self._matching.start(
            run_call, pf.check_dataset, spec, corpora, self.ctx.data_dir, cfg,
            on_done=if_alive(self, done), on_error=if_alive(self, failed), report=False,
        )  # fmt: skip

    def _run_checks(self) -> None:
        """The base model, the output folder and the memory estimate, in a worker."""
        from vrag_desktop.core.training.rundir import TrainRun, TrainRunError

        cfg, run_dir, report = self.config, self.run_dir, self.gpu_report
        if cfg is None or run_dir is None:
            self._checking.drop()
            return

        def work() -> tuple[pf.ModelCheck, str | None, pf.Estimate]:
            model = pf.check_model_dir(cfg.model)
            where = pf.output_dir_problem(run_dir)
            try:
                TrainRun.check_free(run_dir)
            except TrainRunError as exc:
                where = where or f"output_dir: {exc}"
            if model.ok:  # a warm start of another architecture, an SFT source with nothing to train
                try:
                    start = plan.check_warm_start(cfg)
                except ConfigError as exc:
                    where = where or str(exc)
                else:
                    if start is not None:
                        model = pf.ModelCheck(
                            True, model.kind, f"{model.message}; starts from the {start.describe()}"
                        )
            return model, where, pf.memory_estimate(cfg.model, cfg, report)

        def done(result: tuple[pf.ModelCheck, str | None, pf.Estimate]) -> None:
            model, where, est = result
            self._problem = (None if model.ok else model.message) or where or est.refusal
            self.model_label.setText(model.message)
            tone(self.model_label, OK if model.ok else BAD)
            self.show_estimate(est if report is not None else None)
            self._update_ok()

        self._checking.start(
            run_call, work, on_done=if_alive(self, done), error_title="Training pre-flight failed"
        )

    def show_estimate(self, est: pf.Estimate | None) -> None:
        self.estimate = est
        if est is None:
            self.memory_label.setText("Detecting GPUs…")
            self._show_warnings()
            return
        head = [ln for ln in est.lines() if ln not in est.warnings]
        self.memory_label.setText("\n".join(head + [f"Assumes: {'; '.join(est.assumptions)}"] * bool(head)))
        self._show_warnings()

    def warnings(self) -> list[str]:
        """The pre-flight's warnings: the memory estimate's, then why the run may learn nothing."""
        out = list(self.estimate.warnings) if self.estimate is not None else []
        if self.config is not None and self.answers is not None:
            out += pf.learning_warnings(self.config, self.answers)
        return out

    def _show_warnings(self) -> None:
        shown = self.warnings()
        items = "".join(f"<li>{html.escape(w)}</li>" for w in shown)
        self.warn_label.setText(f"<b>⚠ Pre-flight</b><ul style='margin-left:-20px'>{items}</ul>")
        self.warn_box.setVisible(bool(shown))

    # ---- trainer environment ---------------------------------------------------------------------
    def refresh_env(self) -> None:
        """Ask (in a worker) whether the trainer environment is ready; shows the Create button if not."""
        target = self.ctx.layout.trainer_env

        def done(status: pf.EnvStatus) -> None:
            self.env = status
            self.env_label.setText(
                status.message + "\nTraining runs in an environment of its own (TRL, accelerate; vLLM on "
                f"a GPU): create it here (minutes) at {target}, or run: vrag-desktop train env"
            )
            self.env_box.setVisible(not status.ready)
            if not self._creating.running:
                self.env_button.setText(self._env_button_text())
            self._validate()

        run_call(pf.env_status, target, on_done=if_alive(self, done), report=False)

    def _env_button_text(self) -> str:
        broken = self.env is not None and self.env.state == "broken"
        return "Re-create the trainer environment" if broken else "Create the trainer environment"

    def create_env(self) -> None:
        """Create (a broken one: re-create) the trainer environment with the core generator; a
        second click cancels."""
        from vrag_desktop.core.runtime.trainer_env import create_trainer_env, default_mode

        if self._creating.running:
            self._creating.cancel()
            return
        target, report = self.ctx.layout.trainer_env, self.gpu_report
        # CPU: layered on the app's env (standalone in the frozen app); GPU: full
        mode = default_mode(report is not None and report.available)
        force = self.env is not None and self.env.state == "broken"

        def ended() -> None:
            self.env_button.setText(self._env_button_text())
            self.env_bar.setVisible(False)
            self.refresh_env()

        self.env_button.setText("Cancel")
        self.env_bar.setVisible(True)
        self._creating.start(
            run_generator,
            lambda token: create_trainer_env(target, mode=mode, cancel=token, force=force),
            "Trainer environment",
            nice=10,
            on_progress=if_alive(self, lambda line: self.env_progress.setText(str(line))),
            on_error=if_alive(self, lambda exc: self.env_progress.setText(f"Failed: {describe(exc)}")),
            on_cancelled=if_alive(self, lambda: self.env_progress.setText("Cancelled: it is incomplete.")),
            on_end=if_alive(self, ended),
            report=False,
        )

    # ---- closing ---------------------------------------------------------------------------------
    def accept(self) -> None:
        self._validate()
        if self.blockers() or self.config is None:
            return
        try:
            pf.save_last_config(self.config, self.ctx.layout.config)
        except OSError as exc:
            error_sink().report("Could not remember the training settings", exc, "warning")
        if self._launch is not None and self.run_dir is not None:
            from vrag_desktop.core.training.launch import TrainLaunchError

            try:
                self.launched = self._launch(self.config, Path(self.run_dir))
            except TrainLaunchError as exc:
                self._refusal = f"Not started: {exc}"
                self._update_ok()
                return
        super().accept()

    def done(self, result: int) -> None:
        self._creating.cancel()
        super().done(result)
