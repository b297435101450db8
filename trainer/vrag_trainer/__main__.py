"""``python -m vrag_trainer grpo|ggpo|sft --config FILE [--run DIR]``, ``resume RUN [--config FILE]``,
``export RUN [--out DIR] [--best]`` — the trainer's own entry, run in its environment (the app's
``vrag-desktop train`` launches exactly this). Exit codes: 0 finished, 1 failed, 2 refused (bad
config or data; the message names the field), 3 stopped on request."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Iterator, Sequence

from vrag_desktop.core.training.config import ConfigError, load_config


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m vrag_trainer", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    for algo in ("grpo", "ggpo", "sft"):
        what = "a supervised warm-start (SFT)" if algo == "sft" else f"a {algo.upper()}"
        s = sub.add_parser(algo, help=f"start {what} run")
        s.add_argument("--config", required=True, help="the run's config (JSON, or TOML on Python 3.11+)")
        s.add_argument("--run", help="the run directory (default: the config's output_dir)")
    r = sub.add_parser("resume", help="resume a run from its last complete checkpoint")
    r.add_argument("run")
    r.add_argument("--config", help="a config to resume with (only resume-safe fields may differ)")
    e = sub.add_parser("export", help="export the last checkpoint as a Hugging Face model directory")
    e.add_argument("run")
    e.add_argument("--out", help="where to write it (default: <run>/export)")
    e.add_argument(
        "--adapter-only",
        action="store_true",
        help="a LoRA run: write only its adapter (to <out>/adapter), not the merged model",
    )
    e.add_argument(
        "--best",
        action="store_true",
        help="export the checkpoint of the best validation reward (best.json), not the last one; "
        "when no validation beat the warm start (init_from), the warm start's weights",
    )
    v = sub.add_parser("verl", help="write a verl (Ray) config, data and launch script for a cluster run")
    v.add_argument("--config", required=True, help="the run's config (JSON or TOML)")
    v.add_argument("--out", required=True, help="the run directory (the bundle goes to <out>/verl)")
    v.add_argument("--nodes", type=int, default=1, help="machines in the Ray cluster")
    v.add_argument("--gpus-per-node", type=int, help="GPUs per machine (default: the config's gpus, or 1)")
    return p


def _lower_priority() -> None:
    """A run the app launched yields the CPU to the desktop (``VRAG_TRAINER_NICE``, set by the
    launcher; unset or 0: full priority). The GPU's work is not slowed; the CPU side only waits
    when the machine is busy with something a person is using."""
    try:
        n = int(os.environ.get("VRAG_TRAINER_NICE") or 0)
    except ValueError:
        return
    if n > 0 and hasattr(os, "nice"):
        with contextlib.suppress(OSError):
            os.nice(n)


@contextlib.contextmanager
def _saying_to_stderr() -> Iterator[None]:
    """The trainer's own log lines on stderr while a command without a run log works (an export:
    what it exports, and from where), where the app's supervisor shows them."""
    log = logging.getLogger("vrag_trainer")
    handler = logging.StreamHandler(sys.stderr)
    old = log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(old)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _lower_priority()
    from vrag_trainer import runner

    try:
        if args.command in ("grpo", "ggpo", "sft"):
            cfg = load_config(args.config, algorithm=args.command)
            return runner.start(cfg, args.run)
        if args.command == "verl":
            from vrag_trainer.verl.config import prepare

            bundle = prepare(
                load_config(args.config), args.out, nodes=args.nodes, gpus_per_node=args.gpus_per_node
            )
            print(bundle.instructions())
            return runner.EXIT_OK
        if args.command == "resume":
            return runner.resume(args.run, load_config(args.config) if args.config else None)
        with _saying_to_stderr():  # which weights were exported (the best's fallback included)
            out = runner.export(args.run, args.out, merged=not args.adapter_only, best=args.best)
        print(out)
        return runner.EXIT_OK
    except (ConfigError, runner.RunRefused) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return runner.EXIT_BAD


if __name__ == "__main__":
    sys.exit(main())
