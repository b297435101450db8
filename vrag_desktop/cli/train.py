"""``vrag-desktop train grpo|ggpo|sft|resume|export|status|stop|env``: training from the terminal.

Why this shape: the trainer runs in its own environment (``train env`` makes it) as a supervised
child (:mod:`vrag_desktop.core.training.launch`). The config is validated here first, so a mistake
is named (field and reason, exit 2) before anything is launched or any directory made; then the
trainer runs in the foreground with its log streamed. Ctrl-C asks for a clean stop at the next step
boundary (a checkpoint is kept, ``train resume`` goes on); a second Ctrl-C kills it.

Exit codes: 0 finished, 3 stopped on request (or ``stop``/``status``: nothing running), 2 bad config
or input, 1 any other failure, 130 killed by a second Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vrag_desktop.cli.common import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    CLIError,
    command_group,
    err,
    make_env,
)

if TYPE_CHECKING:
    from vrag_desktop.core.training.config import TrainConfig
    from vrag_desktop.core.training.rundir import TrainRun
    from vrag_desktop.core.training.validation import BestChoice

EXIT_BAD_INPUT, EXIT_STOPPED = 2, 3


class BadInput(Exception):
    """A config or run the trainer would refuse: printed as one line, exit 2, nothing launched."""


def add_parsers(sub: Any) -> None:
    ts = command_group(
        sub,
        "train",
        help="train an agent with GRPO or GGPO, or its SFT warm start (in the trainer's own environment)",
        description="Reinforcement learning of the VRAG / VimRAG agents, and the supervised warm start "
        "(SFT) a run starts from (init_from). The trainer runs in its own "
        "environment ('vrag-desktop train env' makes it) and writes a run directory: config, "
        "state, metrics.jsonl, train.log, checkpoints, samples, export.",
        epilog="Exit codes: 0 finished, 3 stopped on request, 2 bad config or input, 1 failure.",
    )
    for algo, what in (
        ("grpo", "GRPO (as VRAG-RL)"),
        ("ggpo", "GGPO (as VimRAG: graph-masked)"),
        ("sft", "SFT warm-start (supervised, on a dataset's labelled items or History's SFT export)"),
    ):
        a = ts.add_parser(
            algo,
            help=f"start a new {what} run in the foreground",
            description=f"Validate the config, create the run directory and train with {what}. "
            "Ctrl-C stops cleanly at the next step boundary; a second Ctrl-C kills the trainer.",
        )
        a.add_argument("--config", required=True, metavar="FILE", help="run config (.json or .toml)")
        a.add_argument(
            "--run", metavar="DIR", help="run directory (default: output_dir, else <data>/training/NAME)"
        )
        a.add_argument(
            "--set",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="override a config field (repeatable; JSON values; dotted for tables: judge.kind=exact)",
        )
        _add_grace(a)
    r = ts.add_parser("resume", help="continue a run from its last complete checkpoint")
    r.add_argument("run", metavar="RUN", help="run directory (or its name under <data>/training)")
    r.add_argument("--config", metavar="FILE", help="changed config (only resume-safe fields may differ)")
    _add_grace(r)
    e = ts.add_parser("export", help="write the run's final model as a Hugging Face directory vLLM serves")
    e.add_argument("run", metavar="RUN")
    e.add_argument("--out", metavar="DIR", help="where to write it (default: RUN/export)")
    e.add_argument(
        "--best",
        action="store_true",
        help="the checkpoint of the best validation reward (best.json) instead of the last one; "
        "when no validation beat the warm start (init_from), the warm start's weights",
    )
    _add_grace(e)
    s = ts.add_parser("status", help="a run's state, its last metrics and whether a trainer works on it")
    s.add_argument("run", metavar="RUN")
    s.add_argument("-n", "--rows", type=int, default=5, metavar="N", help="last N metrics rows (default 5)")
    s.add_argument("--json", action="store_true", help="print the status as JSON")
    st = ts.add_parser("stop", help="stop a run's trainer cleanly (at a step boundary), killing it if needed")
    _add_grace(st)
    st.add_argument("run", metavar="RUN")
    v = ts.add_parser(
        "env",
        help="create the trainer's environment (TRL, accelerate; vLLM on a GPU)",
        description="Layered (the default without a GPU): a small venv on top of this one, adding TRL, "
        "accelerate and TensorBoard. Standalone (the default without a GPU in the double-click app, "
        "which has nothing to layer on): its own CPU torch, this app, TRL, accelerate and TensorBoard. "
        "Full (the default with a GPU): its own CUDA torch, vLLM, TRL, accelerate and this app.",
    )
    v.add_argument("--path", metavar="DIR", help="where (default: <data>/runtime/trainer-env)")
    mode = v.add_mutually_exclusive_group()
    for name in ("layered", "standalone", "full"):
        mode.add_argument(f"--{name}", dest="mode", action="store_const", const=name, default=None)
    v.add_argument("--deepspeed", action="store_true", help="also install DeepSpeed (full env)")
    v.add_argument("--force", action="store_true", help="recreate it even if it is ready")


def _add_grace(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--grace",
        type=float,
        default=600.0,
        metavar="S",
        help="seconds a stop waits for the step boundary before killing (default: %(default)g)",
    )


def cmd_train(args: argparse.Namespace) -> int:
    from vrag_desktop.core.training.config import ConfigError
    from vrag_desktop.core.training.launch import TrainLaunchError
    from vrag_desktop.core.training.plan import LaunchRefused
    from vrag_desktop.core.training.rundir import TrainRunError

    handler = {
        "grpo": _new_run,
        "ggpo": _new_run,
        "sft": _new_run,
        "resume": _resume,
        "export": _export,
        "status": _status,
        "stop": _stop,
        "env": _env,
    }[args.train_command]
    try:
        return handler(args)
    except (BadInput, ConfigError, TrainRunError, LaunchRefused) as exc:
        print(f"vrag-desktop: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except TrainLaunchError as exc:
        raise CLIError(str(exc)) from exc


# ---------------------------------------------------------------- launching


def _new_run(args: argparse.Namespace) -> int:
    from vrag_desktop.core.paths import DataLayout
    from vrag_desktop.core.training import plan
    from vrag_desktop.core.training.config import TrainConfig, load_config
    from vrag_desktop.core.training.launch import resolve_trainer_python
    from vrag_desktop.core.training.learnable import dataset_warnings

    layout = DataLayout.resolve(args.data_dir)
    overrides = _parse_sets(args.set)
    said = load_config(args.config, **overrides).algorithm
    if said not in (args.train_command, TrainConfig.algorithm):  # the file names the other one
        raise BadInput(f"algorithm: the config says {said!r}; use 'vrag-desktop train {said}'")
    cfg = load_config(args.config, **{**overrides, "algorithm": args.train_command})
    plan.check_fields(cfg)  # a field this command would not act on: refused before anything else
    root = Path(args.run).expanduser() if args.run else cfg.resolved_output_dir(layout.root)
    python = resolve_trainer_python(layout.trainer_env)
    _rollout_server(cfg, layout.root)  # vllm_mode app_server: its server is there, with its flags
    # the one place a run is set up (as the app's New-run dialog): checks, launch-config.json, argv
    p = plan.new_run(cfg, root, python)
    for warning in dataset_warnings(cfg, Path(cfg.data_dir).expanduser() if cfg.data_dir else layout.root):
        err(f"warning: {warning}")  # it would run, but may learn nothing (the dialog shows the same)
    if cfg.validation.eval_steps:
        from vrag_desktop.core.training.validation import validation_plan

        err(validation_plan(cfg))  # the trainer's log (streamed below) then names the held-out items
    err(f"Run directory: {p.run.root}")
    return _foreground(p.run, p.argv, args.grace, p.what)


def _resume(args: argparse.Namespace) -> int:
    from vrag_desktop.core.paths import DataLayout
    from vrag_desktop.core.training import plan
    from vrag_desktop.core.training.config import changed_fields, load_config
    from vrag_desktop.core.training.launch import resolve_trainer_python

    layout = DataLayout.resolve(args.data_dir)
    run = _open_run(args.run, args.data_dir)
    if args.config:
        new, old = load_config(args.config), run.config()
        changed = changed_fields(old, new)
        if changed:
            raise BadInput(
                f"resume: the config changes {', '.join(changed)}, which a resumed run must keep; "
                "start a new run instead"
            )
    if run.last_checkpoint() is None:
        err("note: no complete checkpoint yet; the trainer starts this run from its first step")
    python = resolve_trainer_python(layout.trainer_env)
    _rollout_server(load_config(args.config) if args.config else run.config(), layout.root)
    p = plan.resume_run(run, python, config=args.config)
    return _foreground(p.run, p.argv, args.grace, p.what)


def _export(args: argparse.Namespace) -> int:
    from vrag_desktop.core.paths import DataLayout
    from vrag_desktop.core.training import plan
    from vrag_desktop.core.training.launch import resolve_trainer_python

    layout = DataLayout.resolve(args.data_dir)
    run = _open_run(args.run, args.data_dir)
    python = resolve_trainer_python(layout.trainer_env)
    p = plan.export_run(run, python, out=args.out, best=args.best)
    code = _foreground(p.run, p.argv, args.grace, p.what, summary=False)
    if code == EXIT_OK:
        out = Path(args.out).expanduser() if args.out else run.export_dir
        choice = _best_choice(run) if args.best else None
        which = choice.what() if choice else "it"
        why = f" ({choice.reason})" if choice and choice.source == "warm_start" else ""
        serve = f"vrag-desktop runtime start {shlex.quote(str(out))}"
        print(f"Exported {which} to {out}{why}. Serve it with: {serve}")
    return code


def _rollout_server(cfg: TrainConfig, data_dir: Path) -> None:
    """Refuse (exit 2) before any trainer starts when a ``vllm_mode: app_server`` run's server
    cannot serve it; a hand-started one whose flags cannot be checked is a warning."""
    from vrag_desktop.core.training import plan

    warning = plan.check_rollout_server(cfg, data_dir)
    if warning:
        err(f"warning: {warning}")


def _foreground(run: TrainRun, argv: list[str], grace: float, what: str, *, summary: bool = True) -> int:
    """Run the trainer under the supervisor until it ends; Ctrl-C once: clean stop, twice: kill."""
    import asyncio

    from vrag_desktop.cli.runtime_start import Interrupt
    from vrag_desktop.core.runtime.logfile import rotate_log
    from vrag_desktop.core.training import launch

    rotate_log(run.log_path)
    err(f"{what} in the foreground (Ctrl-C stops at the next step boundary). Log: {run.log_path}")
    result: dict[str, Any] = {"killed": False}

    async def main() -> int | None:
        sup = await launch.start(run, argv, mode="foreground")
        sup.on_line(err)
        interrupted = Interrupt()
        work = asyncio.ensure_future(sup.wait())
        for attempt in (1, 2):
            if interrupted.event is None:
                break
            if await interrupted.wait_or(work):
                break
            interrupted.event.clear()
            if attempt == 1:
                err("\nStopping at the next step boundary (Ctrl-C again to kill the trainer)…")
                launch.ask_to_stop(run, sup.pid, launch.argv_processes(argv))
                asyncio.get_running_loop().call_later(grace, interrupted.event.set)  # then kill
            else:
                err("\nKilling the trainer…")
                result["killed"] = True
                await sup.stop(grace=2.0)
        await work
        if sup.stopped_elsewhere:
            err("The trainer was stopped (vrag-desktop train stop).")
        return sup.returncode

    from vrag_desktop.core.runtime.exits import ProcessError

    try:
        rc = asyncio.run(main())
    except KeyboardInterrupt:  # where the loop cannot take signal handlers
        return EXIT_INTERRUPTED
    except ProcessError as exc:  # could not be spawned
        raise CLIError(str(exc)) from exc
    return _report(run, rc, result["killed"], summary)


def _report(run: TrainRun, rc: int | None, killed: bool, summary: bool) -> int:
    from vrag_desktop.core.training.launch import outcome

    state = run.state()
    step = state.get("step", 0)
    resume = f"vrag-desktop train resume {shlex.quote(str(run.root))}"
    kind = outcome(rc, run)
    if killed:
        err(f"The trainer was killed at step {step}. Resume from the last checkpoint with: {resume}")
        return EXIT_INTERRUPTED
    if kind == "finished":
        if summary:
            print(f"Training finished at step {step}: {run.root}")
        return EXIT_OK
    if kind == "stopped":
        print(f"Training stopped at step {step}. Resume with: {resume}")
        return EXIT_STOPPED
    if kind == "bad_input":
        err(f"vrag-desktop: error: the trainer refused its input (see the lines above; log: {run.log_path})")
        return EXIT_BAD_INPUT
    detail = f": {state['error']}" if state.get("error") else ""
    err(f"vrag-desktop: error: the trainer failed (exit code {rc}){detail}. Log: {run.log_path}")
    return EXIT_ERROR


# ---------------------------------------------------------------- inspecting


def _status(args: argparse.Namespace) -> int:
    from vrag_desktop.core.training.launch import find_running
    from vrag_desktop.core.training.runs import effective_status, hand_started_pid, status_line

    run = _open_run(args.run, args.data_dir)
    state = run.state()
    rows = run.metrics()[-max(0, args.rows) :] if args.rows else []
    proc = find_running(run)
    pid = proc.pid if proc else hand_started_pid(state)
    ckpt = run.last_checkpoint()
    choice = _best_choice(run)
    best = choice.best  # best.json when it counts by the rule (an older run's at 0 does not)
    val = run.val_metrics()[-1:] if run.val_metrics_path.exists() else []
    data = {
        "run": str(run.root),
        "status": effective_status(state, pid is not None),  # "crashed": killed while running
        "state": state,
        "running": pid is not None,
        "pid": pid,
        "last_checkpoint": {"step": ckpt.step, "path": str(ckpt.path)} if ckpt else None,
        "metrics": rows,
        "best": {"step": best.step, best.metric: best.value, "kept": bool(best.checkpoint)} if best else None,
        "export_best": {
            "source": choice.source,  # checkpoint, warm_start or none (then reason says why)
            "path": str(choice.path) if choice.path else None,
            "reason": choice.reason,
        },
        "validation": val[0] if val else None,
        "log": str(run.log_path),
    }
    if args.json:
        print(json.dumps(data, indent=1, default=str))
        return EXIT_OK
    where = proc.describe() if proc else f"trainer, pid {pid}, started by hand" if pid else "not running"
    print(f"Run:        {run.root}")
    print(f"Status:     {status_line(run, state, pid is not None)}")
    print(f"Process:    {where}")
    print(f"Checkpoint: {f'step {ckpt.step} ({ckpt.path})' if ckpt else 'none yet'}")
    if val:
        v = val[0]
        shown = "  ".join(f"{k[4:]}={_fmt(x)}" for k, x in v.items() if k.startswith("val/"))
        print(f"Validation: step {v.get('step')}: {shown}")
    if val or run.best_path.exists():
        print(f"Best:       {_best_line(run, choice)}")
    if state.get("error"):
        print(f"Error:      {state['error']}")
    for row in rows:
        print("  " + "  ".join(f"{k}={_fmt(v)}" for k, v in row.items()))
    return EXIT_OK


def _best_choice(run: TrainRun) -> BestChoice:
    from vrag_desktop.core.training.validation import best_choice

    return best_choice(run)


def _best_line(run: TrainRun, choice: BestChoice) -> str:
    """``train status``'s "Best:" line: what ``export --best`` would write, or why nothing."""
    from vrag_desktop.core.training.validation import BEST_METRIC

    export = f"vrag-desktop train export {shlex.quote(str(run.root))} --best"
    if choice.source == "checkpoint":
        return f"step {choice.step} ({BEST_METRIC} {choice.value:.4f}); export it with: {export}"
    if choice.source == "warm_start":
        return f"the warm start's weights ({choice.path}): {choice.reason}; export them with: {export}"
    return f"none: {choice.reason}"


def _stop(args: argparse.Namespace) -> int:
    from vrag_desktop.core.training.launch import stop

    run = _open_run(args.run, args.data_dir)
    err(f"Asking the trainer of {run.root} to stop at the next step boundary (up to {args.grace:g} s)…")
    how = stop(run, grace=args.grace)
    if how == "not_running":
        err("No trainer is working on this run.")
        return EXIT_STOPPED
    print(
        "The trainer stopped cleanly."
        if how == "stopped"
        else "The trainer was killed (no step boundary in time)."
    )
    return EXIT_OK


def _env(args: argparse.Namespace) -> int:
    from vrag_desktop.core.paths import DataLayout
    from vrag_desktop.core.runtime.trainer_env import create_trainer_env, default_mode

    target = Path(args.path).expanduser() if args.path else DataLayout.resolve(args.data_dir).trainer_env
    mode = args.mode
    if mode is None:
        from vrag_desktop.core.runtime.gpu import detect_gpus

        report = detect_gpus()
        mode = default_mode(report.available)
        err(report.summary() if report.available else f"No GPU: a {mode} environment (CPU)")
    python = make_env(create_trainer_env(target, mode=mode, deepspeed=args.deepspeed, force=args.force))
    if python is None:
        return EXIT_INTERRUPTED
    print(f"Trainer environment ready: {python}")
    return EXIT_OK


# ---------------------------------------------------------------- helpers


def _open_run(name: str, data_dir: str | None) -> TrainRun:
    """A run by path, or by name under ``<data>/training``."""
    from vrag_desktop.core.paths import DataLayout
    from vrag_desktop.core.training.rundir import TrainRun

    path = Path(name).expanduser()
    if not path.exists() and len(path.parts) == 1:
        path = DataLayout.resolve(data_dir).training / name
    return TrainRun.open(path)


def _parse_sets(items: list[str]) -> dict[str, Any]:
    """``key=value`` pairs; a value is JSON when it parses (numbers, true, lists), else text."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise BadInput(f"--set: expected KEY=VALUE, not {item!r}")
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        out[key.strip()] = value
    return out


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (int, str)):
        return str(v)
    return json.dumps(v, default=str)
